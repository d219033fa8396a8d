"""irbook.metrics equals ranx: property tests on random qrels/runs for every registered
metric, and the JQaRA runs.

Run: IRBOOK_DATA=/work/shared/data python -m pytest tests/test_metrics_ranx.py -q
"""

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irbook.metrics as M
from irbook.stats import ranx_per_query, vs_ranx

ranx = pytest.importorskip("ranx")
Qrels, Run = ranx.Qrels, ranx.Run

RANX_METRICS = (
    "hits",
    "hit_rate",
    "precision",
    "recall",
    "f1",
    "r-precision",
    "bpref",
    "rbp",
    "mrr",
    "map",
    "dcg",
    "ndcg",
    "dcg_burges",
    "ndcg_burges",
)

warnings.filterwarnings("ignore", module="numba")

# every doc id has exactly 3 characters: ranx compiles one numba specialisation per
# string width
DOCS = [f"d{i:02d}" for i in range(24)] + ["文書1", "éà2", "doc"]
ATOL = 1e-9


def metric_names():
    "All registered metrics with several cut-offs, persistences and relevance levels."
    out = []
    for name in sorted(M.METRICS):
        if name == "rbp":
            out += ["rbp.5", "rbp.8", "rbp.95", "rbp.8-l2", "rbp.3-l3"]
        else:
            out += [
                name,
                f"{name}@1",
                f"{name}@3",
                f"{name}@10",
                f"{name}@3-l2",
                f"{name}-l2",
                f"{name}@5-l3",
            ]
    return out


# ---------------------------------------------------------------- strategies
labels = st.integers(0, 3)
tie_scores = st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, -1.0])  # many ties
free_scores = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def qrels_and_run(draw, allow_mismatch=False):
    nq = draw(st.integers(1, 5))
    qids = [f"q{i}" for i in range(nq)]
    qrels, run = {}, {}
    for q in qids:
        judged = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=12, unique=True)
        )
        qrels[q] = {d: draw(labels) for d in judged}
        n = draw(st.integers(0, 20))  # 0 = empty result list
        docs = draw(
            st.lists(st.sampled_from(DOCS), min_size=n, max_size=n, unique=True)
        )
        scores = tie_scores if draw(st.booleans()) else free_scores
        run[q] = {d: draw(scores) for d in docs}
    if not any(run.values()):  # ranx cannot build an all-empty Run
        run[qids[0]] = {DOCS[0]: 1.0}
    if allow_mismatch:
        for q in qids[1:]:
            if draw(st.booleans()):
                del run[q]  # query missing from the run
        if draw(st.booleans()):
            run["zz"] = {DOCS[1]: 0.5, DOCS[2]: 0.5}  # run query absent from qrels
        if not any(run.get(q) for q in qids):
            run[qids[0]] = {DOCS[0]: 1.0}
    # shuffle key order so nothing relies on insertion order
    keys = draw(st.permutations(list(run)))
    return qrels, {q: run[q] for q in keys}


