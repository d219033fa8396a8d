"""irbook.course.negatives: the three mining methods against brute force on a fake
encoder, bad input counted, and a real-data cross-check with
sentence_transformers.util.mine_hard_negatives."""

import numpy as np
import pytest

from irbook.course.negatives import (
    MINING_METHODS,
    false_negative_table,
    false_negatives,
    first_positive,
    mine_negatives,
    mine_run,
    st_negatives,
)
from irbook.course.search.dense import Encoder
from irbook.course.synthetic import Summary

WORDS = "cat dog bird fish tree rock sun moon".split()


def bag(texts):
    """Word counts over a small vocabulary, a constant and a small text-dependent term
    (no tied scores): a fake embedding."""
    return np.array(
        [
            [t.lower().split().count(w) for w in WORDS]
            + [0.5, (sum(map(ord, t)) % 97) / 300]
            for t in texts
        ],
        dtype=float,
    )


DOCS = {
    f"d{i}": t
    for i, t in enumerate(
        [
            "cat cat dog",
            "cat dog dog",
            "cat bird",
            "dog fish",
            "tree rock",
            "sun moon",
            "cat cat cat",
            "dog dog dog",
            "bird fish tree",
            "rock sun",
            "moon moon cat",
            "fish fish dog",
        ]
    )
}
QUERIES = {"q1": "cat dog", "q2": "moon sun rock", "q3": "fish bird", "q4": "cat"}
POS = {
    "q1": {"d0"},
    "q2": {"d5", "d9"},
    "q3": {"d8"},
    "q4": {"d6", "d4"},
}  # q4: one close positive, one far


@pytest.fixture
def enc(tmp_path):
    return Encoder("bag", fn=bag, cache_root=tmp_path, progress=False)


def brute(
    q, positives, method, n=3, depth=12, band=(0.3, 0.8), margin=0.95, allowed=None
):
    """Reference miner: every doc scored by hand, sorted, positives and filtered
    candidates dropped."""
    E = bag(list(DOCS.values()))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    v = bag([QUERIES[q]])[0]
    v /= np.linalg.norm(v)
    score = dict(zip(DOCS, E @ v))
    assert len(set(np.round(list(score.values()), 9))) == len(
        score
    )  # no ties: the cut-off is well defined
    pool = sorted(
        (d for d in DOCS if allowed is None or d in allowed),
        key=lambda d: (-score[d], list(DOCS).index(d)),
    )[:depth]
    cands = [d for d in pool if d not in positives]
    if method == "band":
        cands = [d for d in cands if band[0] <= score[d] <= band[1]]
    if method == "positive_aware":
        cands = [
            d for d in cands if score[d] < margin * min(score[p] for p in positives)
        ]
    return cands[:n]


@pytest.mark.parametrize("method", MINING_METHODS)
@pytest.mark.parametrize("depth", [3, 5, 12])
def test_methods_match_brute_force(enc, method, depth):
    neg, s = mine_negatives(
        QUERIES,
        POS,
        DOCS,
        n=3,
        method=method,
        depth=depth,
        band=(0.3, 0.8),
        margin=0.9,
        encoder=enc,
    )
    for q in QUERIES:
        assert neg[q] == brute(q, POS[q], method, depth=depth, margin=0.9), (
            q,
            method,
            depth,
        )
        assert not set(neg[q]) & POS[q]
    assert s[f"mine ({method})", "negatives mined"] == sum(map(len, neg.values()))
    assert s[f"mine ({method})", "queries"] == len(QUERIES)


def test_positive_aware_ceiling_is_margin_times_lowest_positive(enc):
    margins = np.linspace(0.3, 1.0, 29)
    for m in margins:
        neg, _ = mine_negatives(
            QUERIES,
            POS,
            DOCS,
            n=12,
            method="positive_aware",
            margin=float(m),
            encoder=enc,
        )
        assert all(
            neg[q] == brute(q, POS[q], "positive_aware", n=12, margin=m)
            for q in QUERIES
        ), m
    # the data are sharp enough to tell the lowest positive from the highest
    assert any(
        brute("q4", POS["q4"], "positive_aware", n=12, margin=m)
        != [
            d
            for d in brute("q4", {"d6"}, "positive_aware", n=12, margin=m)
            if d != "d4"
        ]
        for m in margins
    )
    counts = [
        sum(len(brute(q, POS[q], "positive_aware", n=12, margin=m)) for q in QUERIES)
        for m in margins
    ]
    assert len(set(counts)) > 3


