"""irbook.course.search.fusion: fusion equals ranx, ties by doc id, tuning never sees
the reported half, re-ranking stays in its pool.

Expected values come from ranx itself on the same runs, from the RRF formula written out
here, or from the retriever's own filtered search; nothing is read back from the code
under test."""

import json
import random
import warnings

import numpy as np
import pytest
import ranx
from hypothesis import given, settings
from hypothesis import strategies as st

from irbook.core import ranking
from irbook.course.chunking import Chunk
from irbook.course.part2 import cached_run
from irbook.course.search.fulltext import BM25sRetriever
from irbook.course.search.fusion import (
    fuse,
    maxp,
    rerank,
    rrf,
    split_tune_report,
    tune_fusion,
)

DOCS = [f"d{i:02d}" for i in range(12)]  # one id width: ranx compiles once per width


@st.composite
def run_pair(draw, n_runs=2):
    """n_runs runs over the same queries, every query with at least one doc per run and
    no tied scores within a query."""
    qids = [f"q{i}" for i in range(draw(st.integers(1, 5)))]
    runs = []
    for _ in range(n_runs):
        run = {}
        for q in qids:
            docs = draw(
                st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True)
            )
            scores = draw(
                st.lists(
                    st.floats(-50, 50, allow_nan=False),
                    min_size=len(docs),
                    max_size=len(docs),
                    unique=True,
                )
            )
            run[q] = dict(zip(docs, scores))
        runs.append(run)
    return runs


def _ranx(runs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # numba's uint64 -> int64 cast warning inside ranx
        return ranx.fuse([ranx.Run(r) for r in runs], **kw).to_dict()


def _same(ours, ref):
    for q in ref:
        assert set(ours[q]) == set(ref[q])
        assert np.allclose(
            [ours[q][d] for d in ref[q]], list(ref[q].values()), rtol=1e-9, atol=1e-12
        )


@settings(max_examples=25, deadline=None)
@given(run_pair())
def test_rrf_equals_ranx(runs):
    _same(rrf(runs, k=None), _ranx(runs, method="rrf", norm=None, params={"k": 60}))


@settings(max_examples=25, deadline=None)
@given(run_pair(3), st.lists(st.floats(0, 1), min_size=3, max_size=3))
def test_wsum_equals_ranx(runs, w):
    ours = fuse(runs, method="wsum", norm="min-max", params={"weights": w}, k=None)
    _same(ours, _ranx(runs, method="wsum", norm="min-max", params={"weights": w}))


@settings(max_examples=15, deadline=None)
@given(run_pair(), st.sampled_from(["sum", "mnz"]), st.sampled_from([None, "min-max"]))
def test_other_methods_equal_ranx(runs, method, norm):
    _same(
        fuse(runs, method=method, norm=norm, k=None),
        _ranx(runs, method=method, norm=norm),
    )


@settings(max_examples=25, deadline=None)
@given(run_pair(), st.integers(1, 6))
def test_top_k_is_a_prefix_in_ranking_order(runs, k):
    full, top = rrf(runs, k=None), rrf(runs, k=k)
    for q in full:
        assert list(top[q]) == ranking(full[q])[:k] and list(full[q]) == ranking(
            full[q]
        )


def test_rrf_by_formula_with_ties_and_missing_queries():
    # ties inside a run are ranked by doc id whatever the dict order; q2 only in one
    # run, q3 in none
    for order in (["b", "a", "c"], ["c", "a", "b"], ["a", "b", "c"]):
        r1 = {"q1": {d: 1.0 for d in order}, "q3": {}}
        r2 = {"q1": {"c": 5.0}, "q2": {"x": 2.0, "y": 1.0}}
        f = rrf([r1, r2], k=None)
        assert f["q1"] == pytest.approx(
            {"a": 1 / 61, "b": 1 / 62, "c": 1 / 63 + 1 / 61}
        )
        assert list(f["q1"]) == ["c", "a", "b"]
        assert f["q2"] == pytest.approx({"x": 1 / 61, "y": 1 / 62}) and f["q3"] == {}


def test_fuse_bad_input():
    with pytest.raises(ValueError):
        fuse([])
    with pytest.raises(ValueError):
        fuse({"q": {"a": 1.0}})
    with pytest.raises(ValueError):
        fuse([{"q": ["a"]}, {"q": {"a": 1.0}}])
    with pytest.raises(ValueError, match="weights"):
        fuse(
            [{"q": {"a": 1.0}}, {"q": {"b": 1.0}}],
            method="wsum",
            params={"weights": [1.0]},
        )
    with pytest.raises(ValueError, match="k must"):
        rrf([{"q": {"a": 1.0}}], k=0)
    assert rrf([{"q": {}}, {}]) == {"q": {}}


# --- tuning on one half only
# -------------------------------------------------------------------------


def _toy(seed, n=30):
    rng = random.Random(seed)
    qids = [f"q{i:02d}" for i in range(n)]
    runs = [
        {q: {d: rng.random() for d in rng.sample(DOCS, 6)} for q in qids}
        for _ in range(3)
    ]
    qrels = {q: {rng.choice(list(runs[0][q])): 1} for q in qids}
    return qids, runs, qrels


def test_split_questions():
    ids = [f"{c}_{i}" for c in range(1, 5) for i in range(1, 12)]
    tune, report = split_tune_report(ids, seed=3)
    assert (
        set(tune).isdisjoint(report)
        and set(tune) | set(report) == set(ids)
        and abs(len(tune) - len(report)) <= 1
    )
    assert split_tune_report(list(reversed(ids)), seed=3) == (tune, report)
    assert split_tune_report(ids, seed=4) != (tune, report)
    with pytest.raises(ValueError):
        split_tune_report(ids, frac=1.0)


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10_000))
def test_tuned_weights_never_see_the_reported_half(seed):
    qids, runs, qrels = _toy(seed)
    tune, report = split_tune_report(qids, seed=seed)
    w = tune_fusion(runs, qrels, tune, method="wsum")
    # scramble everything on the reported half: runs and qrels
    rng = random.Random(seed + 1)
    runs2 = [
        {
            q: ({d: rng.random() for d in rng.sample(DOCS, 5)} if q in report else s)
            for q, s in r.items()
        }
        for r in runs
    ]
    qrels2 = {
        q: ({rng.choice(DOCS): 1} if q in report else v) for q, v in qrels.items()
    }
    assert tune_fusion(runs2, qrels2, tune, method="wsum") == w

    # and the tuned weights are the best on the tuning half by ranx's own grid search
    # there
    def only(r):
        return {q: r[q] for q in tune}

    ref = ranx.optimize_fusion(
        ranx.Qrels({q: qrels[q] for q in tune}),
        [ranx.Run(only(r)) for r in runs],
        norm="min-max",
        method="wsum",
        metric="mrr@10",
        show_progress=False,
    )
    assert w == ref


