"""irbook.compare, the one comparison engine, against independent references.

References: scipy's paired t-test, Holm's procedure written out here (and statsmodels'
when installed), irbook.stats' bootstrap and randomisation test called directly,
coverage of the difference interval on synthetic data with a known difference,
trec_eval's printed layout, and JSON as the standard defines it (no NaN).
"""

import json
import math
import os
import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import irbook.metrics as M
from irbook.compare import (
    FORMATS,
    Comparison,
    compare,
    paired_p,
    per_query_table,
    plot_comparison,
    render,
    trec_name,
    verdict,
    vs_published,
)
from irbook.core import QueryMismatch
from irbook.stats import (
    diff_interval,
    mean_interval,
    paired_bootstrap,
    randomization_test,
)

QRELS = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"d": 1}, "q3": {"e": 1, "f": 1}}
RUNS = {
    "bm25": {"q1": {"b": 3.0, "a": 2.0, "c": 1.0}, "q2": {"d": 1.0}, "q3": {"x": 1.0}},
    "dense": {"q1": {"c": 3.0, "a": 2.0}, "q2": {"z": 2.0, "d": 1.0}, "q3": {"e": 2.0}},
}


def scores(n=300, seed=0, shift=(0.0, 0.03, 0.1)):
    "A per-query table of three systems on `n` queries: metric-like, paired."
    rng = np.random.default_rng(seed)
    base = rng.beta(0.8, 0.9, n)
    noise = rng.normal(0, 0.15, (len(shift), n))
    cols = {
        f"s{i}": {
            "ndcg@10": np.clip(base + s + e, 0, 1),
            "mrr": np.clip(base + e, 0, 1),
        }
        for i, (s, e) in enumerate(zip(shift, noise))
    }
    ids = [f"q{i}" for i in range(n)]
    return per_query_table(
        None, {k: pd.DataFrame(v, index=ids) for k, v in cols.items()}
    )


def holm_by_hand(p):
    "Holm (1979): sort, multiply the i-th smallest by m - i, running max, cap at 1."
    p = list(p)
    m, order = len(p), sorted(range(len(p)), key=lambda i: p[i])
    out, run = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (m - rank) * p[i]))
        out[i] = run
    return out


# --- the per-query table --------------------------------------------------------------


def test_table_scores_runs_with_evaluate():
    t = per_query_table(QRELS, RUNS, ["mrr", "ndcg@3"])
    assert list(t.columns.names) == ["run", "metric"]
    assert list(t.columns) == [
        ("bm25", "mrr"),
        ("bm25", "ndcg@3"),
        ("dense", "mrr"),
        ("dense", "ndcg@3"),
    ]
    for name, run in RUNS.items():
        want = M.evaluate(QRELS, run, ["mrr", "ndcg@3"], per_query=True)
        np.testing.assert_array_equal(t[name].to_numpy(), want.to_numpy())


def test_table_takes_scores_in_every_shape():
    ids = ["q1", "q2", "q3"]
    frame = pd.DataFrame({"mrr": [1.0, 0.5, 0.0]}, index=ids)
    t = per_query_table(
        None,
        {
            "frame": frame,
            "series": pd.Series([0.5, 0.5, 1.0], index=["q3", "q2", "q1"]),
            "dict": {"mrr": pd.Series([0.0, 1.0, 1.0], index=ids)},
        },
        "mrr",
    )
    assert list(t.index) == ids  # every run on the first run's question order
    assert t[("series", "mrr")].tolist() == [1.0, 0.5, 0.5]
    arrays = per_query_table(None, {"a": [1, 0, 1], "b": np.array([0.5, 0.5, 0.5])})
    assert list(arrays.columns) == [("a", "score"), ("b", "score")]
    again = per_query_table(None, t)  # a table is checked and kept
    pd.testing.assert_frame_equal(again, t)


