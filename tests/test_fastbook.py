"""Tests for irbook.course.fastbook (benchmark loading, modified metrics, qrels) and
irbook.course.chunking (chunkers, ceiling).

Expected values are computed by hand or by deliberately naive re-implementations written
here, never copied from what the library prints. Needs IRBOOK_DATA pointing at the
offline data (the real chapters and benchmark).
"""

import copy
import itertools
import random
import re

import pytest

from irbook.core import ranking
from irbook.course.chunking import (
    Chunk,
    ceiling,
    chunk_book,
    count_tokens,
    group_chunks,
    notebook_blocks,
    oracle_run,
    paragraph_chunks,
    render_code,
    token_chunks,
)
from irbook.course.fastbook import (
    benchmark_stats,
    contexts_to_qrels,
    first_hits,
    load_questions,
    matching_chunks,
    modified_mrr,
    modified_recall,
    normalize,
    parse_question,
    score_run,
)
from irbook.data import FASTBOOK_CHAPTERS, load_benchmark, load_fastbook_chapter

# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def questions():
    return load_questions()


@pytest.fixture(scope="module")
def chapters():
    return {ch: load_fastbook_chapter(ch) for ch in FASTBOOK_CHAPTERS}


@pytest.fixture(scope="module")
def paras():
    return chunk_book("paragraph")


def q_(*contexts, chapter=1, number=1):
    "A hand-made question, one component per argument (each a list of contexts)."
    return parse_question(
        {
            "chapter": chapter,
            "question_number": number,
            "question_text": "q?",
            "answer_context": [
                {"answer_component": f"c{i}", "context": list(c)}
                for i, c in enumerate(contexts)
            ],
        }
    )


# ---- modified metrics, by hand


def test_modified_metrics_hand_computed():
    q = q_(["red apple"], ["green pear", "yellow pear"])
    docs = ["a red apple here", "nothing", "one yellow pear", "green pear again"]
    # apple found at rank 1, pear first found at rank 3 -> complete at rank 3
    assert first_hits(docs, q) == [1, 3]
    assert modified_mrr(docs, q) == pytest.approx(1 / 3)
    assert modified_recall(docs, q) == 1.0
    assert modified_mrr(docs, q, k=2) == 0.0  # pear not in the top 2
    assert modified_recall(docs, q, k=2) == 0.5
    assert modified_mrr(docs[::-1], q) == pytest.approx(1 / 4)  # apple now last
    assert modified_mrr(["green pear and red apple"], q) == 1.0
    assert modified_mrr([], q) == 0.0 and modified_recall([], q) == 0.0


def test_modified_metrics_empty_component_caps_mrr():
    q = q_(["alpha"], [])  # second component has no context
    assert modified_mrr(["alpha beta"], q) == 0.0
    assert modified_recall(["alpha beta"], q) == 0.5
    assert not q.answerable


def test_matching_after_fix_text_both_sides():
    q = q_(["the model\u2019s weights"])  # curly apostrophe in the benchmark
    assert modified_mrr(["we train the model's weights"], q) == 1.0
    q2 = q_(["don't"])
    assert modified_mrr(["we donâ€™t"], q2) == 1.0  # mojibake in the passage
    assert normalize("donâ€™t") == "don't"
    # matching is case-sensitive, like the benchmark author's
    assert modified_mrr(["THE MODEL'S WEIGHTS"], q) == 0.0


def _naive_mrr(texts, contexts_per_comp, k):
    """Straight from the definition: the smallest r such that the top r hold a context
    of every component."""
    for r in range(1, min(k, len(texts)) + 1):
        top = texts[:r]
        if all(any(c in t for t in top for c in comp) for comp in contexts_per_comp):
            return 1 / r
    return 0.0


def _naive_recall(texts, contexts_per_comp, k):
    top = texts[:k]
    return sum(
        any(c in t for t in top for c in comp) for comp in contexts_per_comp
    ) / len(contexts_per_comp)


