"""Bad input to irbook.metrics raises a ValueError that names the query and the document
(or the file and line); queries present on one side only behave as in ranx.

Run: python -m pytest tests/test_metrics_errors.py -q
"""

import warnings

import numpy as np
import pytest

import irbook.metrics as M

warnings.filterwarnings("ignore", module="numba")

Q = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
R = {"q1": {"d1": 0.5, "d2": 0.7}, "q2": {"d3": 1.0, "d4": 0.2}}
METRIC = next(
    iter(sorted(M.METRICS))
)  # any registered metric will do for the input checks


def raises(match, qrels=Q, run=R, metrics=METRIC, **kw):
    with pytest.raises(ValueError, match=match) as e:
        M.evaluate(qrels, run, metrics, **kw)
    return str(e.value)


# ------------------------------------------------------------------ scores
@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), -float("inf"), np.nan, np.float32("nan")]
)
def test_non_finite_score(bad):
    msg = raises("not finite", run={"q1": {"d1": 0.5, "d2": bad}, "q2": R["q2"]})
    assert "'d2'" in msg and "'q1'" in msg


def test_non_numeric_score():
    msg = raises("not a number", run={"q1": {"d1": "high", "d2": 0.7}, "q2": R["q2"]})
    assert "'d1'" in msg and "'q1'" in msg


def test_non_finite_score_in_ranx_run():
    from ranx import Qrels, Run

    msg = raises(
        "not finite",
        qrels=Qrels(Q),
        run=Run({"q1": {"d1": 0.5, "d2": float("nan")}, "q2": R["q2"]}),
    )
    assert "'d2'" in msg and "'q1'" in msg


# ------------------------------------------------------------------ labels
@pytest.mark.parametrize(
    "bad,what",
    [
        (1.5, "not an integer"),
        ("x", "not a number"),
        (float("nan"), "not an integer"),
        (None, "not a number"),
    ],
)
def test_bad_label(bad, what):
    msg = raises(what, qrels={"q1": {"d1": 1, "d2": bad}, "q2": Q["q2"]})
    assert "'d2'" in msg and "'q1'" in msg


def test_integer_valued_float_label_is_fine():
    a = M.evaluate({"q1": {"d1": 1.0, "d2": 0.0}, "q2": {"d3": 2.0}}, R, METRIC)
    assert a == M.evaluate(Q, R, METRIC)


def test_negative_label_is_accepted():
    "trec_eval reads a negative label as in the pool but unjudged: no error, as there."
    from ranx import Qrels

    neg = {"q1": {"d1": 1, "d2": -1}, "q2": Q["q2"]}
    assert M.evaluate(Qrels(neg), R, METRIC) == M.evaluate(neg, R, METRIC)


# ------------------------------------------------------------------ duplicates
def test_duplicate_doc_in_pairs():
    msg = raises(
        "duplicate doc id 'd1' in query 'q1'",
        run={"q1": [("d1", 0.9), ("d2", 0.5), ("d1", 0.1)], "q2": R["q2"]},
    )
    assert msg


def test_duplicate_doc_in_qrels_pairs():
    raises(
        "duplicate doc id 'd3' in query 'q2'",
        qrels={"q1": Q["q1"], "q2": [("d3", 1), ("d3", 0)]},
    )


def test_pairs_without_duplicates_equal_dict():
    pairs = {q: list(d.items()) for q, d in R.items()}
    assert M.evaluate(Q, pairs, METRIC) == M.evaluate(Q, R, METRIC)


def test_malformed_pairs():
    raises("not a \\(doc, value\\) pair", run={"q1": [("d1", 0.9, "x")], "q2": R["q2"]})
    raises("must map doc ids", run={"q1": 3, "q2": R["q2"]})


def test_duplicate_line_in_trec_run(tmp_path):
    p = tmp_path / "r.trec"
    p.write_text("q1 Q0 d1 1 0.9 s\nq1 Q0 d2 2 0.5 s\nq1 Q0 d1 3 0.1 s\n")
    with pytest.raises(
        ValueError, match="line 3: duplicate doc id 'd1' in query 'q1'"
    ) as e:
        M.read_run(p)
    assert str(p) in str(e.value)


def test_duplicate_line_in_trec_qrels(tmp_path):
    p = tmp_path / "q.trec"
    p.write_text("q1 0 d1 1\nq1 0 d1 0\n")
    with pytest.raises(ValueError, match="line 2: duplicate doc id 'd1' in query 'q1'"):
        M.read_qrels(p)