def test_filter_and_scores(enc):
    flt = {
        "q1": {"d0", "d1", "d2", "d3"},
        "q2": set(DOCS),
        "q3": {"d8", "d3", "d11"},
        "q4": {"d4", "d6", "d7"},
    }
    run, _ = mine_run(QUERIES, POS, DOCS, n=5, encoder=enc, filter=flt)
    for q in QUERIES:
        assert set(run[q]) <= flt[q] - POS[q]
        assert list(run[q]) == brute(q, POS[q], "topk", n=5, allowed=flt[q])
        assert list(run[q].values()) == sorted(run[q].values(), reverse=True)
    assert list(run["q1"]) != brute(
        "q1", POS["q1"], "topk", n=5
    )  # the filter did change something


def test_band_and_ceiling_move_the_result(enc):
    wide, _ = mine_negatives(
        QUERIES, POS, DOCS, n=5, method="band", band=(-1, 1), encoder=enc
    )
    top, _ = mine_negatives(QUERIES, POS, DOCS, n=5, method="topk", encoder=enc)
    assert wide == top
    run, _ = mine_run(
        QUERIES, POS, DOCS, n=5, method="band", band=(0.2, 0.5), encoder=enc
    )
    assert all(0.2 <= s <= 0.5 for r in run.values() for s in r.values())
    loose = mine_negatives(
        QUERIES, POS, DOCS, n=12, method="positive_aware", margin=1.0, encoder=enc
    )[0]
    tight = mine_negatives(
        QUERIES, POS, DOCS, n=12, method="positive_aware", margin=0.5, encoder=enc
    )[0]
    assert all(set(tight[q]) <= set(loose[q]) for q in QUERIES) and sum(
        map(len, tight.values())
    ) < sum(map(len, loose.values()))


def test_positives_in_any_shape(enc):
    as_qrels = {
        "q1": {"d0": 1},
        "q2": {"d5": 2, "d9": 1},
        "q3": ["d8"],
        "q4": ("d6", "d4"),
    }
    assert (
        mine_negatives(QUERIES, as_qrels, DOCS, encoder=enc)[0]
        == mine_negatives(QUERIES, POS, DOCS, encoder=enc)[0]
    )
    assert (
        mine_negatives({"q1": "cat dog"}, {"q1": "d0"}, DOCS, encoder=enc)[0]["q1"][0]
        != "d0"
    )


def test_bad_input_is_counted_not_dropped(enc):
    q = {
        "ok": "cat dog",
        "blank": "  ",
        "none": None,
        "nothing": "cat",
        "nopos": "dog",
        "lost": "bird",
        "noflt": "fish",
    }
    pos = {
        "ok": {"d0"},
        "blank": {"d0"},
        "nothing": {"d0"},
        "lost": {"zzz"},
        "ghost": {"d1"},
        "noflt": {"d3"},
    }
    docs = {**DOCS, "empty": "", "num": 3}
    flt = {k: set(DOCS) | {"unknown"} for k in q if k != "noflt"}
    flt["nothing"] = set()
    s = Summary()
    neg, s = mine_negatives(
        q, pos, docs, n=2, method="positive_aware", encoder=enc, filter=flt, summary=s
    )
    st = "mine (positive_aware)"
    assert set(neg) == set(q) and len(neg["ok"]) == 2
    assert all(neg[k] == [] for k in q if k != "ok")
    assert (
        s[st, "queries"] == 7 and s[st, "blank or non-text query (no negatives)"] == 2
    )
    assert s[st, "doc with blank or non-text text (left out)"] == 2
    assert s[st, "positives for a query not in queries (ignored)"] == 1
    assert s[st, "query missing from the filter (no candidates)"] == 1
    assert (
        s[st, "filter entries naming a doc not in docs (ignored)"] == 3
    )  # "unknown" in the filters of ok, nopos, lost (blank queries are not searched)
    assert s[st, "query with no retrieved chunk (no negatives)"] == 2  # nothing, noflt
    assert s[st, "query without known positives (mined anyway)"] == 1
    assert s[st, "known positives not in docs (ignored)"] == 1
    assert (
        s[
            st,
            "query with no positive in docs (positive_aware: no ceiling, no negatives)",
        ]
        == 2
    )  # nopos, lost
    # top-k needs no ceiling: the query without positives gets negatives
    assert (
        len(mine_negatives(q, pos, docs, n=2, encoder=enc, filter=flt)[0]["nopos"]) == 2
    )
    # empty corpus, empty queries: no crash
    neg, s = mine_negatives({"a": "cat"}, {}, {}, encoder=enc)
    assert (
        neg == {"a": []}
        and s["mine (topk)", "query with no retrieved chunk (no negatives)"] == 1
    )
    assert mine_negatives({}, {}, DOCS, encoder=enc)[0] == {}