def test_table_takes_a_list_of_named_runs():
    class Named(dict):
        pass

    a, b = Named(RUNS["bm25"]), Named(RUNS["dense"])
    a.name, b.name = "one", "two"
    t = per_query_table(QRELS, [a, b], "mrr")
    assert list(t.columns.get_level_values("run")) == ["one", "two"]


@pytest.mark.parametrize(
    "runs, kw, err, msg",
    [
        ({"x": RUNS["bm25"]}, {}, ValueError, "run 'x' is not scored yet"),
        (
            {"x": {"q1": {"a": 1.0}}},
            {"qrels": QRELS, "metrics": "mrr"},
            QueryMismatch,
            "run 'x': ",
        ),
        (
            {"x": pd.Series([1.0, 0.0], index=["q1", "q2"]), "y": pd.Series([1.0])},
            {},
            ValueError,
            "other queries",
        ),
        (
            {"x": {"mrr": [1.0]}, "y": {"ndcg": [1.0]}},
            {},
            ValueError,
            "has no scores for mrr",
        ),
        ({}, {}, ValueError, "no runs"),
    ],
)
def test_table_refuses_what_cannot_be_paired(runs, kw, err, msg):
    with pytest.raises(err, match=msg):
        per_query_table(kw.get("qrels"), runs, kw.get("metrics"))


# --- compare: the numbers -------------------------------------------------------------


def score_t_p(x, y):
    "The score test's p: the paired t statistic shrunk by sqrt(1 - mean^2), n - 1 df."
    d = np.asarray(x) - np.asarray(y)
    t = sps.ttest_rel(x, y).statistic * np.sqrt(1 - d.mean() ** 2)
    return 2 * sps.t.sf(abs(t), len(d) - 1)


def test_t_test_p_is_the_score_form_of_scipys():
    t = scores()
    c = compare(t, test="t")
    assert len(c.tested) == 4
    for r in c.tested.itertuples():
        x, y = t[(r.run, r.metric)], t[(r.baseline, r.metric)]
        assert r.p == pytest.approx(score_t_p(x, y), rel=1e-9)
        assert r.p >= sps.ttest_rel(x, y).pvalue  # never bolder than Student's t
        assert paired_p(x, y) == pytest.approx(sps.ttest_rel(x, y).pvalue, rel=1e-9)
        assert paired_p(x, y, bounds=(-1, 1)) == pytest.approx(r.p, rel=1e-12)
        # the interval excludes 0 exactly when p < alpha
        assert (r.p < c.alpha) == (not r.low <= 0 <= r.high)


def test_fisher_and_bootstrap_p_are_the_stats_primitives():
    t = scores(n=80)
    x, y = t[("s2", "ndcg@10")], t[("s0", "ndcg@10")]
    f = compare(t, test="fisher", permutations=500, seed=3).table
    b = compare(t, test="bootstrap", B=700, seed=3).table
    row = {"run": "s2", "metric": "ndcg@10"}
    pick = (f.run == row["run"]) & (f.metric == row["metric"])
    assert f[pick].p.item() == randomization_test(x, y, n=500, seed=3)
    assert b[pick].p.item() == paired_bootstrap(x, y, B=700, seed=3).p