@pytest.mark.parametrize(
    "text,match",
    [
        ("q1 Q0 d1 1 0.9\n", "6 fields"),
        ("q1 Q0 d1 1 abc s\n", "not a number"),
        ("q1 Q0 d1 1 nan s\n", "not finite"),
    ],
)
def test_malformed_trec_run(tmp_path, text, match):
    p = tmp_path / "r.trec"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        M.read_run(p)


@pytest.mark.parametrize(
    "text,match",
    [
        ("q1 0 d1\n", "4 fields"),
        ("q1 0 d1 x\n", "not an integer"),
        ("q1 0 d1 1.5\n", "not an integer"),
        ("q1 0 d1 1 extra\n", "4 fields"),
        ("\n", "no judgements"),
    ],
)
def test_malformed_trec_qrels(tmp_path, text, match):
    p = tmp_path / "q.trec"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        M.read_qrels(p)


def test_trec_round_trip_with_ranx(tmp_path):
    "ranx writes, irbook reads (and the reverse) to the same dicts."
    from ranx import Qrels, Run

    Qrels(Q).save(str(tmp_path / "q.trec"))
    Run(R, name="x").save(str(tmp_path / "r.trec"))
    assert M.read_qrels(tmp_path / "q.trec") == Q
    assert M.read_run(tmp_path / "r.trec") == R
    Run(R).save(str(tmp_path / "r.lz4"))
    assert M.read_run(tmp_path / "r.lz4") == R


# ------------------------------------------------------------------ k, p, names
@pytest.mark.parametrize(
    "name", [f"{METRIC}@0", f"{METRIC}@-1", f"{METRIC}@x", f"{METRIC}@1.5"]
)
def test_bad_k(name):
    raises("k", metrics=name)


@pytest.mark.parametrize("k", [0, -3, 1.5, True])
def test_check_k(k):
    with pytest.raises(ValueError, match="positive integer"):
        M.check_k(k)


@pytest.mark.parametrize("p", [0, 1, 1.5, -0.2, float("nan")])
def test_check_p(p):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        M.check_p(p)


@pytest.mark.parametrize("name", ["rbp.0", "rbp.x", "rbp.", "rbp@", "rbp@1.5"])
def test_bad_rbp_name(name):
    with pytest.raises(ValueError):
        M.parse_metric(name)


def test_bare_rbp_is_trec_evals():
    "trec_eval's rbp (p = 0.9, its default); ir_measures' RBP is p = 0.8."
    assert M.parse_metric("rbp") == M.parse_metric("rbp.9") == ("rbp", 0.9, 1)
    assert M.parse_metric("RBP") == ("rbp", 0.8, 1)
    assert M.to_trec_eval("rbp.9") == "rbp" and M.to_trec_eval("rbp.8") is None


@pytest.mark.parametrize(
    "name", ["nope", "nope@10", "NDCG@10", "precision@10-lx", "", 7]
)
def test_unknown_or_malformed_metric(name):
    with pytest.raises(ValueError):
        M.evaluate(Q, R, [name])


def test_unknown_metric_lists_known():
    msg = raises("unknown metric 'nope'", metrics="nope@5")
    assert METRIC in msg


def test_no_metric():
    raises("no metric", metrics=[])


# ------------------------------------------------------------------ empty qrels
@pytest.mark.parametrize("qrels", [{}, {"q1": {}}, {"q1": {}, "q2": {}}])
def test_empty_qrels(qrels):
    raises("qrels is empty", qrels=qrels, run={"q1": {"d1": 1.0}}, make_comparable=True)


def test_empty_ranx_qrels():
    from ranx import Qrels

    raises("qrels is empty", qrels=Qrels(), run=R)


def test_not_a_mapping():
    raises("must be a ranx object or a dict", qrels=[("q1", "d1", 1)])


# ---- queries on one side only
def test_missing_query_raises_like_ranx():
    """Like ranx: differing query sets are an error (ours is both a ValueError and an
    AssertionError)."""
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    run = {"q1": R["q1"], "q3": {"d1": 1.0}}
    with pytest.raises(AssertionError):
        ranx_evaluate(Qrels(Q), Run(run), "precision@1")
    for qrels_in, run_in in [(Q, run), (Qrels(Q), Run(run))]:
        with pytest.raises(AssertionError) as e:
            M.evaluate(qrels_in, run_in, METRIC)
        assert isinstance(e.value, ValueError) and isinstance(e.value, M.QueryMismatch)
        assert (
            "'q2'" in str(e.value)
            and "'q3'" in str(e.value)
            and "make_comparable" in str(e.value)
        )


