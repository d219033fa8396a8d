"""Tests for irbook.stats (bootstrap confidence intervals) against independent
references.

References: scipy.stats.bootstrap (percentile method, same seeded resamples), the normal
approximation for large samples, scipy's paired t-test, and coverage on synthetic data
with a known mean.
"""

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from irbook.figures import plot_bootstrap_diff, plot_forest
from irbook.stats import (
    BootstrapCI,
    PairedBootstrap,
    bootstrap_ci,
    bootstrap_table,
    holm,
    paired_bootstrap,
    resample_means,
    t_isf,
    t_p,
    t_quantile,
    t_sf,
)


def _scipy_ci(x, B, alpha, seed, **kw):
    "scipy's percentile interval for the mean, drawing from the same generator."
    r = sps.bootstrap(
        (np.asarray(x),),
        np.mean,
        n_resamples=B,
        confidence_level=1 - alpha,
        method="percentile",
        rng=np.random.default_rng(seed),
        **kw,
    )
    return (
        r.confidence_interval.low,
        r.confidence_interval.high,
        r.bootstrap_distribution,
    )


def _metric_like(n, seed):
    """Per-query scores shaped like an IR metric: a pile at 0, a pile at 1, the rest in
    between."""
    rng = np.random.default_rng(seed)
    x = rng.beta(0.7, 0.9, n)
    x[rng.random(n) < 0.2] = 0.0
    x[rng.random(n) < 0.1] = 1.0
    return x


# --- agreement with scipy.stats.bootstrap
# ------------------------------------------------------------


@pytest.mark.parametrize(
    "n,B,alpha,seed",
    [
        (1667, 2000, 0.05, 0),
        (50, 999, 0.1, 7),
        (3, 500, 0.01, 123),
        (10_000, 300, 0.05, 2),
    ],
)
def test_ci_equals_scipy_percentile(n, B, alpha, seed):
    x = _metric_like(n, seed)
    ci = bootstrap_ci(x, B=B, alpha=alpha, seed=seed)
    lo, hi, dist = _scipy_ci(x, B, alpha, seed)
    np.testing.assert_allclose(ci.samples, dist, rtol=0, atol=1e-12)
    assert ci.low == pytest.approx(lo, abs=1e-12) and ci.high == pytest.approx(
        hi, abs=1e-12
    )
    assert ci.mean == pytest.approx(x.mean(), abs=1e-15)
    assert (ci.B, ci.alpha) == (B, alpha)


@pytest.mark.parametrize("batch", [1, 7, 64, 10_000])
def test_batch_changes_memory_not_result(batch):
    x = _metric_like(300, 1)
    ref = bootstrap_ci(x, B=250, seed=5)
    got = bootstrap_ci(x, B=250, seed=5, batch=batch)
    np.testing.assert_array_equal(got.samples, ref.samples)
    lo, hi, _ = _scipy_ci(
        x, 250, 0.05, 5, batch=batch
    )  # scipy with its own batching agrees too
    assert (got.low, got.high) == pytest.approx((lo, hi), abs=1e-12)


def test_paired_equals_scipy_paired():
    a, b = _metric_like(800, 1), _metric_like(800, 2)
    res = paired_bootstrap(a, b, B=1500, alpha=0.05, seed=11)
    r = sps.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        paired=True,
        n_resamples=1500,
        method="percentile",
        rng=np.random.default_rng(11),
    )
    assert res.low == pytest.approx(r.confidence_interval.low, abs=1e-12)
    assert res.high == pytest.approx(r.confidence_interval.high, abs=1e-12)
    assert res.mean == pytest.approx((a - b).mean(), abs=1e-15)
    # the p-like share is computed from the same distribution scipy returns
    d = r.bootstrap_distribution
    far = min((d <= 0).sum(), (d >= 0).sum())  # counted as a Monte Carlo p-value
    assert res.p == pytest.approx(min(1.0, 2 * (far + 1) / (len(d) + 1)), abs=1e-12)