def test_interval_and_effect_size_are_the_pairs():
    t = scores()
    c = compare(t, B=1500, seed=7, alpha=0.1)
    row = c.tested[(c.tested.run == "s1") & (c.tested.metric == "mrr")].iloc[0]
    x, y = t[("s1", "mrr")], t[("s0", "mrr")]
    ref = diff_interval(x, y, alpha=0.1)  # mrr: a difference lies in [-1, 1]
    assert (row["diff"], row["low"], row["high"]) == pytest.approx(
        (ref.estimate, ref.low, ref.high), abs=1e-15
    )
    d = (x - y).to_numpy()
    assert row["effect"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
    assert row["sd"] == pytest.approx(d.std(ddof=1), rel=1e-12)
    ci = mean_interval(x, alpha=0.1)
    assert (row["mean"], row["mean_low"], row["mean_high"]) == pytest.approx(
        (ci.estimate, ci.low, ci.high), abs=1e-15
    )
    assert row["baseline_mean"] == pytest.approx(y.mean()) and row["n"] == len(t)


def test_holm_covers_every_tested_pair():
    t = scores()
    for pairs in ("baseline", "all"):
        c = compare(t, pairs=pairs)
        tested = c.tested
        assert len(tested) == (4 if pairs == "baseline" else 6)
        np.testing.assert_allclose(tested.p_holm, holm_by_hand(tested.p), rtol=1e-12)
        assert (tested.significant == (tested.p_holm < c.alpha)).all()
        assert c.table.significant[c.table.baseline.isna()].isna().all()


def test_holm_by_hand_is_holm():
    # Holm's worked example: 0.005 x 4, 0.01 x 3, 0.03 x 2 (kept >= the last), 0.04 x 1
    assert holm_by_hand([0.01, 0.04, 0.03, 0.005]) == pytest.approx(
        [0.03, 0.06, 0.06, 0.02]
    )


def test_holm_equals_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    c = compare(scores(), pairs="all")
    want = multitest.multipletests(c.tested.p, method="holm")[1]
    np.testing.assert_allclose(c.tested.p_holm, want, rtol=1e-12)


def test_difference_interval_covers_the_true_difference():
    "95% intervals of a known difference (0.05) cover it in roughly 95% of samples."
    rng, hits, reps = np.random.default_rng(11), 0, 120
    for i in range(reps):
        base = rng.beta(0.8, 0.9, 150)
        a, b = base + 0.05 + rng.normal(0, 0.1, 150), base + rng.normal(0, 0.1, 150)
        c = compare({"b": {"m": b}, "a": {"m": a}}, B=500, seed=i)
        r = c.tested.iloc[0]
        hits += r["low"] <= 0.05 <= r["high"]
    assert 0.88 <= hits / reps <= 0.99, hits / reps


def test_identical_runs_are_nan_safe():
    x = np.linspace(0, 1, 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = compare({"a": {"m": x}, "b": {"m": x.copy()}})
    r = c.tested.iloc[0]
    assert r["diff"] == 0 and r["sd"] == 0 and math.isnan(r["effect"])
    assert r["p"] == 1.0 and not r["significant"]


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, float("nan"), "0.05"])
def test_alpha_strictly_between_0_and_1(alpha):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        compare(scores(n=10), alpha=alpha)


def test_pairs_all_matrix_and_explicit_pairs():
    t = scores()
    c = compare(t, pairs="all")
    got = {(r.run, r.baseline) for r in c.tested.itertuples()}
    assert got == {("s1", "s0"), ("s2", "s0"), ("s2", "s1")}  # every pair once
    p, d = c.matrix("mrr", "p"), c.matrix("mrr", "diff")
    assert np.allclose(p, p.T, equal_nan=True) and np.allclose(d, -d.T, equal_nan=True)
    x, y = t[("s2", "mrr")], t[("s1", "mrr")]
    assert p.loc["s1", "s2"] == pytest.approx(score_t_p(x, y))
    assert d.loc["s2", "s1"] == pytest.approx((x - y).mean())
    best = compare(t, pairs=[("s0", "s2"), ("s1", "s2")])  # each vs the best
    assert {(r.run, r.baseline) for r in best.tested.itertuples()} == {
        ("s0", "s2"),
        ("s1", "s2"),
    }
    assert set(best.table.run) == {"s0", "s1", "s2"}  # s2 keeps its mean row
    assert list(best.means().index) == ["s0", "s1", "s2"]


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"baseline": "nope"}, "not one of the runs"),
        ({"pairs": "all", "baseline": "s1"}, "baseline= applies"),
        ({"pairs": "some"}, "pairs must be"),
        ({"pairs": [("s0", "s0")]}, "two different runs"),
        ({"pairs": [("s0", "x")]}, "two different runs"),
        ({"test": "z"}, "test must be one of"),
    ],
)
def test_bad_compare_arguments(kw, msg):
    with pytest.raises(ValueError, match=msg):
        compare(scores(n=10), **kw)