def test_tuning_can_see_a_difference():
    # the relevant doc is always run 0's favourite: the tuned weights must favour run 0
    qids = [f"q{i}" for i in range(10)]
    a = {q: {"x": 3.0, "y": 2.0, "z": 1.0} for q in qids}
    b = {q: {"z": 3.0, "y": 2.0, "x": 1.0} for q in qids}
    w = tune_fusion([a, b], {q: {"x": 1} for q in qids}, qids)["weights"]
    assert w[0] > w[1]
    with pytest.raises(ValueError):
        tune_fusion([a], {q: {"x": 1} for q in qids}, qids)
    with pytest.raises(ValueError):
        tune_fusion([a, b], {}, qids)


# --- re-ranking
# --------------------------------------------------------------------------------------

CORPUS = {
    "a1": "A GPU is a graphics processing unit; GPUs train neural networks fast.",
    "a2": "The CPU runs the program. The GPU runs the matrix multiplications.",
    "a3": "Fine-tuning adapts a pretrained model to a new dataset.",
    "b1": "A random forest averages many decision tree predictions.",
    "b2": "A decision tree splits the data on one column at a time.",
    "b3": "Gradient boosting fits each tree to the residuals of the previous ones.",
    "c1": "The learning rate sets the size of each gradient step on the model.",
    "c2": "Data augmentation makes new training images from the old ones.",
}
QUERIES = {
    "q1": "Which unit runs the model on the GPU?",
    "q2": "How do decision tree ensembles fit the data?",
    "q3": "What does the learning rate of a model set?",
}


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(list(QUERIES)),
        st.dictionaries(st.sampled_from(list(CORPUS)), st.floats(0, 1), max_size=8),
    ),
    st.integers(1, 5),
    st.integers(1, 8),
)
def test_rerank_only_returns_candidates(cands, k, depth):
    r = BM25sRetriever().index(CORPUS)
    out = rerank(r, QUERIES, cands, k=k, depth=depth)
    assert set(out) == set(QUERIES)
    for q in QUERIES:
        pool = ranking(cands.get(q, {}))[:depth]
        assert set(out[q]) <= set(pool) and len(out[q]) <= k
        # the order is the second-stage retriever's own order on that pool
        ref = r.search({q: QUERIES[q]}, k=len(CORPUS), filter={q: set(pool)})[q]
        assert list(out[q]) == ranking(ref)[:k] and all(
            out[q][d] == ref[d] for d in out[q]
        )