def test_table_columns_equal_single_cis():
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {f"s{i}": _metric_like(400, i) for i in range(4)},
        index=[f"q{j}" for j in range(400)],
    )
    t = bootstrap_table(table, B=1000, alpha=0.1, seed=3)
    assert list(t.index) == list(table.columns) and list(t.columns) == [
        "mean",
        "low",
        "high",
    ]
    for col in table:
        one = bootstrap_ci(table[col], B=1000, alpha=0.1, seed=3)
        assert t.loc[col, "mean"] == pytest.approx(one.mean, abs=1e-15)
        assert (t.loc[col, "low"], t.loc[col, "high"]) == pytest.approx(
            (one.low, one.high), abs=1e-12
        )
    # all columns resample the same queries: a column's resampled means shift exactly
    # with the column
    m = resample_means(np.column_stack([table.s0, table.s0 + 0.25]), B=200, seed=1)
    np.testing.assert_allclose(m[:, 1] - m[:, 0], 0.25, atol=1e-12)
    assert rng is not None


# --- independent references: normal approximation, t-test
# ------------------------------------------


def test_large_B_matches_normal_approximation():
    x = _metric_like(5000, 4)
    ci = bootstrap_ci(x, B=20_000, seed=0)
    half = sps.norm.ppf(0.975) * x.std(ddof=1) / np.sqrt(len(x))
    assert ci.low == pytest.approx(x.mean() - half, abs=0.05 * half)
    assert ci.high == pytest.approx(x.mean() + half, abs=0.05 * half)
    assert ci.samples.std(ddof=1) == pytest.approx(
        x.std(ddof=0) / np.sqrt(len(x)), rel=0.03
    )


@pytest.mark.parametrize("shift", [0.0, 0.01, 0.02, 0.04])
def test_paired_share_tracks_t_test(shift):
    rng = np.random.default_rng(int(shift * 1000))
    base = _metric_like(1500, 9)
    a = np.clip(base + rng.normal(shift, 0.15, base.size), 0, 1)
    b = np.clip(base + rng.normal(0.0, 0.15, base.size), 0, 1)
    res = paired_bootstrap(a, b, B=4000, seed=1)
    p_t = sps.ttest_rel(a, b).pvalue
    assert res.p == pytest.approx(p_t, abs=0.03)
    assert res.low <= (a - b).mean() <= res.high


# --- coverage
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_coverage_on_known_mean(alpha):
    # Beta(2, 5) has mean 2/7; 400 experiments of 200 queries each
    rng = np.random.default_rng(2024)
    hits = 0
    for i in range(400):
        x = rng.beta(2, 5, 200)
        ci = bootstrap_ci(x, B=500, alpha=alpha, seed=i)
        hits += ci.low <= 2 / 7 <= ci.high
    cover = hits / 400
    sd = np.sqrt(alpha * (1 - alpha) / 400)
    assert (
        1 - alpha - 4 * sd - 0.01 <= cover <= 1 - alpha + 4 * sd
    )  # percentile intervals run slightly narrow


def test_paired_coverage_on_known_difference():
    rng = np.random.default_rng(77)
    hits = 0
    for i in range(300):
        q = rng.random(150)  # query difficulty shared by both systems
        a = q + rng.normal(0.03, 0.1, 150)
        b = q + rng.normal(0.0, 0.1, 150)
        r = paired_bootstrap(a, b, B=500, seed=i)
        hits += r.low <= 0.03 <= r.high
    assert 0.90 <= hits / 300 <= 0.985


# --- properties
# ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=40),
    st.integers(1, 300),
    st.floats(0.001, 0.999),
    st.integers(0, 2**32 - 1),
)
def test_interval_inside_data_range(xs, B, alpha, seed):
    x = np.array(xs)
    ci = bootstrap_ci(x, B=B, alpha=alpha, seed=seed)
    assert x.min() - 1e-12 <= ci.low <= ci.high <= x.max() + 1e-12
    assert ci.samples.shape == (B,)


def test_identical_systems():
    a = _metric_like(100, 3)
    r = paired_bootstrap(a, a.copy(), B=200, seed=0)
    assert (r.mean, r.low, r.high, r.p) == (0.0, 0.0, 0.0, 1.0)


def test_seeded_and_generator():
    x = _metric_like(100, 0)
    assert bootstrap_ci(x, seed=1) == bootstrap_ci(x, seed=1)
    assert bootstrap_ci(x, seed=1) != bootstrap_ci(x, seed=2)
    g = bootstrap_ci(x, B=300, seed=np.random.default_rng(1))
    assert (g.low, g.high) == (
        bootstrap_ci(x, B=300, seed=1).low,
        bootstrap_ci(x, B=300, seed=1).high,
    )