def test_baseline_rows_and_one_run():
    c = compare(scores(n=20), baseline="s1")
    assert c.table[c.table.run == "s1"].baseline.isna().all()
    assert (c.tested.baseline == "s1").all()
    one = compare({"only": {"m": [0.1, 0.2]}})
    assert one.tested.empty and list(one.means().columns) == ["m"]
    with pytest.raises(ValueError, match="nothing was tested"):
        one.matrix()


# --- verdict: every branch, numbers that turn -----------------------------------------

ROW = dict(diff=0.06, low=0.031, high=0.09, p_holm=4e-4, significant=True, family=4)


def test_verdict_significant_higher_then_lower():
    assert verdict(ROW) == "higher by 0.060 [0.031, 0.090], p < 0.001 after Holm"
    flipped = {**ROW, "diff": -0.06, "low": -0.09, "high": -0.031}
    assert verdict(flipped) == "lower by 0.060 [0.031, 0.090], p < 0.001 after Holm"
    assert verdict({**ROW, "family": 1, "p_holm": 0.012}).endswith(", p = 0.012")


def test_verdict_not_separable_once_p_rises():
    row = {**ROW, "diff": 0.021, "low": -0.02, "high": 0.06, "p_holm": 0.33}
    assert verdict({**row, "significant": False}) == (
        "not separable at this size (diff +0.021 [-0.020, +0.060], p = 0.33 after Holm)"
    )
    assert verdict(row).startswith("higher by 0.021")  # the flag decides, not p alone


def test_verdict_ties():
    quiet = {**ROW, "significant": False, "p_holm": 0.5, "sd": 0.2}
    assert verdict({**quiet, "at_ceiling": 0.97}).startswith(
        "tied at the ceiling (97% of queries at the maximum"
    )
    assert verdict({**quiet, "at_ceiling": 0.9}).startswith("not separable")
    same = {**quiet, "diff": 0.0, "low": 0.0, "high": 0.0, "sd": 0.0}
    assert verdict({**same, "at_ceiling": 1.0}) == "tied at the ceiling"
    assert verdict({**same, "at_ceiling": 0.0}) == "tied: the same score on every query"


def test_ceiling_share_only_where_the_ceiling_is_the_maximum():
    top = np.array([1.0, 1.0, 1.0 - 1e-15, 0.5])
    c = compare({"a": {"m": top}, "b": {"m": np.ones(4)}})
    assert c.tested.at_ceiling.item() == 0.75
    dcg = compare({"a": {"m": top * 3}, "b": {"m": np.ones(4) * 2}})  # not in [0, 1]
    assert math.isnan(dcg.tested.at_ceiling.item())
    assert math.isnan(
        compare(
            {"a": {"m": top}, "b": {"m": top}}, ceiling=None
        ).tested.at_ceiling.item()
    )


def test_sentences_follow_real_comparisons():
    t = scores(n=400)
    up = compare(t, baseline="s0").sentences()
    down = compare(t, baseline="s2").sentences()
    assert up[2].startswith("s2 vs s0, ndcg@10: higher by")
    assert down[0].startswith("s0 vs s2, ndcg@10: lower by")
    at_top = np.ones(50)
    at_top[0] = 0.0
    tie = compare({"a": {"m": at_top}, "b": {"m": np.ones(50)}}).sentences()
    assert tie == [
        "b vs a, m: tied at the ceiling (98% of queries at the maximum; diff +0.020 "
        "[-0.020, +0.060], p = 0.32)"
    ]