def test_cached_run(tmp_path):
    calls = []

    def make():
        return calls.append(1) or {"q": {"a": 1.0}}

    assert cached_run("x", make, {"d": "t"}, 10, root=tmp_path) == {"q": {"a": 1.0}}
    assert (
        cached_run("x", make, {"d": "t"}, 10, root=tmp_path) == {"q": {"a": 1.0}}
        and len(calls) == 1
    )
    cached_run("x", make, {"d": "t2"}, 10, root=tmp_path)
    cached_run("y", make, {"d": "t"}, 10, root=tmp_path)
    assert len(calls) == 3
    for p in tmp_path.glob("*.json"):
        p.write_text("{not json")  # damaged files are recomputed
    assert (
        cached_run("x", make, {"d": "t"}, 10, root=tmp_path) == {"q": {"a": 1.0}}
        and len(calls) == 4
    )

    def valid(p):
        try:
            return bool(json.loads(p.read_text()))
        except ValueError:
            return False

    assert (
        sum(map(valid, tmp_path.glob("*.json"))) == 1
    )  # only the recomputed one is whole again


def test_cached_run_is_recomputed_when_the_retriever_code_changes(
    tmp_path, monkeypatch
):
    import irbook.course.part2 as F

    calls = []

    def make():
        return calls.append(1) or {"q": {"a": float(len(calls))}}

    assert F.cached_run("x", make, 10, root=tmp_path) == {"q": {"a": 1.0}}
    assert (
        F.cached_run("x", make, 10, root=tmp_path) == {"q": {"a": 1.0}}
        and len(calls) == 1
    )
    monkeypatch.setattr(F, "code_fingerprint", lambda: "other code")
    assert (
        F.cached_run("x", make, 10, root=tmp_path) == {"q": {"a": 2.0}}
        and len(calls) == 2
    )


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=6, max_size=6),
    st.dictionaries(
        st.sampled_from([f"p{i}" for i in range(6)]), st.floats(-5, 5), max_size=6
    ),
)
def test_maxp_is_the_best_contained_paragraph(owner, scores):
    # six one-block paragraphs in chapter 1; coarse chunk w<j> holds the paragraphs i
    # with owner[i] == j
    fine = {f"p{i}": Chunk(f"p{i}", 1, "x", blocks=(i,)) for i in range(6)}
    coarse = {
        f"w{j}": Chunk(
            f"w{j}", 1, "x", blocks=tuple(i for i in range(6) if owner[i] == j)
        )
        for j in set(owner)
    }
    out = maxp({"q": scores}, fine, coarse)["q"]
    expect = {}
    for i in range(6):
        if f"p{i}" in scores:
            expect[f"w{owner[i]}"] = max(
                expect.get(f"w{owner[i]}", -np.inf), scores[f"p{i}"]
            )
    assert out == expect


def test_fused_and_rerank_retrievers_keep_the_contract():
    "FusedRetriever == rrf of its parts; RerankRetriever == rerank; filters pass down."
    from irbook.course.search.fusion import FusedRetriever, RerankRetriever

    docs = {
        "a": "cats purr and sleep",
        "b": "dogs bark at cats",
        "c": "birds sing at dawn",
        "d": "cats and dogs and birds",
    }
    queries = {"q1": "cats dogs", "q2": "birds singing", "q3": "   "}
    flt = {"q1": {"a", "b", "c"}, "q2": {"c", "d"}, "q3": {"a"}}
    parts = [BM25sRetriever(), BM25sRetriever(stem=True)]
    fused = FusedRetriever(parts, depth=3).index(docs)
    want = rrf([p.search(queries, 3, flt) for p in parts], k=2)
    assert fused.search(queries, k=2, filter=flt) == {**want, "q3": {}}
    rr = RerankRetriever(BM25sRetriever(), BM25sRetriever(stem=True), depth=2)
    got = rr.index(docs).search(queries, k=2, filter=flt)
    first = BM25sRetriever().index(docs).search(queries, 2, flt)
    assert got == {
        **rerank(BM25sRetriever(stem=True).index(docs), queries, first, 2, 2)
    }
    assert all(set(got[q]) <= flt[q] for q in queries)
    with pytest.raises(ValueError, match="at least one retriever"):
        FusedRetriever([])