def test_modified_metrics_match_naive_definition_on_random_cases():
    rnd = random.Random(0)
    words = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen"]
    for _ in range(300):
        comps = [
            [rnd.choice(words) for _ in range(rnd.randint(0, 2))]
            for _ in range(rnd.randint(1, 4))
        ]
        texts = [
            " ".join(rnd.sample(words, rnd.randint(0, 3)))
            for _ in range(rnd.randint(0, 12))
        ]
        k = rnd.randint(1, 12)
        q = q_(*comps)
        assert modified_mrr(texts, q, k) == pytest.approx(_naive_mrr(texts, comps, k))
        assert modified_recall(texts, q, k) == pytest.approx(
            _naive_recall(texts, comps, k)
        )


def test_metric_argument_errors():
    q = q_(["x"])
    for bad_k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be"):
            modified_mrr(["x"], q, k=bad_k)
    with pytest.raises(ValueError, match="1_1"):
        modified_mrr("x", q)  # a bare string, not a list of texts


# ---------------------------------------------------------------- score_run and qrels


def test_score_run_ranks_by_score_and_breaks_ties_by_id():
    q = q_(["gold"])
    chunks = {"a": "junk", "b": "gold", "c": "junk"}
    # a and b tie at 1.0: tie broken by id, so "a" is first and gold is at rank 2
    df = score_run({"1_1": {"b": 1.0, "a": 1.0, "c": 0.5}}, chunks, [q])
    assert (
        df.loc["1_1", "modified_mrr"] == 0.5 and df.loc["1_1", "modified_recall"] == 1.0
    )
    assert ranking({"b": 1.0, "a": 1.0, "c": 3.0}) == ["c", "a", "b"]
    assert (
        score_run({}, chunks, [q]).loc["1_1", "modified_mrr"] == 0.0
    )  # absent question scores 0
    assert (
        score_run({"1_1": {"c": 9, "a": 8, "b": 7}}, chunks, [q], k=2).loc[
            "1_1", "modified_mrr"
        ]
        == 0.0
    )
    with pytest.raises(ValueError, match="1_1.*zzz"):
        score_run({"1_1": {"zzz": 1.0}}, chunks, [q])


def test_contexts_to_qrels_and_chapter_restriction():
    q = q_(["alpha"], ["beta"], chapter=2, number=5)
    chunks = {
        "x": Chunk("x", 2, "alpha beta"),
        "y": Chunk("y", 2, "beta"),
        "z": Chunk("z", 1, "alpha"),
    }
    assert contexts_to_qrels([q], chunks) == {"2_5": {"x": 1, "y": 1}}
    assert contexts_to_qrels([q], chunks, graded=True) == {"2_5": {"x": 2, "y": 1}}
    assert matching_chunks(q, chunks) == [{"x"}, {"x", "y"}]
    assert contexts_to_qrels([q], {"z": Chunk("z", 1, "alpha beta")}) == {}


def test_qrels_on_real_chunks_hold_contexts(questions, paras):
    qrels = contexts_to_qrels(questions, paras)
    assert len(qrels) == 191
    for q in questions[::10]:
        ctxs = [normalize(c) for comp in q.components for c in comp.contexts]
        for cid in qrels[q.qid]:
            assert paras[cid].chapter == q.chapter
            assert any(c in normalize(paras[cid].text) for c in ctxs)


# ---- loading and malformed entries


def test_load_questions_ids_and_types(questions):
    assert len(questions) == 191
    assert len({q.qid for q in questions}) == 191
    assert all(q.qid == f"{q.chapter}_{q.number}" for q in questions)
    assert {q.chapter for q in questions} == set(FASTBOOK_CHAPTERS)