def test_vs_published_never_claims_a_win():
    x = np.random.default_rng(0).beta(2, 2, 300)
    inside = vs_published(x, float(x.mean()))
    above = vs_published(x, 0.2)
    elsewhere = vs_published(x, 0.2, n_published=1000)
    flagged = vs_published(x, float(x.mean()), same_questions=False)
    assert inside.inside and not above.inside and not elsewhere.same_questions
    assert "consistent with it" in inside.sentence()
    assert "lies above the published 0.200" in above.sentence()
    assert "other questions (n = 1000)" in elsewhere.sentence()
    assert "other questions" in flagged.sentence()
    assert "other questions" not in above.sentence()
    for v in (inside, above, elsewhere, flagged):
        assert "beat" not in v.sentence() and "win" not in v.sentence()
    assert "below" in vs_published(x, 0.9).sentence()
    with pytest.raises(ValueError, match="finite number"):
        vs_published(x, float("nan"))


# --- render ---------------------------------------------------------------------------


def test_json_writes_null_never_nan():
    c = compare(scores(n=30))
    text = render(c, "json")
    rows = json.loads(
        text
    )  # standard JSON: would fail on NaN only with a strict parser
    assert "NaN" not in text and "Infinity" not in text
    base = [r for r in rows if r["run"] == "s0"]
    assert base and all(r["diff"] is None and r["significant"] is None for r in base)
    assert json.loads(render({"x": {"m": float("nan")}}, "json")) == {"m": None}
    same = compare({"a": {"m": [0.5, 0.5]}, "b": {"m": [0.5, 0.5]}})
    assert json.loads(render(same, "json"))[1]["effect"] is None  # NaN effect -> null


def test_csv_is_the_long_table():
    c = compare(scores(n=30))
    back = pd.read_csv(__import__("io").StringIO(render(c, "csv")))
    assert list(back.columns) == list(c.table.columns) and len(back) == len(c.table)


def test_markdown_and_latex_letters():
    n = 40
    bad, good = np.zeros(n), np.ones(n)
    md = render(compare({"base": {"mrr": bad}, "new": {"mrr": good}}), "md")
    assert "1.0000<sup>a</sup>" in md and "0.0000 " in md  # numbers stay as written
    md = render(compare({"base": {"mrr": good}, "new": {"mrr": bad}}), "md")
    assert "1.0000<sup>b</sup>" in md
    latex = render(
        compare({"bm_25": {"hit_rate@1": bad}, "x": {"hit_rate@1": good}}), "latex"
    )
    assert "1.0000$^{a}$" in latex and r"bm\_25" in latex and r"hit\_rate@1" in latex
    every = compare({"a": {"m": bad}, "b": {"m": good}, "c": {"m": good}}, pairs="all")
    md = render(every, "md")
    assert "| (b) b | 1.0000<sup>a</sup> |" in md  # b beats a; b and c are tied


# trec_eval 10.0 prints `%-22s\t%s\t%6.4f` (meas_print_single.c); from test/out.test:
TREC_EVAL_LINE = "map                   \tall\t0.1785"


def test_trec_layout_is_trec_evals():
    ref = "/work/shared/trec_eval/test/out.test"
    if os.path.exists(ref):
        assert TREC_EVAL_LINE in open(ref).read().splitlines()
    t = per_query_table(QRELS, RUNS, ["map", "mrr@2", "ndcg@3", "hit_rate@2"])
    lines = render(compare(t), "trec").splitlines()
    want = M.evaluate(QRELS, RUNS["bm25"], ["map"])["map"]
    m = lines[2]
    assert m == f"{'map':<22}\tall\t{want:6.4f}"
    assert [len(x) for x in m.split("\t")] == [
        len(x) for x in TREC_EVAL_LINE.split("\t")
    ]
    assert lines[:2] == [
        "runid                 \tall\tbm25",
        "num_q                 \tall\t3",
    ]
    assert [x.split("\t")[0].strip() for x in lines[2:6]] == [
        "map",
        "mrr@2",
        "ndcg_cut_3",
        "success_2",
    ]
    per_q = render(t, "trec", per_query=True).splitlines()
    assert [x.split("\t")[1] for x in per_q[:8]] == ["q1"] * 4 + ["q2"] * 4
    assert per_q[12] == "runid                 \tall\tbm25"