def test_B_one_and_shapes():
    x = _metric_like(20, 0)
    ci = bootstrap_ci(x, B=1)
    assert ci.low == ci.high == ci.samples[0]
    assert resample_means(np.column_stack([x, x]), B=7).shape == (7, 2)
    assert isinstance(ci, BootstrapCI) and isinstance(
        paired_bootstrap(x, x, B=3), PairedBootstrap
    )


def test_series_are_aligned_on_query_ids():
    idx = [f"q{i}" for i in range(60)]
    a = pd.Series(_metric_like(60, 1), index=idx)
    b = pd.Series(_metric_like(60, 2), index=idx)
    shuffled = b.sample(frac=1, random_state=0)
    assert paired_bootstrap(a, shuffled, B=300) == paired_bootstrap(a, b, B=300)
    assert paired_bootstrap(a, shuffled, B=300).mean == pytest.approx((a - b).mean())


# --- bad input
# -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [lambda x, **k: bootstrap_ci(x, **k), lambda x, **k: paired_bootstrap(x, x, **k)],
)
@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"alpha": 0}, "alpha"),
        ({"alpha": 1}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"B": 0}, "B "),
        ({"B": -5}, "B "),
        ({"B": 2.5}, "B "),
        ({"B": True}, "B "),
    ],
)
def test_bad_parameters(fn, kw, msg):
    with pytest.raises(ValueError, match=msg):
        fn(np.ones(5), **kw)


def test_bad_scores():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="empty"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="paired: 3 scores in a, 4 in b"):
        paired_bootstrap([1, 2, 3], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="'q2'"):
        bootstrap_ci(pd.Series([0.1, 0.2, np.nan], index=["q0", "q1", "q2"]))
    with pytest.raises(ValueError, match="non-finite"):
        paired_bootstrap([0.1, np.inf], [0.1, 0.2])
    with pytest.raises(ValueError, match="1-D"):
        bootstrap_ci(np.ones((4, 2)))
    with pytest.raises(ValueError, match="'q9'"):
        paired_bootstrap(
            pd.Series([1.0, 0.0], index=["q0", "q1"]),
            pd.Series([1.0, 0.0], index=["q0", "q9"]),
        )
    with pytest.raises(ValueError, match="2-D"):
        bootstrap_table(pd.Series([0.1, 0.2]))
    with pytest.raises(ValueError, match="empty"):
        bootstrap_table(pd.DataFrame({"a": []}))


# --- plots
# --------------------------------------------------------------------------------------


def test_plots_draw_what_they_are_given():
    table = pd.DataFrame({"x": _metric_like(100, 1), "y": _metric_like(100, 2) * 0.5})
    cis = bootstrap_table(table, B=200)
    ax = plot_forest(cis, title="t")
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "y",
        "x",
    ]  # sorted by mean, best on top
    res = paired_bootstrap(table.x, table.y, B=200)
    ax = plot_bootstrap_diff(res, names=("x", "y"))
    assert (
        sum(bar.get_height() for bar in ax.containers[0]) == 200
    )  # the histogram holds every resample
    matplotlib.pyplot.close("all")


# ---------------------------------------------------------------- Holm
def _holm_reference(p):
    "Holm's procedure written from its definition: step down the sorted p-values."
    m, order = len(p), sorted(range(len(p)), key=lambda i: p[i])
    adj, running = [0.0] * m, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adj[i] = running
    return adj


def test_holm_equals_its_definition():
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 40):
        for _ in range(20):
            p = rng.uniform(0, 0.2, m) ** rng.uniform(0.5, 3)
            assert np.allclose(holm(p), _holm_reference(list(p)), atol=1e-15)
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx(
        [0.03, 0.06, 0.06, 0.02]
    )
    for bad in ([0.1, np.nan], [1.2], [[0.1, 0.2]], [-0.1]):
        with pytest.raises(ValueError, match="p-values"):
            holm(bad)