@pytest.fixture
def good_entry():
    return copy.deepcopy(load_benchmark()["questions"][6])  # question 1_7


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda e: e.pop("answer_context"), "missing 'answer_context'"),
        (
            lambda e: e["answer_context"][0].__setitem__("context", "a string"),
            "must be a list",
        ),
        (lambda e: e["answer_context"][0].pop("context"), "missing 'context'"),
        (
            lambda e: e["answer_context"][0].__setitem__("context", [3]),
            "non-empty string",
        ),
        (
            lambda e: e["answer_context"][0].__setitem__("context", ["  "]),
            "non-empty string",
        ),
        (lambda e: e.__setitem__("answer_context", []), "non-empty list"),
        (
            lambda e: e["answer_context"][0].__setitem__("explicit_context", "maybe"),
            "explicit_context",
        ),
    ],
)
def test_malformed_entries_name_the_question(good_entry, breakage, message):
    breakage(good_entry)
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        parse_question(good_entry)
    assert "1_7" in str(e.value)


def test_unknown_chapter_and_bad_entries(good_entry):
    good_entry["chapter"] = 3
    with pytest.raises(ValueError, match="unknown chapter 3"):
        parse_question(good_entry)
    with pytest.raises(ValueError, match="entry #4"):
        parse_question("not a dict", 4)
    with pytest.raises(ValueError, match="question_number"):
        parse_question({"chapter": 1, "question_number": "7"})


def test_duplicate_question_rejected(good_entry):
    with pytest.raises(ValueError, match="1_7.*twice"):
        load_questions({"questions": [good_entry, copy.deepcopy(good_entry)]})
    with pytest.raises(ValueError, match="questions"):
        load_questions({"items": []})


# ---- statistics (README of the benchmark)


def test_statistics_equal_published_tables(questions):
    s = benchmark_stats(questions)
    # github.com/vishalbakshi/fastbook-benchmark README, "Dataset Statistics"
    published = {
        "questions": [30, 26, 31, 23, 27, 20, 34],
        "components": [78, 58, 73, 31, 48, 27, 42],
        "empty": [8, 5, 8, 1, 1, 1, 1],
        "implicit": [8, 5, 10, 3, 4, 4, 7],
        "extraneous": [7, 2, 8, 1, 0, 0, 1],
    }
    for col, values in published.items():
        assert list(s.loc[[1, 2, 4, 8, 9, 10, 13], col]) == values, col
    assert dict(s.loc["total", list(published)]) == dict(
        questions=191, components=357, empty=25, implicit=41, extraneous=19
    )
    # independent count straight from the raw JSON
    raw = load_benchmark()["questions"]
    assert (
        sum(1 for e in raw if any(c["context"] == [] for c in e["answer_context"]))
        == s.loc["total", "unanswerable"]
        == 19
    )


# ---------------------------------------------------------------- chunkers


def test_render_code_format():
    cell = {
        "cell_type": "code",
        "source": ["a = 1\n", "a"],
        "outputs": [
            {"output_type": "stream", "name": "stdout", "text": ["hi\n"]},
            {"output_type": "display_data", "data": {"image/png": "..."}},
            {
                "output_type": "execute_result",
                "data": {"text/plain": ["1"], "text/html": ["<b>1</b>"]},
            },
        ],
    }
    assert render_code(cell) == "```python\na = 1\na\n```\nOutput:\nhi\n\n1"
    assert render_code(cell, outputs=False) == "```python\na = 1\na\n```"


TOY_NB = {
    "nbformat": 4,
    "cells": [
        {
            "cell_type": "markdown",
            "source": "# Title\n\nintro one\n\n  \nintro two\n\n#clean\nnot a header",
        },
        {"cell_type": "code", "source": "x = 1", "outputs": []},
        {"cell_type": "code", "source": "   ", "outputs": []},
        {"cell_type": "markdown", "source": "## Part\n\np1\n\np2\n\np3\n\np4"},
        {"cell_type": "markdown", "source": "## Questionnaire\n\n1. Why?"},
        {"cell_type": "markdown", "source": "### Further Research\n\n1. Find out."},
        {"cell_type": "markdown", "source": "## Afterword\n\nlast"},
    ],
}