@pytest.mark.parametrize(
    "metric, name",
    [
        ("precision@5", "P_5"),
        ("recall@100", "recall_100"),
        ("map", "map"),
        ("map@10", "map_cut_10"),
        ("ndcg", "ndcg"),
        ("ndcg@10", "ndcg_cut_10"),
        ("mrr", "recip_rank"),
        ("mrr@10", "mrr@10"),
        ("r-precision", "Rprec"),
        ("bpref", "bpref"),
        ("hit_rate@5", "success_5"),
        ("ndcg@10-l2", "ndcg@10-l2"),
        ("Modified MRR@10", "Modified MRR@10"),
    ],
)
def test_trec_names(metric, name):
    assert trec_name(metric) == name


def test_every_format_renders_comparisons_means_and_per_query():
    c = compare(per_query_table(QRELS, RUNS, ["mrr"]))
    for fmt in FORMATS:
        assert render(c, fmt) and render(c, fmt, per_query=True)
        assert render({"bm25": {"mrr": 0.5}}, fmt)
    assert "significant" in render(c, "table")
    with pytest.raises(ValueError, match="format must be one of"):
        render(c, "xml")
    with pytest.raises(ValueError, match="per_query=True needs"):
        render({"bm25": {"mrr": 0.5}}, "csv", per_query=True)


def test_plot_draws_every_tested_difference():
    c = compare(scores(n=50), pairs="all")
    ax = plot_comparison(c)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(c.tested) and labels[0] == "s2 − s1 (mrr)"
    assert isinstance(c, Comparison) and "mean difference" in ax.get_xlabel()


def test_float_noise_is_no_difference():
    "Differences of rounding size (1e-17) are ties, not a 'significant' difference."
    x = np.tile([0.1, 0.2, 0.3], 20)  # 60: the bootstrap holds alpha from 50 on
    for test in ("t", "bootstrap", "fisher"):
        c = compare({"a": {"m": x}, "b": {"m": x + 1e-17 * np.arange(60)}}, test=test)
        row = c.tested.iloc[0]
        assert row["diff"] == 0 and not row["significant"], test
        c = compare({"a": {"m": x}, "b": {"m": x + 0.05}}, test=test)
        assert c.tested.iloc[0]["significant"], test  # a real shift still separates


def test_unadjusted_interval_is_said_so():
    "An interval clear of zero beside a Holm p above alpha says it is uncorrected."
    r = dict(diff=-0.05, low=-0.09, high=-0.01, p=0.02, p_holm=0.06, family=5)
    r.update(significant=False, sd=0.1, at_ceiling=0.0)
    assert "before correction" in verdict(r)
    assert "before correction" not in verdict({**r, "low": -0.09, "high": 0.01})


def test_small_samples_say_the_test_cannot_hold_alpha():
    # issue 27: 3 queries, the bootstrap said p = 0, significant; now no call is made
    # and the verdict says why; Fisher cannot reach p < 0.05 there and says so
    table = per_query_table(
        None,
        {
            "a": pd.DataFrame({"mrr": [1.0, 1.0, 1.0]}, index=["q1", "q2", "q3"]),
            "b": pd.DataFrame({"mrr": [0.0, 0.0, 0.0]}, index=["q1", "q2", "q3"]),
        },
    )
    boot = compare(table, test="bootstrap")
    assert boot.note and "bootstrap" in boot.note
    assert boot.tested.significant.isna().all()
    assert boot.tested.p.gt(0).all()
    assert "cannot be tested at this size" in boot.sentences()[0]
    fisher = compare(table, test="fisher")
    assert "smallest possible p is 0.25" in fisher.note
    assert not fisher.tested.significant.any()
    big = pd.DataFrame(
        {"mrr": np.linspace(0, 1, 60)}, index=[f"q{i}" for i in range(60)]
    )
    assert (
        compare(
            per_query_table(None, {"a": big, "b": big * 0.5}), test="bootstrap"
        ).note
        is None
    )