@pytest.mark.parametrize(
    "kw",
    [
        {"method": "random"},
        {"n": 0},
        {"n": 2.5},
        {"depth": 0},
        {"band": (0.8, 0.3)},
        {"band": (0.1,)},
        {"margin": 0},
        {"margin": 1.5},
        {"n": True},
    ],
)
def test_bad_arguments_raise(enc, kw):
    with pytest.raises(ValueError):
        mine_negatives(QUERIES, POS, DOCS, encoder=enc, **kw)


def test_false_negative_counting():
    neg = {"a": ["x", "y", "z"], "b": ["u"], "c": []}
    fn = false_negatives(neg, {"a": {"y", "z"}, "b": {"v"}})
    assert (
        fn.loc["a", "false"] == 2
        and fn.loc["a", "first_false_rank"] == 2
        and fn.loc["b", "false"] == 0
    )
    t = false_negative_table({"m": neg}, {"a": {"y", "z"}})
    assert t.loc["m", "negatives"] == 4 and t.loc["m", "false negatives"] == 2
    assert (
        t.loc["m", "false-negative rate"] == 0.5
        and abs(t.loc["m", "queries with a false negative"] - 1 / 3) < 1e-12
    )


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_real_data_matches_sentence_transformers():
    """On the smallest chapter of the book, every method with one and with all
    positives: ours == sentence-transformers."""
    pytest.importorskip("datasets")
    from collections import Counter

    from irbook.course.chunking import chunk_book
    from irbook.course.fastbook import contexts_to_qrels, load_questions
    from irbook.course.search.fulltext import chapter_filter
    from irbook.data import cache_dir

    qs, chunks = load_questions(), chunk_book("group", n=3)
    ch = min(Counter(c.chapter for c in chunks.values()).items(), key=lambda x: x[1])[0]
    qs = [q for q in qs if q.chapter == ch]
    docs = {cid: c.text for cid, c in chunks.items()}
    queries, flt = {q.qid: q.text for q in qs}, chapter_filter(qs, chunks)
    gold = {q: set(v) for q, v in contexts_to_qrels(qs, chunks).items()}
    enc = Encoder(progress=False)
    model = enc.model()
    for pos in (first_positive(qs, chunks), gold):
        for method in MINING_METHODS:
            ours = mine_negatives(
                queries,
                pos,
                docs,
                n=5,
                method=method,
                depth=20,
                filter=flt,
                encoder=enc,
            )[0]
            theirs = st_negatives(
                queries,
                pos,
                docs,
                n=5,
                method=method,
                depth=20,
                filter=flt,
                model=model,
                cache_folder=cache_dir() / "st-mine",
            )
            assert sum(map(len, ours.values())) > 0
            assert ours == theirs, method


def test_st_negatives_draws_no_progress_bars(monkeypatch):
    """mine_hard_negatives asks its model for progress bars (ipywidgets on a notebook
    page, which the site must not carry): st_negatives encodes without them, and leaves
    the model as it was."""
    pytest.importorskip("datasets")
    from sentence_transformers import SentenceTransformer

    model = Encoder(progress=False).model()
    asked, real = [], SentenceTransformer.encode

    def spy(self, *args, **kw):
        asked.append(kw.get("show_progress_bar"))
        return real(self, *args, **kw)

    monkeypatch.setattr(SentenceTransformer, "encode", spy)
    out = st_negatives(QUERIES, POS, DOCS, n=2, depth=8, model=model)
    assert set(out) == set(QUERIES) and any(out.values())
    assert asked and not any(asked), asked
    assert not {"encode_query", "encode_document"} & set(vars(model))