def test_blocks_on_toy_notebook():
    bl = notebook_blocks(TOY_NB)
    assert [(b.kind, b.text) for b in bl] == [
        ("header", "# Title"),
        ("markdown", "intro one"),
        ("markdown", "intro two"),
        ("markdown", "#clean\nnot a header"),
        ("code", "```python\nx = 1\n```"),
        ("header", "## Part"),
        ("markdown", "p1"),
        ("markdown", "p2"),
        ("markdown", "p3"),
        ("markdown", "p4"),
        ("header", "## Afterword"),
        ("markdown", "last"),
    ]
    assert [b.header for b in bl][1] == "# Title" and bl[-1].header == "## Afterword"
    with pytest.raises(ValueError, match="cells"):
        notebook_blocks({"nope": 1})


def test_strategies_on_toy_notebook():
    p = paragraph_chunks(TOY_NB, 2)
    assert len(p) == 9 and p[0].id == "c02_0000" and p[0].text == "# Title\n\nintro one"
    assert paragraph_chunks(TOY_NB, 2, prefix_header=False)[0].text == "intro one"
    g = group_chunks(TOY_NB, 2, n=3)
    assert [c.blocks for c in g] == [(1, 2, 3), (4,), (6, 7, 8), (9,), (11,)]
    assert g[2].text == "## Part\n\np1\n\np2\n\np3"
    t = token_chunks(TOY_NB, 2, size=4)
    assert all(count_tokens(c.text) <= 4 for c in t)
    with pytest.raises(ValueError):
        group_chunks(TOY_NB, 2, n=0)
    with pytest.raises(ValueError):
        token_chunks(TOY_NB, 2, size=0)
    with pytest.raises(ValueError, match="unknown chunking strategy"):
        chunk_book("sentences")


def _all_strategies():
    return {
        "paragraph": chunk_book("paragraph"),
        "noprefix": chunk_book("paragraph", prefix_header=False),
        "group3": chunk_book("group", n=3),
        "group5": chunk_book("group", n=5),
        "tokens500": chunk_book("tokens", size=500),
        "tokens120": chunk_book("tokens", size=120),
    }


@pytest.fixture(scope="module")
def books():
    return _all_strategies()


def test_chunk_invariants(books, chapters):
    for name, chunks in books.items():
        for ch in FASTBOOK_CHAPTERS:
            mine = [c for c in chunks.values() if c.chapter == ch]
            assert [c.id for c in mine] == [
                f"c{ch:02d}_{i:04d}" for i in range(len(mine))
            ], name
            assert all(c.text.strip() for c in mine), f"{name}: empty chunk"
            assert not any(
                "## Questionnaire" in c.text or "Further Research" in (c.header or "")
                for c in mine
            ), name


def test_every_paragraph_in_exactly_one_chunk(books, chapters):
    for name in ("paragraph", "noprefix", "group3", "group5"):
        for ch, nb in chapters.items():
            blocks = notebook_blocks(nb)
            want = [b.index for b in blocks if b.kind != "header"]
            got = [i for c in books[name].values() if c.chapter == ch for i in c.blocks]
            assert got == want, (name, ch)
            by_index = {b.index: b for b in blocks}
            for c in books[name].values():
                if c.chapter == ch:
                    assert all(by_index[i].text in c.text for i in c.blocks)
                    assert (
                        len({by_index[i].header for i in c.blocks}) == 1
                    )  # one header per chunk


def test_token_chunks_keep_every_token_once(books, chapters):
    for name, size in (("tokens500", 500), ("tokens120", 120)):
        for ch, nb in chapters.items():
            want = [t for b in notebook_blocks(nb) for t in b.text.split()]
            mine = [c for c in books[name].values() if c.chapter == ch]
            assert [t for c in mine for t in c.text.split()] == want
            assert max(count_tokens(c.text) for c in mine) <= size