@pytest.mark.parametrize("n", [3, 5, 10, 20, 50])
def test_each_test_holds_its_level_or_says_it_cannot(n):
    """Type-I error of the paired t-test, Fisher's randomisation test and the paired
    bootstrap on equal systems (normal per-query differences), 1,000 experiments per
    size: at most alpha plus three Monte Carlo errors, unless `level_note` says the
    test cannot hold its level at this size (issue 27, item 4)."""
    from scipy.stats import ttest_1samp

    from irbook.stats import level_note, randomization_test

    alpha, reps = 0.05, 1000
    bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / reps)
    x, zero = np.random.default_rng(n).standard_normal((reps, n)), np.zeros(n)
    p = {
        "t": ttest_1samp(x, 0.0, axis=1).pvalue,
        "fisher": np.array(
            [randomization_test(r, zero, n=999, seed=i) for i, r in enumerate(x)]
        ),
        "bootstrap": np.array(
            [paired_bootstrap(r, zero, B=999, seed=i).p for i, r in enumerate(x)]
        ),
    }
    for test, pv in p.items():
        assert (pv > 0).all(), f"{test} reported p = 0"  # no test may report p = 0
        rate = float(np.mean(pv < alpha))
        note = level_note(test, n, alpha)
        assert rate <= bound or note, (test, n, rate)
        if test == "fisher" and note:  # its smallest p is above alpha: it rejects
            assert rate <= 0.01, (n, rate)  # only by Monte Carlo noise, if ever
    assert level_note("t", n) is None  # the t-test holds it at every size here
    assert (level_note("bootstrap", n) is None) == (n >= 50)


# --- Student's t computed here (no scipy at run time), checked against scipy and mpmath

T_DFS = [1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 15, 20, 29, 30, 50, 99, 100, 200, 500, 1000,
         5000, 1e4, 1e5, 1e6, 1e8, math.inf]  # fmt: skip
T_PS = [1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
        0.2, 0.3, 0.4, 0.45]  # fmt: skip
T_TS = [0.01, 0.1, 0.5, 1, 1.5, 1.96, 2, 2.5, 3, 4, 5, 7, 10, 20, 50]


def test_t_quantile_and_tail_equal_scipys():
    from scipy.special import stdtr, stdtrit

    worst_q = worst_p = 0.0
    for df in T_DFS:
        for p in T_PS:
            ref = -stdtrit(df, p)  # the upper quantile, from the small side
            worst_q = max(worst_q, abs(t_isf(p, df) / ref - 1))
            q = 1 - p / 2 if p >= 1e-4 else None  # as the intervals call it
            if q is not None:
                assert abs(t_quantile(p, df) / stdtrit(df, 1 - p / 2) - 1) < 1e-13
        for t in T_TS:
            ref = stdtr(df, -t)
            ours = t_sf(t, df)
            worst_p = max(worst_p, abs(ours / ref - 1) if ref else ours)
            assert t_p(t, df) == min(1.0, 2 * t_sf(t, df))
    assert worst_q < 1e-13 and worst_p < 1e-13, (worst_q, worst_p)


def test_t_where_scipy_is_off_mpmath_decides():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40

    def sf(t, df):
        t, df = mp.mpf(t), mp.mpf(df)
        return (
            mp.betainc(df / 2, mp.mpf(1) / 2, 0, df / (df + t * t), regularized=True)
            / 2
        )

    from scipy.special import stdtrit

    for p, df in [(0.4999999, 4), (0.4999, 4)]:
        ours, theirs = t_isf(p, df), -stdtrit(df, p)
        assert abs(ours / theirs - 1) > 1e-11  # the two disagree here ...
        # ... and ours has the tail asked for, to 1e-15; scipy's 100 times less so
        assert abs(sf(ours, df) / p - 1) < 1e-15 < abs(sf(theirs, df) / p - 1) / 100


def test_t_edges():
    assert t_sf(0, 5) == 0.5 and t_sf(math.inf, 5) == 0.0 and t_sf(-math.inf, 5) == 1.0
    assert t_isf(0.5, 3) == 0.0 and t_isf(0, 3) == math.inf and t_isf(1, 3) == -math.inf
    assert t_isf(0.75, 10) == -t_isf(0.25, 10)
    assert abs(t_sf(-2.0, 7) - (1 - t_sf(2.0, 7))) < 1e-15
    for bad in [(1.0, 0), (1.0, -2), (math.nan, 3), (1.0, math.nan)]:
        assert math.isnan(t_sf(*bad))
    for bad in [(1.5, 3), (-0.1, 3), (0.05, 0), (math.nan, 3)]:
        assert math.isnan(t_isf(*bad))
    assert t_quantile(1.0, 9) == 0.0 and t_p(0.0, 9) == 1.0
    # Cauchy (1 df) and the normal (inf df) in closed form
    assert abs(t_isf(0.1, 1) - math.tan(math.pi * 0.4)) < 1e-14 * math.tan(
        math.pi * 0.4
    )
    assert abs(t_sf(1.959963984540054, math.inf) - 0.025) < 1e-16
