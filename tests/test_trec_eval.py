"""irbook.metrics with ties="trec_eval" equals trec_eval (pytrec_eval), per query,
on random qrels/runs full of ties and graded labels, and on the JQaRA runs.

trec_eval orders a query's documents by score descending, then by doc id descending as
strings (form_res_rels.c); it scores the queries that are in both the qrels and the run.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irbook.metrics as M

pytrec_eval = pytest.importorskip("pytrec_eval")

# irbook metric -> trec_eval measure (k = cut-off)
PAIRS = {
    "precision@{k}": "P_{k}",
    "recall@{k}": "recall_{k}",
    "map": "map",
    "map@{k}": "map_cut_{k}",
    "ndcg": "ndcg",
    "ndcg@{k}": "ndcg_cut_{k}",
    "mrr": "recip_rank",
    "r-precision": "Rprec",
    "bpref": "bpref",
    "hit_rate@{k}": "success_{k}",
}
KS = (1, 3, 5, 10)
DOCS = [f"d{i}" for i in range(15)] + ["D1", "d10a", "文書", "é", "z", "a"]
ATOL = 1e-9
N = int(os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES", 1000))
HSET = dict(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def measures():
    "irbook name -> trec_eval name, for every pair and cut-off."
    out = {}
    for ours, theirs in PAIRS.items():
        for k in KS if "{k}" in ours else (None,):
            out[ours.format(k=k)] = theirs.format(k=k)
    return out


MEASURES = measures()


def trec_eval_per_query(qrels, run, names):
    "trec_eval's per-query values {irbook metric: array over sorted(qrels)}."
    wanted = set()
    for ours in names:
        m = MEASURES[ours]
        base, _, k = m.rpartition("_") if m[-1].isdigit() else (m, "", "")
        wanted.add(f"{base}.{k}" if k else m)
    res = pytrec_eval.RelevanceEvaluator(qrels, wanted).evaluate(run)
    return {o: np.array([res[q][MEASURES[o]] for q in sorted(qrels)]) for o in names}


labels = st.integers(0, 3)
# 1 +- 1e-12: distinct doubles, one 32-bit float (trec_eval keeps `float sim`)
tie_scores = st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.0 + 1e-12, 1.0 - 1e-12, 2.0, -1.0])


@st.composite
def qrels_and_run(draw):
    "Qrels and a run over the same queries, every query retrieving at least one doc."
    nq = draw(st.integers(1, 5))
    qrels, run = {}, {}
    for i in range(nq):
        q = f"q{i}"
        judged = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True)
        )
        qrels[q] = {d: draw(labels) for d in judged}
        docs = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=15, unique=True)
        )
        free = st.floats(-100, 100, allow_nan=False, width=32)
        scores = tie_scores if draw(st.booleans()) else free
        run[q] = {d: float(draw(scores)) for d in docs}
    return qrels, run


def assert_equal_to_trec_eval(qrels, run, names):
    ours = M.evaluate(qrels, run, names, per_query=True, ties="trec_eval")
    theirs = trec_eval_per_query(qrels, run, names)
    assert list(ours.index) == sorted(qrels)
    for m in names:
        o, t = ours[m].to_numpy(), theirs[m]
        bad = ~np.isclose(o, t, atol=ATOL, rtol=0)
        assert not bad.any(), (
            f"{m} ({MEASURES[m]}): irbook {o[bad]} != trec_eval {t[bad]} for "
            f"{[q for q, b in zip(sorted(qrels), bad) if b]}: {qrels} {run}"
        )


@settings(max_examples=N, **HSET)
@given(qrels_and_run())
def test_equal_to_trec_eval(data):
    "Every paired metric, every cut-off, per query, on tie-heavy graded inputs."
    assert_equal_to_trec_eval(*data, list(MEASURES))


def test_hypothesis_budget():
    "At least 1000 random qrels/run pairs are checked against trec_eval."
    assert N >= 1000 or os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES")


def test_tie_order_is_trec_evals():
    "All-tied run: trec_eval ranks doc ids descending; ranx's order differs."
    qrels = {"q": {"a": 1, "b": 0, "c": 0}}
    run = {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}
    # trec_eval: c, b, a -> the relevant doc is third
    assert M.evaluate(qrels, run, "mrr", ties="trec_eval") == pytest.approx(1 / 3)
    assert trec_eval_per_query(qrels, run, ["mrr"])["mrr"][0] == pytest.approx(1 / 3)


def test_unknown_tie_policy():
    with pytest.raises(ValueError, match="ties must be one of"):
        M.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, "mrr", ties="random")


JQARA_METRICS = ["ndcg@10", "mrr", "map", "precision@10", "recall@10", "r-precision"]


@pytest.mark.slow
def test_jqara_runs_equal_trec_eval():
    "All 39 JQaRA runs: irbook (ties='trec_eval') == trec_eval per query."
    data = pytest.importorskip("irbook.data")
    qrels = M.read_qrels(data.fetch("jqara/qrels.trec"))
    for name in data.JQARA_RUNS:
        run = M.read_run(data.fetch(f"jqara/runs/{name}.lz4"))
        run = {q: run[q] for q in qrels if run.get(q)}
        sub = {q: qrels[q] for q in run}
        assert_equal_to_trec_eval(sub, run, JQARA_METRICS)