def test_questionnaire_text_is_dropped(paras, chapters):
    for ch, nb in chapters.items():
        cells = nb["cells"]
        i = next(
            i for i, c in enumerate(cells) if "## Questionnaire" in "".join(c["source"])
        )
        tail = "\n".join(
            "".join(c["source"]) for c in cells[i + 1 :] if c["cell_type"] == "markdown"
        )
        items = [
            line.strip() for line in tail.splitlines() if re.match(r"\s*\d+\. \S", line)
        ]
        assert len(items) >= 10, f"chapter {ch}: questionnaire items not found"
        texts = [c.text for c in paras.values() if c.chapter == ch]
        leaked = sum(any(item in t for t in texts) for item in items)
        assert leaked == 0, f"chapter {ch}: {leaked} questionnaire lines are in chunks"


def test_author_chunk_counts(paras):
    # the benchmark author's get_chunks asserts 1967 one-paragraph and 713
    # three-paragraph chunks on these files
    assert len(paras) == 1967
    assert len(chunk_book("group", n=3)) == 713


# ---------------------------------------------------------------- ceiling


def test_ceiling_toy_by_hand():
    q = q_(["A"], ["B"], ["C"])
    chunks = {
        "1": Chunk("1", 1, "A"),
        "2": Chunk("2", 1, "A B"),
        "3": Chunk("3", 1, "C"),
        "4": Chunk("4", 2, "A B C"),
    }
    c = ceiling(chunks, [q]).loc["1_1"]
    assert (c.modified_mrr, c.modified_recall, c.mrr_loose, c.chunks_needed) == (
        0.5,
        1.0,
        1.0,
        2,
    )
    c1 = ceiling(chunks, [q], k=1).loc["1_1"]
    assert c1.modified_mrr == 0.0 and c1.modified_recall == pytest.approx(2 / 3)
    qe = q_(["A"], [])
    ce = ceiling(chunks, [qe]).loc["1_1"]
    assert (ce.modified_mrr, ce.modified_recall, ce.mrr_loose) == (0.0, 0.5, 0.0)


def _brute_min_cover(sets, limit=3):
    cand = sorted(set().union(*sets))
    for r in range(1, limit + 1):
        for combo in itertools.combinations(cand, r):
            if all(s & set(combo) for s in sets):
                return r
    return None


def test_ceiling_equals_brute_force(questions, paras):
    cei = ceiling(paras, questions)
    checked = 0
    for q in questions:
        sets = matching_chunks(q, paras)
        if not all(sets) or len(set().union(*sets)) > 40:
            continue
        m = _brute_min_cover(sets)
        if m is None:
            assert cei.loc[q.qid, "chunks_needed"] > 3
        else:
            assert cei.loc[q.qid, "modified_mrr"] == pytest.approx(1 / m), q.qid
        checked += 1
    assert checked > 100


def test_published_ceiling_on_paragraph_chunks(questions, paras):
    cei = ceiling(paras, questions)
    # design card anchor: 0.9005 / 0.9665 (paragraph chunks, markdown + code with
    # outputs)
    assert round(cei.mrr_loose.mean(), 4) == 0.9005
    assert round(cei.modified_recall.mean(), 4) == 0.9665
    # the same numbers from the benchmark alone: answerable share, and mean share of
    # non-empty components
    assert cei.mrr_loose.mean() == pytest.approx(172 / 191)
    assert cei.modified_recall.mean() == pytest.approx(
        sum(
            sum(bool(c.contexts) for c in q.components) / len(q.components)
            for q in questions
        )
        / 191
    )
    # the exact ceiling is lower and is attained by the oracle run
    assert cei.modified_mrr.mean() < cei.mrr_loose.mean()
    scored = score_run(oracle_run(paras, questions), paras, questions)
    assert list(scored.modified_mrr) == pytest.approx(list(cei.modified_mrr))
    assert list(scored.modified_recall) == pytest.approx(list(cei.modified_recall))


def test_ceiling_drops_without_outputs(questions):
    no_out = ceiling(chunk_book("paragraph", outputs=False), questions)
    no_code = ceiling(chunk_book("paragraph", code=False), questions)
    assert (
        no_out.modified_recall.mean() < 0.9665
        and no_code.modified_recall.mean() < no_out.modified_recall.mean()
    )
