"""irbook.spans: judgments as spans of the source text. Property tests on random texts
and chunkings (re-chunking at the same coverage leaves span scores unchanged), and the
reference on the fastbook benchmark: containment gives today's `contexts_to_qrels` and
today's Modified Recall@10."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irbook.spans import (
    Span,
    group_recall,
    holds,
    locate,
    locate_all,
    merge,
    overlap,
    read,
    span_scores,
    spans_to_qrels,
)

SCORES = ["span_recall", "span_precision", "judged_chars", "read_chars", "found_chars"]


def chars(spans):
    return {(s.doc, i) for s in spans for i in range(s.start, s.end)}


def layout_of(cuts, n, prefix):
    "A chunking of `d[0:n]` cut at `cuts`: {id: (Span,)} in document order."
    edges = [0, *sorted(set(cuts) - {0, n}), n]
    return {
        f"{prefix}{i:03d}": (Span("d", a, b),)
        for i, (a, b) in enumerate(zip(edges, edges[1:]))
    }


def run_in_order(layout, keep):
    "A run of the chunks inside `keep` (a set of characters), in document order."
    ids = [c for c, segs in layout.items() if chars(segs) <= keep]
    return {c: float(len(ids) - r) for r, c in enumerate(ids)}


@st.composite
def setting(draw):
    "Text length, judged spans, two chunkings refining common cells, cells retrieved."
    n = draw(st.integers(20, 300))
    cells = sorted(draw(st.sets(st.integers(1, n - 1), max_size=8)))
    a = set(cells) | draw(st.sets(st.integers(1, n - 1), max_size=20))
    b = set(cells) | draw(st.sets(st.integers(1, n - 1), max_size=20))
    edges = [0, *cells, n]
    pick = draw(
        st.lists(st.booleans(), min_size=len(edges) - 1, max_size=len(edges) - 1)
    )
    keep = {
        ("d", i)
        for (lo, hi), p in zip(zip(edges, edges[1:]), pick)
        if p
        for i in range(lo, hi)
    }
    starts = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    judged = [Span("d", s, min(n, s + draw(st.integers(1, 40)))) for s in starts]
    budget = draw(st.none() | st.floats(0, n / 3))
    return n, layout_of(a, n, "a"), layout_of(b, n, "b"), keep, judged, budget


@settings(max_examples=300, deadline=None)
@given(setting())
def test_rechunking_at_the_same_coverage_leaves_span_scores_unchanged(case):
    # Same coverage: both runs make the reader take in the same characters of the
    # source in the same order (here: non-overlapping chunks covering the same cells,
    # read in document order). Then every span score is the same, at any budget.
    n, la, lb, keep, judged, budget = case
    judged = {"q": judged}
    ra, rb = run_in_order(la, keep), run_in_order(lb, keep)
    assert chars(s for c in ra for s in la[c]) == chars(s for c in rb for s in lb[c])
    sa = span_scores(judged, {"q": ra}, la, budget=budget)
    sb = span_scores(judged, {"q": rb}, lb, budget=budget)
    assert sa[SCORES].equals(sb[SCORES])
    # and the numbers are the set-of-characters ones
    read_a = chars(read(list(ra), la, budget=budget))
    truth = chars(judged["q"])
    assert sa.loc["q", "found_chars"] == len(truth & read_a)
    assert sa.loc["q", "judged_chars"] == len(truth)


@settings(max_examples=200, deadline=None)
@given(setting())
def test_reading_everything_finds_every_judged_character(case):
    n, la, lb, _, judged, _ = case
    for layout in (la, lb):
        run = {"q": {c: 1.0 for c in layout}}
        for kw in ({}, {"budget": n / 4}, {"k": len(layout)}):
            s = span_scores({"q": judged}, run, layout, **kw).loc["q"]
            assert s.span_recall == 1.0 and s.read_chars == n
            assert s.span_precision == len(chars(judged)) / n


@settings(max_examples=200, deadline=None)
@given(setting(), st.integers(2, 15))
def test_overlapping_windows_same_recall_lower_precision(case, w):
    # windows of width 2w every w characters cover the text like any partition, so the
    # same span recall when everything is read; but every character is read about
    # twice, so span precision can only drop
    n, la, _, _, judged, _ = case
    windows = {
        f"w{i:03d}": (Span("d", s, min(n, s + 2 * w)),)
        for i, s in enumerate(range(0, n, w))
    }
    sa = span_scores({"q": judged}, {"q": {c: 1.0 for c in la}}, la).loc["q"]
    sw = span_scores({"q": judged}, {"q": {c: 1.0 for c in windows}}, windows).loc["q"]
    assert sw.span_recall == sa.span_recall == 1.0
    assert sw.span_precision <= sa.span_precision


@settings(max_examples=200, deadline=None)
@given(setting(), st.floats(0.01, 1.0))
def test_rules_are_nested(case, f):
    # contain == fraction 1.0, and contain => fraction f => overlap
    _, la, _, _, judged, _ = case
    q = {"q": judged}
    contain, frac, any_ = (
        spans_to_qrels(q, la, r).get("q", {}) for r in ("contain", f, "overlap")
    )
    assert spans_to_qrels(q, la, 1.0) == spans_to_qrels(q, la)
    assert set(contain) <= set(frac) <= set(any_)
    for c in any_:
        assert any(overlap(la[c], [s]) for s in judged)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=8))
def test_merge_and_overlap_count_characters(pairs):
    spans = [Span("d", s, s + w) for s, w in pairs]
    m = merge(spans)
    assert chars(m) == chars(spans)
    assert all(x.end < y.start for x, y in zip(m, m[1:]))
    other = [Span("d", 10, 30), Span("d", 25, 45)]
    assert overlap(spans, other) == len(chars(spans) & chars(other))


# references, computed by hand


def test_budget_cuts_the_last_chunk_or_drops_it():
    layout = {"a": (Span("d", 0, 30),), "b": (Span("d", 30, 50), Span("d", 60, 80))}
    # 10 tokens of 4 characters: all of b (40 characters), nothing of a
    assert read(["b", "a"], layout, budget=10) == [Span("d", 30, 50), Span("d", 60, 80)]
    # 12 tokens: b, then the first 8 characters of a
    assert read(["b", "a"], layout, budget=12)[-1] == Span("d", 0, 8)
    assert read(["b", "a"], layout, budget=12, partial="drop") == list(layout["b"])
    # 5 tokens cut b inside its first span
    assert read(["b", "a"], layout, budget=5) == [Span("d", 30, 50)]
    assert read(["b", "a"], layout, budget=6) == [Span("d", 30, 50), Span("d", 60, 64)]
    assert read(["b", "a"], layout, budget=6, chars_per_token=1) == [Span("d", 30, 36)]


def test_span_scores_by_hand():
    layout = {"a": (Span("d", 0, 30),), "b": (Span("d", 30, 50), Span("d", 60, 80))}
    judged = {"q": [Span("d", 25, 35), [Span("d", 70, 90)]], "empty": [[]]}
    s = span_scores(judged, {"q": {"b": 2.0, "a": 1.0}}, layout, k=1)
    assert list(s.index) == ["q"]  # no judged text: left out
    # judged 10 + 20 = 30 characters; b holds 30..35 and 70..80: 15 of them; reads 40
    assert s.loc["q"].tolist() == [0.5, 15 / 40, 30, 40, 15]
    # neither span lies whole inside b; a group without spans is never found
    got = group_recall(judged, {"q": {"b": 2.0}}, layout, k=1).to_dict()
    assert got == {"q": 0.0, "empty": 0.0}


def test_group_recall_by_hand():
    layout = {"a": (Span("d", 0, 30),), "b": (Span("d", 30, 50), Span("d", 60, 80))}
    judged = {"q": [[Span("d", 31, 40)], [Span("d", 70, 90), Span("d", 0, 5)]]}
    run = {"q": {"b": 2.0, "a": 1.0}}
    assert group_recall(judged, run, layout, k=1)["q"] == 0.5
    assert group_recall(judged, run, layout, k=2)["q"] == 1.0
    assert group_recall(judged, run, layout, k=1, rule="overlap")["q"] == 1.0
    assert holds(layout["b"], Span("d", 45, 55), 0.5) and not holds(
        layout["b"], Span("d", 45, 55), 0.6
    )


def test_locate_refuses_absent_and_ambiguous_passages():
    text = "the cat sat on the mat"
    assert locate("cat", text, "d") == Span("d", 4, 7)
    assert [s.start for s in locate_all("the", text)] == [0, 15]
    with pytest.raises(ValueError, match="is not in document 'd'"):
        locate("dog", text, "d")
    with pytest.raises(ValueError, match="occurs 2 times"):
        locate("the", text, "d")


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="0 <= start < end"):
        Span("d", 3, 3)
    with pytest.raises(ValueError, match="not in chunks"):
        span_scores(
            {"q": [Span("d", 0, 1)]}, {"q": {"zz": 1.0}}, {"a": (Span("d", 0, 2),)}
        )
    with pytest.raises(ValueError, match="fraction in"):
        spans_to_qrels({"q": [Span("d", 0, 1)]}, {"a": (Span("d", 0, 2),)}, rule=1.5)


# the fastbook benchmark (needs the offline data)

needs_data = pytest.mark.skipif(
    not os.environ.get("IRBOOK_DATA"),
    reason="needs IRBOOK_DATA (the fastbook chapters and benchmark)",
)
CHUNKINGS = {  # the four chunkings of Part II
    "3 paragraphs + header": dict(strategy="group", n=3),
    "paragraphs": dict(strategy="paragraph"),
    "~500 tokens (350 words)": dict(strategy="tokens", size=350),
    "~1000 tokens (700 words)": dict(strategy="tokens", size=700),
}


@pytest.fixture(scope="module")
def bench():
    from irbook.course.chunking import benchmark_spans, chunk_book, chunk_layout
    from irbook.course.fastbook import load_questions

    questions = load_questions()
    books = {n: chunk_book(**o) for n, o in CHUNKINGS.items()}
    return (
        questions,
        books,
        {n: chunk_layout(c) for n, c in books.items()},
        benchmark_spans(questions),
    )


@needs_data
@pytest.mark.parametrize("name", CHUNKINGS)
def test_layout_rebuilds_every_chunk(bench, name):
    from irbook.course.chunking import book_texts

    raw = book_texts(raw=True)
    _, books, layouts, _ = bench
    for cid, c in books[name].items():
        segs = layouts[name][cid]
        assert "\n\n".join(raw[s.doc][s.start : s.end] for s in segs) == c.text, cid


@needs_data
@pytest.mark.parametrize("name", CHUNKINGS)
def test_containment_is_contexts_to_qrels(bench, name):
    from irbook.course.fastbook import contexts_to_qrels

    questions, books, layouts, judged = bench
    for graded in (False, True):
        want = contexts_to_qrels(questions, books[name], graded=graded)
        assert spans_to_qrels(judged, layouts[name], graded=graded) == want


@needs_data
@pytest.mark.parametrize("name", CHUNKINGS)
def test_group_recall_is_modified_recall(bench, name):
    from irbook.course.chunking import oracle_run
    from irbook.course.common import as_docs, as_queries
    from irbook.course.fastbook import score_run
    from irbook.course.search.fulltext import BM25sRetriever, chapter_filter

    questions, books, layouts, judged = bench
    chunks = books[name]
    bm25 = (
        BM25sRetriever(stem=True)
        .index(as_docs(chunks))
        .search(as_queries(questions), 100, chapter_filter(questions, chunks))
    )
    for run in (bm25, oracle_run(chunks, questions)):
        want = score_run(run, chunks, questions, k=10).modified_recall
        got = group_recall(judged, run, layouts[name], k=10)
        assert got.reindex(want.index).tolist() == want.tolist()
        assert 0 < want.mean() < 1  # a real test: neither nothing nor everything found
