"""irbook.unjudged and the unjudged-document measures of the registry.

- `evaluate(..., judged_only=True)` (and `condense`) against trec_eval 10.0's `-J`, per
  query, on its own test files and on >= 1,000 random cases batched into a few files
  (the binary and the cases come from tests/test_trec_eval.py);
- `judged@k` against trec_eval's unjudged counts (`unj_5/10/20`,
  `num_nonrel_judged_ret`) and against ir_measures' `Judged@k`;
- `bounds`: lower <= truth <= upper for every metric marked a bound, whatever labels
  the hidden judgements get; the bounds meet when everything is judged; NDCG and MAP
  are not bounded (a counterexample each);
- `holes`: the report against a plain re-computation.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_trec_eval import (
    HSET,
    SRC,
    batch,
    collect_cases,
    ours_name,
    read_trec,
    run_trec_eval,
    write,
)

import irbook.metrics as M
from irbook.unjudged import bounds, condense, fill_holes, holes, is_bound

CONVENTIONS = ["ranx", "trec_eval", "pytrec_eval"]
N_J = 1000  # random cases compared with trec_eval -J


# ------------------------------------------------------------ trec_eval -J
def compare_j(expected: dict, qrels, run, lvl=1, mc=False) -> list:
    "Assert irbook's judged_only scores == trec_eval -J's, per query; names compared."
    names = {m: ours_name(m, lvl) for m in expected if ours_name(m, lvl)}
    assert names, "no measure in common"
    qc = M.Columns.from_dict(qrels, "qrels")  # columns may hold negative labels
    kw = dict(make_comparable=mc, convention="trec_eval", judged_only=True)
    pq = M.evaluate(qc, run, list(names.values()), per_query=True, **kw)
    agg = M.evaluate(qc, run, list(names.values()), **kw)
    cells = pq.to_dict()  # {measure: {query: value}}: pq.loc per cell took seconds
    for m, ours in names.items():
        for q, v in expected[m].items():
            if q == "all" and (m, mc and lvl != 1) == ("num_rel", True):
                continue  # trec_eval's -c summary ignores -l (see test_trec_eval)
            if "nan" in v:  # iprec_at_recall of an emptied list: trec_eval's 0 / 0
                assert m.startswith(("iprec_at_recall", "11pt_avg"))  # 11 of them
                assert q == "all" or expected["num_ret"][q] == "0", (m, q)
                continue  # irbook scores it 0, as every metric of an empty ranking
            got = agg[ours] if q == "all" else cells[ours][q]
            assert abs(got - float(v)) <= 0.5e-4 + 1e-12, f"{m} {q}: {got} != {v}"
    return sorted(names)


@pytest.mark.parametrize(
    "flags,qrels",
    [([], "qrels.test"), (["-c"], "qrels.test"), (["-l2"], "qrels.rel_level")],
    ids=str,
)
def test_judged_only_equals_trec_eval_J_on_its_test_files(trec_eval, flags, qrels):  # noqa: F811
    "trec_eval's own qrels and results (with negative labels), scored with -J."
    folder = SRC / "test"
    args = ["-J", "-q", "-m", "all_trec", *flags]
    exp = run_trec_eval(trec_eval, args, folder / qrels, folder / "results.test")
    qd, rd = (
        read_trec(folder / qrels, "qrels"),
        read_trec(folder / "results.test", "run"),
    )
    if qrels == "qrels.rel_level":  # this one has labels -1: in the pool, not judged
        assert any(v < 0 for x in qd.values() for v in x.values())
    lvl = 2 if "-l2" in flags else 1
    names = compare_j(exp, qd, rd, lvl=lvl, mc="-c" in flags)
    assert {"num_ret", "map", "ndcg_cut_10", "bpref", "P_10"} <= set(names)
    # -J removed something: the condensed lists are shorter than the run
    assert int(exp["num_ret"]["all"]) < sum(len(x) for q, x in rd.items() if q in qd)


@pytest.fixture(scope="module")
def cases():
    return collect_cases(N_J)


@pytest.mark.parametrize("flags", [["-q"], ["-q", "-c"], ["-q", "-l2"]], ids=" ".join)
def test_random_cases_equal_trec_eval_J(trec_eval, cases, tmp_path, flags):  # noqa: F811
    "Per query, every irbook measure of all_trec with -J, on N_J cases in one pair."
    assert len(cases) >= N_J * 0.95
    qrels, run = batch(cases, complete="-c" not in flags)
    qp, rp = write(tmp_path, qrels, run)
    exp = run_trec_eval(trec_eval, ["-J", "-m", "all_trec", *flags], qp, rp)
    lvl = 2 if "-l2" in flags else 1
    names = compare_j(exp, qrels, run, lvl=lvl, mc="-c" in flags)
    assert {"P_5", "ndcg_cut_10", "bpref", "recip_rank", "num_ret"} <= set(names)
    # and the condensed run, scored without the flag, gives the same numbers
    if "-c" not in flags and lvl == 1:
        cond = condense(qrels, run, convention="trec_eval")
        ms = ["P_5", "ndcg_cut_10", "map", "recip_rank", "num_ret", "bpref"]
        a = M.evaluate(qrels, cond, ms, per_query=True, convention="trec_eval")
        b = M.evaluate(
            qrels, run, ms, per_query=True, convention="trec_eval", judged_only=True
        )
        np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), atol=1e-12)


def test_judged_counts_equal_trec_eval_unj(trec_eval, cases, tmp_path):  # noqa: F811
    "judged@k x min(k, retrieved) = min(k, retrieved) - unj_k x k (trec_eval's unj)."
    qrels, run = batch(cases, complete=True)
    qp, rp = write(tmp_path, qrels, run)
    args = ["-q", "-m", "unj", "-m", "num_nonrel_judged_ret", "-m", "num_ret"]
    exp = run_trec_eval(trec_eval, args, qp, rp)
    ms = ["judged@5", "judged@10", "judged@20", "judged", "num_ret", "num_rel_ret"]
    pq = M.evaluate(qrels, run, ms, per_query=True, convention="trec_eval")
    checked = 0
    for q in pq.index:
        n = int(exp["num_ret"][q])
        for k in (5, 10, 20):
            cut = min(k, n)
            unj = round(float(exp[f"unj_{k}"][q]) * k)
            assert round(pq.loc[q, f"judged@{k}"] * cut) == cut - unj, (q, k)
        nonrel = int(exp["num_nonrel_judged_ret"][q])
        judged_ret = round(pq.loc[q, "judged"] * pq.loc[q, "num_ret"])
        assert judged_ret - pq.loc[q, "num_rel_ret"] == nonrel, q
        checked += 1
    assert checked >= 0.95 * N_J


def test_judged_only_keeps_every_query():
    "A query whose every document is unjudged stays, with nothing retrieved (as -J)."
    qrels = {"a": {"d1": 1}, "b": {"d2": 1, "d3": -1}}
    run = {"a": {"d1": 1.0, "x": 2.0}, "b": {"x": 1.0, "d3": 0.5}}
    got = M.evaluate(qrels, run, ["num_ret", "mrr"], per_query=True, judged_only=True)
    assert got["num_ret"].tolist() == [1.0, 0.0]
    assert got["mrr"].tolist() == [1.0, 0.0]
    assert condense(qrels, run) == {"a": {"d1": 1.0}, "b": {}}


# ------------------------------------------------------------ ir_measures
ir_measures = pytest.importorskip("ir_measures")
DOCS = [f"d{i}" for i in range(12)] + ["文書", "é"]


@st.composite
def plain_case(draw, negative=False, queries=4):
    "Qrels and a run with the same queries, distinct scores (ir_measures ties apart)."
    qrels, run = {}, {}
    lo = -1 if negative else 0
    for i in range(draw(st.integers(1, queries))):
        judged = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True)
        )
        qrels[f"q{i}"] = {d: draw(st.integers(lo, 3)) for d in judged}
        docs = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=12, unique=True)
        )
        scores = draw(st.permutations(range(len(docs))))
        run[f"q{i}"] = {d: float(s) for d, s in zip(docs, scores)}
    return qrels, run


def ir_judged(qrels, run, k) -> dict:
    return {
        m.query_id: m.value
        for m in ir_measures.iter_calc([ir_measures.Judged @ k], qrels, run)
    }


@settings(max_examples=300, **HSET)
@given(plain_case(), st.sampled_from([1, 3, 5, 10, 20]), st.sampled_from(CONVENTIONS))
def test_judged_equals_ir_measures(c, k, convention):
    "Without negative labels, judged@k is ir_measures' Judged@k, per query."
    qrels, run = c
    ours = M.evaluate(qrels, run, f"judged@{k}", per_query=True, convention=convention)
    theirs = ir_judged(qrels, run, k)
    assert set(theirs) == set(ours.index)
    for q, v in theirs.items():
        assert ours.loc[q, f"judged@{k}"] == pytest.approx(v, abs=1e-12)


def test_negative_label_is_unjudged_here_judged_in_ir_measures():
    "The one difference, on purpose: a label -1 is trec_eval's 'in the pool, unjudged'."
    qrels = {"q": {"a": 1, "b": -1, "c": 0}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    assert ir_judged(qrels, run, 3)["q"] == 1.0
    assert M.evaluate(qrels, run, "judged@3") == pytest.approx(2 / 3)
    assert holes(qrels, run, 3).loc["q", "to_judge"] == ["b"]


# ------------------------------------------------------------ bounds: properties
BOUND_METRICS = [
    "precision@3", "hits@3", "hit_rate@3", "recall@3", "f1@3", "mrr@3", "mrr",
    "dcg@3", "dcg_burges@3", "rbp.8", "num_rel_ret@3", "recall", "precision@5-l2",
    "dcg@5-l2", "recall@4-l2", "num_rel",
]  # fmt: skip
OTHERS = ["ndcg@3", "ndcg", "map", "map@3", "r-precision", "bpref", "ndcg_burges@3"]


def view_docs(run_q: dict, metric: str) -> list:
    "The docs a metric looks at: its top k by score (distinct), or the whole run."
    name, param, _ = M.parse_metric(metric)
    order = sorted(run_q, key=lambda d: -run_q[d])
    k = 0 if name in ("rbp", "iprec_at_recall") else int(param)
    return order[:k] if k else order


def truth_of(qrels, run, metric, fill, rnd) -> dict:
    "The qrels with every hole `metric` sees given a random label in [0, fill]."
    truth_q = {q: dict(x) for q, x in qrels.items()}
    for q, docs in run.items():
        for d in view_docs(docs, metric):
            if truth_q[q].get(d, -1) < 0:
                truth_q[q][d] = rnd.randint(0, fill)
    return truth_q


@settings(max_examples=80, **HSET)
@given(
    plain_case(negative=True),
    st.sampled_from(CONVENTIONS),
    st.integers(1, 3),
    st.randoms(use_true_random=False),
)
def test_truth_lies_between_the_bounds(c, convention, fill, rnd):
    "Holes a metric sees get random labels in [0, fill]: lower <= truth <= upper."
    qrels, run = c
    ms = BOUND_METRICS + OTHERS
    kw = dict(fill=fill, convention=convention)
    flag = bounds(qrels, run, ms, **kw)["bound"]
    b = bounds(qrels, run, ms, per_query=True, **kw)
    for m in ms:
        assert flag[m] or not is_bound(m, convention), m  # monotone: a bound
        if not flag[m]:
            continue  # too many labellings: two assumptions, not a bound
        # three random fillings of the hidden judgements, scored in one call: query
        # q's copy under filling j is "q#j" (a query's score depends on it alone)
        truth, copies = {}, {}
        for j in range(3):
            for q, x in truth_of(qrels, run, m, fill, rnd).items():
                truth[f"{q}#{j}"], copies[f"{q}#{j}"] = x, run[q]
        t = M.evaluate(truth, copies, m, per_query=True, convention=convention)[m]
        assert len(t) == 3 * len(run), t
        of = [i.rsplit("#", 1)[0] for i in t.index]
        lo, hi = (b[(m, side)].loc[of].to_numpy() for side in ("lower", "upper"))
        t = t.to_numpy()
        assert (lo <= t + 1e-9).all() and (t <= hi + 1e-9).all(), (m, of, lo, t, hi)


@settings(max_examples=40, **HSET)
@given(
    plain_case(negative=True, queries=1),
    st.sampled_from(CONVENTIONS),
    st.integers(1, 2),
)
def test_enumeration_equals_brute_force(c, convention, fill):
    "For NDCG, MAP, R-precision, bpref: min and max over every labelling, by hand."
    qrels, run = c
    (q, docs), ms = next(iter(run.items())), ["ndcg@3", "map@3", "ndcg", "bpref"]
    b = bounds(qrels, run, ms, fill=fill, convention=convention)
    for m in ms:
        if not b.loc[m, "bound"]:
            continue
        hole = [d for d in view_docs(docs, m) if qrels[q].get(d, -1) < 0]
        vals = []
        for labels in itertools.product(range(fill + 1), repeat=len(hole)):
            full = {q: {**qrels[q], **dict(zip(hole, labels))}}
            vals.append(M.evaluate(full, run, m, convention=convention))
        assert b.loc[m, "lower"] == pytest.approx(min(vals), abs=1e-12), m
        assert b.loc[m, "upper"] == pytest.approx(max(vals), abs=1e-12), m


@settings(max_examples=100, **HSET)
@given(plain_case(negative=True), st.sampled_from(CONVENTIONS))
def test_lower_is_what_evaluate_reports(c, convention):
    "For the bounded metrics the lower bound is today's score (holes non-relevant)."
    qrels, run = c
    ms = [m for m in BOUND_METRICS if is_bound(m, convention)]
    b = bounds(qrels, run, ms, convention=convention)
    ev = M.evaluate(qrels, run, ms, convention=convention)
    for m in ms:
        assert b.loc[m, "lower"] == pytest.approx(ev[m], abs=1e-12)
        assert b.loc[m, "bound"]


@settings(max_examples=100, **HSET)
@given(plain_case(), st.sampled_from(CONVENTIONS))
def test_bounds_meet_when_everything_is_judged(c, convention):
    "Every retrieved doc judged (labels >= 0): lower = upper = evaluate, every metric."
    qrels, run = c
    full = {q: {**{d: 0 for d in run[q]}, **x} for q, x in qrels.items()}
    ms = BOUND_METRICS + OTHERS
    b = bounds(full, run, ms, per_query=True, convention=convention)
    ev = M.evaluate(full, run, ms, per_query=True, convention=convention)
    for m in ms:
        np.testing.assert_allclose(b[(m, "lower")], ev[m], atol=1e-12)
        np.testing.assert_allclose(b[(m, "upper")], ev[m], atol=1e-12)
        assert M.evaluate(full, run, "judged@3") == 1.0


@pytest.mark.parametrize("metric", ["ndcg@3", "map"])
def test_ndcg_and_map_need_the_enumeration(metric):
    "A late relevant hole raises the ideal (or R): the truth falls below both guesses."
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    truth = M.evaluate({"q": {"a": 1, "b": 0, "c": 1}}, run, metric)
    r = M.to_ranked(qrels, run)
    name, k, _ = M.parse_metric(metric)
    guesses = [M.METRICS[name](fill_holes(r, f, k), k)[0] for f in (0, 1)]
    assert truth < min(guesses) - 1e-9 and not is_bound(metric)
    b = bounds(qrels, run, metric)
    assert b.loc[metric, "lower"] == pytest.approx(truth) and b.loc[metric, "bound"]
    few = bounds(qrels, run, metric, limit=3)  # 4 labellings needed
    assert not few.loc[metric, "bound"]
    assert few.loc[metric, "lower"] == pytest.approx(min(guesses))


def test_rbp_is_a_bound_in_ranx_not_in_trec_eval():
    "trec_eval's RBP divides by the query's top label: a filled label 3 shrinks others."
    assert is_bound("rbp.8", "ranx") and not is_bound("rbp.8", "trec_eval")
    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 10.0, **{f"j{i}": float(i) for i in range(2, 10)}, "b": 1.0}}
    lo = bounds(qrels, run, "rbp.8", fill=3, convention="trec_eval")
    truth = M.evaluate({"q": {"a": 1, "b": 3}}, run, "rbp.8", convention="trec_eval")
    assert truth < lo.loc["rbp.8", "lower"]  # only b (rank 10) rose, and the score fell
    assert bounds(qrels, run, "rbp.8", fill=3).loc["rbp.8", "bound"]  # ranx: a bound


def test_fill_holes_only_in_view():
    "fill_holes(k) judges the holes of the top k only; they join the relevant count."
    r = M.to_ranked({"q": {"a": 1}}, {"q": {"a": 3.0, "x": 2.0, "y": 1.0}})
    f = fill_holes(r, 2, k=2)
    assert f.rel.tolist() == [[1.0, 2.0, 0.0]]
    assert f.judged.tolist() == [[True, True, False]]
    assert f.n_rel(1).tolist() == [2] and f.n_rel(2).tolist() == [1]


def test_bounds_refuse_bad_arguments():
    q, r = {"q": {"a": 1}}, {"q": {"a": 1.0}}
    with pytest.raises(ValueError, match="no bounds"):
        bounds(q, r, "judged@10")
    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="fill"):
            bounds(q, r, "P_1", fill=bad)
    with pytest.raises(ValueError, match="no metric"):
        bounds(q, r, [])
    with pytest.raises(M.QueryMismatch):
        bounds(q, {"z": {"a": 1.0}}, "P_1")


# ------------------------------------------------------------ holes
@settings(max_examples=150, **HSET)
@given(plain_case(negative=True), st.integers(1, 12), st.sampled_from(CONVENTIONS))
def test_holes_report(c, k, convention):
    "Counts, first hole and docs to judge, re-computed from the scores by hand."
    qrels, run = c
    h = holes(qrels, run, k, convention=convention)
    jk = M.evaluate(qrels, run, f"judged@{k}", per_query=True, convention=convention)
    for q, docs in run.items():
        top = sorted(docs, key=lambda d: -docs[d])[:k]
        unj = [d for d in top if qrels[q].get(d, -1) < 0]
        row = h.loc[q]
        assert row.to_judge == unj
        assert (row.retrieved, row.unjudged, row.judged) == (
            len(top), len(unj), len(top) - len(unj),
        )  # fmt: skip
        assert row.relevant == sum(qrels[q].get(d, -1) >= 1 for d in top)
        assert row.first_hole == (top.index(unj[0]) + 1 if unj else 0)
        assert row.judged_share == pytest.approx(jk.loc[q, f"judged@{k}"], abs=1e-12)


def test_holes_refuses_bad_k():
    for bad in (0, -3, 2.5, "10"):
        with pytest.raises(ValueError, match="positive integer"):
            holes({"q": {"a": 1}}, {"q": {"a": 1.0}}, bad)