HSET = dict(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
N_DICT = int(os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES", 600))
N_OBJ = int(os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES_OBJ", 400))


@st.composite
def some_metrics(draw, n=12):
    """A random subset of the registered metric spellings (every spelling is drawn often
    over the run)."""
    names = metric_names()
    return draw(
        st.lists(
            st.sampled_from(names),
            min_size=min(n, len(names)),
            max_size=min(n, len(names)),
            unique=True,
        )
    )


@settings(max_examples=N_DICT, **HSET)
@given(qrels_and_run(), some_metrics())
def test_dicts_equal_ranx(data, ms):
    "Plain dicts in irbook == ranx's Qrels/Run for every registered metric."
    qd, rd = data
    both = vs_ranx(qd, rd, ms, atol=ATOL)  # irbook on the dicts, ranx on Qrels/Run
    assert list(both.index) == sorted(qd)


@settings(max_examples=N_OBJ, **HSET)
@given(
    qrels_and_run(allow_mismatch=True),
    some_metrics(),
    st.sampled_from(["dicts", "objects", "qrels object", "run object"]),
)
def test_make_comparable_equal_ranx(data, ms, kind):
    """Missing and extra queries under make_comparable=True == ranx, for ranx objects,
    dicts and mixtures."""
    qd, rd = data
    qrels_in = Qrels(qd) if kind in ("objects", "qrels object") else qd
    run_in = Run(rd) if kind in ("objects", "run object") else rd
    # ranx on fresh objects (its make_comparable modifies the run), irbook on the inputs
    theirs = ranx_per_query(Qrels(qd), Run(rd), ms, make_comparable=True)
    vs_ranx(qrels_in, run_in, ms, ATOL, make_comparable=True, ranx_scores=theirs)
    if kind in ("objects", "run object"):
        assert len(run_in) == len(rd), "irbook must not modify the run it is given"


def test_hypothesis_budget():
    "At least 1000 random qrels/run pairs are checked against ranx in total."
    assert N_DICT + N_OBJ >= 1000 or os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES")


def test_numba_argsort_replays_numba():
    "The Python port of numba's quicksort argsort gives numba's order, ties included."
    from numba import njit

    @njit(cache=False)
    def ref(a):
        return np.argsort(a)

    rng = np.random.default_rng(0)
    for _ in range(1500):
        a = rng.integers(0, rng.integers(1, 6), rng.integers(0, 150)).astype(float)
        assert M.numba_argsort(a) == list(ref(a))
    a = rng.normal(size=500)
    assert M.numba_argsort(a) == list(ref(a))


def test_tie_order_matches_ranx_run():
    "A long all-tied list comes out of to_ranked in exactly ranx's Run order."
    docs = [f"d{i:02d}" for i in range(60)]
    qd = {"q": {d: (i % 4) for i, d in enumerate(docs)}}
    rd = {"q": {d: 1.0 for d in docs}}
    r = M.to_ranked(qd, rd, keep_ids=True)
    by_hash = {
        float(hash(d)): d for d in docs
    }  # ranx stores hash(doc id) in its arrays
    ranx_ids = [by_hash[h] for h in np.asarray(Run(rd).to_typed_list()[0])[:, 0]]
    assert r.doc_ids[0].tolist() == ranx_ids
    assert r.rel[0].tolist() == [qd["q"][d] for d in ranx_ids]


def test_all_ranx_metrics_registered():
    "Chapters 2-4 register every ranx metric name."
    missing = sorted(set(RANX_METRICS) - set(M.METRICS))
    assert not missing, f"not registered yet: {missing}"


# ---------------------------------------------------------------- JQaRA
JQARA = [
    "bm25",
    "multilingual-e5-small",
    "multilingual-e5-large",
    "bge-m3+dense",
    "JaColBERTv2.5",
    "ruri-small",
    "japanese-reranker-cross-encoder-small-v1",
    "random",
]
PUBLISHED = ["ndcg@10", "mrr@10"]  # the README publishes these two only


def jqara_metrics():
    "One spelling per registered metric, at depths JQaRA reports, plus a few variants."
    out = []
    for name in sorted(M.METRICS):
        out += (
            ["rbp.8", "rbp.95"]
            if name == "rbp"
            else [f"{name}@10", f"{name}@100", name]
        )
    return out


def _ranx_cache_dir():
    from pathlib import Path

    import platformdirs

    d = (
        Path(os.environ.get("IRBOOK_CACHE") or platformdirs.user_cache_dir("irbook"))
        / "test-ranx"
    )
    d.mkdir(parents=True, exist_ok=True)
    return d


def ranx_jqara_scores(data, name, ms, qrels):
    """ranx's per-query scores for one JQaRA run, cached on disk under a key of (ranx
    version, file hashes, metrics)."""
    import hashlib
    import importlib.metadata
    import json

    files = [data.fetch("jqara/qrels.trec"), data.fetch(f"jqara/runs/{name}.lz4")]
    key = hashlib.sha256(
        json.dumps(
            [
                importlib.metadata.version("ranx"),
                [data.sha256_file(f) for f in files],
                ms,
            ]
        ).encode()
    ).hexdigest()[:24]
    path = _ranx_cache_dir() / f"{name}-{key}.npz"
    if path.exists():
        with np.load(path) as z:
            return {m: z[f"m{i}"] for i, m in enumerate(ms)}
    scores = ranx_per_query(qrels(), data.load_jqara_run(name), ms)
    np.savez(path, **{f"m{i}": scores[m] for i, m in enumerate(ms)})
    return scores


@pytest.fixture(scope="module")
def jqara():
    data = pytest.importorskip("irbook.data")
    if not os.environ.get("IRBOOK_DATA"):
        pytest.skip("IRBOOK_DATA not set")
    qd = M.read_qrels(data.fetch("jqara/qrels.trec"))
    ms = sorted(set(jqara_metrics()) | set(PUBLISHED))
    cache = {}

    def qrels():
        return cache.setdefault("q", data.load_jqara_qrels())

    dicts = {name: M.read_run(data.fetch(f"jqara/runs/{name}.lz4")) for name in JQARA}
    ranx_scores = {name: ranx_jqara_scores(data, name, ms, qrels) for name in JQARA}
    return dict(
        data=data,
        qrels=qrels,
        qd=qd,
        dicts=dicts,
        ranx=ranx_scores,
        published=data.load_jqara_leaderboard(),
        ms=ms,
    )


@pytest.mark.slow  # reads eight real runs; ranx == published: tests/test_jqara.py
@pytest.mark.parametrize("name", JQARA)
def test_jqara_equal_ranx(jqara, name):
    """irbook == ranx per query for every registered metric on each JQaRA run (qrels/run
    read as dicts)."""
    ms = jqara_metrics()
    theirs = {m: jqara["ranx"][name][m] for m in ms}
    vs_ranx(jqara["qd"], jqara["dicts"][name], ms, ATOL, ranx_scores=theirs)


@pytest.mark.slow
def test_jqara_ranx_objects_equal_ranx(jqara):
    """The ranx-object input path (typed lists, hash matching) on a real run with ties:
    bm25."""
    ms = jqara_metrics()
    run = jqara["data"].load_jqara_run("bm25")
    theirs = {m: jqara["ranx"]["bm25"][m] for m in ms}
    vs_ranx(jqara["qrels"](), run, ms, ATOL, ranx_scores=theirs)


@pytest.mark.slow
@pytest.mark.parametrize("name", JQARA)
def test_jqara_published(jqara, name):
    "irbook's means reproduce the README's ndcg@10 / mrr@10 (4 decimals)."
    if not {"ndcg", "mrr"} <= set(M.METRICS):
        pytest.skip("ndcg/mrr not registered yet (chapters 3-4)")
    if name not in jqara["published"].index:
        pytest.skip(f"{name} is not on the README's leaderboard")
    got = M.evaluate(jqara["qd"], jqara["dicts"][name], PUBLISHED)
    exp = jqara["published"].loc[name]
    for m in PUBLISHED:
        assert round(got[m], 4) == pytest.approx(exp[m], abs=1e-12), (
            name,
            m,
            got[m],
            exp[m],
        )