def test_make_comparable_like_ranx():
    """Missing query -> empty results (scores 0, counted in the mean); extra query
    dropped; input not modified."""
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    run = {"q1": R["q1"], "q3": {"d1": 1.0}}
    ms = sorted(M.METRICS)
    spellings = [("rbp.8" if m == "rbp" else f"{m}@2") for m in ms]
    theirs = ranx_evaluate(
        Qrels(Q),
        Run(run),
        spellings + ["hits@1"],
        return_mean=False,
        make_comparable=True,
    )
    run_obj = Run(run)
    for qrels_in, run_in in [(Q, run), (Qrels(Q), run_obj)]:
        ours = M.evaluate(
            qrels_in, run_in, spellings, per_query=True, make_comparable=True
        )
        assert list(ours.index) == ["q1", "q2"]
        assert (ours.loc["q2"] == 0).all()
        for m in spellings:
            assert np.allclose(ours[m].to_numpy(), theirs[m], atol=1e-9, rtol=0), m
    assert len(run_obj) == 2 and set(run) == {"q1", "q3"}


def test_same_queries_any_order():
    """Queries are matched by id, whatever the key order of the dicts (ranx's dict path
    pairs them by position)."""
    r_rev = dict(reversed(list(R.items())))
    assert M.evaluate(Q, r_rev, METRIC, per_query=True).equals(
        M.evaluate(Q, R, METRIC, per_query=True)
    )


def test_query_with_empty_results():
    "An empty result list is valid input and scores 0, as in ranx."
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    run = {"q1": R["q1"], "q2": {}}
    ms = [("rbp.8" if m == "rbp" else m) for m in sorted(M.METRICS)]
    ours = M.evaluate(Q, run, ms, per_query=True)
    theirs = ranx_evaluate(Qrels(Q), Run(run), ms + ["hits@1"], return_mean=False)
    for m in ms:
        assert np.allclose(ours[m].to_numpy(), theirs[m], atol=1e-9, rtol=0), m
    assert (ours.loc["q2"] == 0).all()


@pytest.mark.parametrize("label", [1024, 1100, 1023])
def test_burges_gain_overflow_is_refused(label):
    "2**label - 1 past a float (or a sum that would be): a clear error, never inf/NaN."
    qrels = {"q": {"a": label, "b": label, "c": label}}
    run = {"q": {"a": 1.0, "b": 2.0, "c": 0.5}}
    for m in ("dcg_burges", "ndcg_burges@2"):
        with pytest.raises(ValueError, match="overflows a float"):
            M.evaluate(qrels, run, m)
    assert M.evaluate(qrels, run, "ndcg") == pytest.approx(1.0)  # linear gain is fine


def test_burges_gain_large_but_finite():
    qrels, run = {"q": {"a": 60, "b": 1}}, {"q": {"a": 1.0, "b": 2.0}}
    got = M.evaluate(qrels, run, ["dcg_burges", "ndcg_burges"])
    want = (2**1 - 1) + (2**60 - 1) / np.log2(3)
    assert got["dcg_burges"] == pytest.approx(want)
    assert np.isfinite(got["ndcg_burges"]) and 0 < got["ndcg_burges"] < 1


@pytest.mark.parametrize("convention", ["ranx", "trec_eval", "pytrec_eval"])
@pytest.mark.parametrize("case", ["empty run", "disjoint, made comparable"])
def test_nothing_retrieved_scores_zero_on_every_metric(case, convention):
    "No query retrieved anything: every metric is 0 (bpref too), none raises."
    needs = {"rbp": "rbp.8", "iprec_at_recall": "iprec_at_recall@0.5"}
    needs["weighted_f"] = "weighted_f@0.5"  # irbook.metrics.trec's, where declared
    names = [needs.get(m, m) for m in [*M.METRICS, *M.TREC_ONLY]]
    names += ["mrr@10", "ndcg@10"]
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2}}
    run, mc = (
        ({"q1": {}, "q2": {}}, False)
        if case == "empty run"
        else ({"q9": {"a": 1.0}}, True)
    )
    got = M.evaluate(qrels, run, names, make_comparable=mc, convention=convention)
    # counts of the qrels, not of the run; gm_map's floor is trec_eval's 0.00001
    counts = {"num_q": 2, "num_rel": 2, "gm_map": pytest.approx(1e-5)}
    counts["gm_bpref"] = pytest.approx(1e-5)  # irbook.metrics.trec's, where declared
    for m, v in got.items():
        assert counts.get(m, 0.0) == v, (m, v)
