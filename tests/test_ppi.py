"""irbook.ppi: judge-assisted intervals. (a) the reference: equal to ppi-python's
`ppi_mean_ci` (`lam=1` is classic PPI, `lam=None` the power-tuned PPI++, `lam=0` the
classical interval) on the same arrays; (b) simulations where the truth is known:
coverage within Monte Carlo error of 1 - alpha for a good, a useless and an adversarial
judge, width below human-only for the good judge and, for PPI++, not above it for the
others; (c) the paired difference of two systems, likewise."""

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci
from scipy import stats
from scipy import stats as sps

from irbook.ppi import (
    PPIInterval,
    human_interval,
    judge_intervals,
    power_lambda,
    ppi_interval,
    ppi_paired,
)

ALPHA = 0.1


def _case(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(5, 300), rng.integers(5, 3000)
    y = rng.beta(2, 3, n)
    quality = rng.uniform(-1, 1)  # from anti-correlated to good
    fl = np.clip(quality * y + rng.normal(0.1, 0.2, n), 0, 1)
    fu = np.clip(quality * rng.beta(2, 3, m) + rng.normal(0.1, 0.2, m), 0, 1)
    return y, fl, fu


def _z_over_t(alpha, n):
    "How much narrower the normal quantile is than Student's t with n - 1 df."
    return sps.norm.ppf(1 - alpha / 2) / sps.t.ppf(1 - alpha / 2, n - 1)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_equal_to_ppi_python(seed, alpha):
    "ppi-python's estimate; its width but for Student's t and n - 1 in the variances."
    y, fl, fu = _case(seed)
    n, m = len(y), len(fu)
    for lam in (1.0, 0.3, power_lambda(y, fl, fu)):
        ref = np.ravel(ppi_mean_ci(y, fl, fu, alpha=alpha, lam=lam))
        got = ppi_interval(y, fl, fu, alpha=alpha, lam=lam, bounds=None)
        assert got.estimate == pytest.approx(ref.mean(), abs=1e-12)
        se0 = np.sqrt(np.var(y - lam * fl) / n + lam**2 * np.var(fu) / m)
        se1 = np.sqrt(
            np.var(y - lam * fl, ddof=1) / n + lam**2 * np.var(fu, ddof=1) / m
        )
        assert (ref[1] - ref[0]) / 2 == pytest.approx(
            sps.norm.ppf(1 - alpha / 2) * se0, rel=1e-9
        )
        assert got.width / 2 == pytest.approx(
            sps.t.ppf(1 - alpha / 2, n - 1) * se1, rel=1e-9
        )
    ref = classical_mean_ci(y, alpha=alpha)
    got = human_interval(y, alpha=alpha, bounds=None)
    assert got.estimate == pytest.approx(np.mean(ref), abs=1e-12)
    assert got.width / (ref[1] - ref[0]) == pytest.approx(
        np.sqrt(n / (n - 1)) / _z_over_t(alpha, n), rel=1e-6
    )


@pytest.mark.parametrize("seed", range(6))
def test_paired_equal_to_ppi_python_on_differences(seed):
    ya, fla, fua = _case(seed)
    rng = np.random.default_rng(100 + seed)
    yb = np.clip(ya + rng.normal(0, 0.1, len(ya)), 0, 1)
    flb = np.clip(fla + rng.normal(0, 0.1, len(fla)), 0, 1)
    fub = np.clip(fua + rng.normal(0, 0.1, len(fua)), 0, 1)
    ref = ppi_mean_ci(ya - yb, fla - flb, fua - fub, alpha=ALPHA, lam=1)
    got = ppi_paired(ya, yb, fla, flb, fua, fub, ALPHA, "ppi", bounds=None)
    assert got.estimate == pytest.approx(np.mean(ref), abs=1e-12)
    assert got.width > np.ravel(ref)[1] - np.ravel(ref)[0]  # t, n - 1: wider


def test_labeled_mask_and_result():
    y, fl, fu = _case(3)
    f_all = np.concatenate([fu[:7], fl, fu[7:]])
    idx = np.arange(7, 7 + len(fl))
    a = ppi_interval(y, fl, fu)
    b = ppi_interval(y, fl, f_all, labeled=idx)
    assert (a.low, a.high, a.lam) == pytest.approx((b.low, b.high, b.lam), abs=1e-12)
    assert (b.n, b.N) == (len(y), len(f_all))
    assert b.width == pytest.approx(b.high - b.low)
    assert b.estimate in b
    assert (
        isinstance(b, PPIInterval) and "ppi++" in repr(b) and "human-judged" in repr(b)
    )
    assert list(judge_intervals(y, fl, fu)) == ["human", "ppi", "ppi++"]
    assert 0 <= power_lambda(y, fl, fu) <= 1


# --- simulations where the truth is known -----------------------------------------

TRUE_MEAN = 0.4  # Beta(2, 3)
N, n, DRAWS = 2000, 200, 800


def _judge(kind, y, rng):
    "A judge of a given quality on metric values `y` (biased, as judges are)."
    if kind == "good":
        return np.clip(y + 0.1 + rng.normal(0, 0.1, len(y)), 0, 1)
    if kind == "useless":
        return rng.beta(2, 3, len(y))
    if kind == "adversarial":
        return np.clip(1 - y + rng.normal(0, 0.1, len(y)), 0, 1)
    raise ValueError(kind)


def _coverage_ok(hits, draws, alpha):
    "Coverage within Monte Carlo error: a two-sided binomial test at level 0.001."
    return stats.binomtest(int(hits), draws, 1 - alpha).pvalue > 1e-3


def _simulate(kind, seed):
    rng = np.random.default_rng(seed)
    hits = {"human": 0, "ppi": 0, "ppi++": 0}
    width = {k: [] for k in hits}
    for _ in range(DRAWS):
        y = rng.beta(2, 3, N)  # a fresh population of N questions
        f = _judge(kind, y, rng)
        for k, iv in judge_intervals(y[:n], f[:n], f[n:], alpha=ALPHA).items():
            hits[k] += TRUE_MEAN in iv
            width[k].append(iv.width)
    return hits, {k: float(np.mean(v)) for k, v in width.items()}


@pytest.fixture(scope="module", params=["good", "useless", "adversarial"])
def simulation(request):
    return request.param, *_simulate(
        request.param, seed=["good", "useless", "adversarial"].index(request.param)
    )


def test_coverage(simulation):
    kind, hits, _ = simulation
    for method, h in hits.items():
        assert _coverage_ok(h, DRAWS, ALPHA), (kind, method, h / DRAWS)


def test_width(simulation):
    kind, _, width = simulation
    if kind == "good":
        assert width["ppi++"] < 0.7 * width["human"], width
        assert width["ppi"] < 0.7 * width["human"], width
    else:  # PPI++ falls back to (about) human-only; classic PPI pays for the judge
        assert width["ppi++"] <= 1.03 * width["human"], width
        assert width["ppi"] > 1.2 * width["human"], width


@pytest.mark.parametrize("kind", ["good", "useless", "adversarial"])
def test_paired_coverage(kind):
    "B = A - 0.05 + noise per question: the true difference of the means is 0.05."
    rng = np.random.default_rng(7)
    hits = {"human": 0, "ppi": 0, "ppi++": 0}
    width = {k: [] for k in hits}
    for _ in range(DRAWS):
        ya = rng.beta(2, 3, N)
        yb = ya - 0.05 + rng.normal(0, 0.1, N)  # mean difference exactly 0.05
        fa, fb = _judge(kind, ya, rng), _judge(kind, yb, rng)
        for k in hits:
            iv = ppi_paired(
                ya[:n], yb[:n], fa[:n], fb[:n], fa[n:], fb[n:], alpha=ALPHA, method=k
            )
            hits[k] += 0.05 in iv
            width[k].append(iv.width)
    for k, h in hits.items():
        assert _coverage_ok(h, DRAWS, ALPHA), (kind, k, h / DRAWS)
    w = {k: np.mean(v) for k, v in width.items()}
    if kind == "good":
        assert w["ppi++"] < 0.9 * w["human"], w
    else:
        assert w["ppi++"] <= 1.03 * w["human"], w


@pytest.mark.parametrize("seed", range(5))
def test_a_constant_bias_of_the_judge_changes_nothing(seed):
    "The rectifier removes any constant bias: the same interval with f and f + c."
    y, fl, fu = _case(seed)
    for method in ("ppi", "ppi++"):
        a = ppi_interval(y, fl, fu, method=method)
        b = ppi_interval(y, fl + 0.3, fu + 0.3, method=method)
        assert (a.low, a.high, a.lam) == pytest.approx(
            (b.low, b.high, b.lam), abs=1e-12
        )


def test_t_quantile_is_scipys_and_imported_on_use():
    "Student's t from scipy.special on use: importing irbook.ppi loads no scipy."
    import subprocess
    import sys

    from irbook.stats import t_p, t_quantile

    for a in (0.001, 0.05, 0.1, 0.5, 0.9):
        for df in (1, 2, 9, 49, 1000):
            assert t_quantile(a, df) == pytest.approx(stats.t.ppf(1 - a / 2, df))
            assert t_p(1.7, df) == pytest.approx(2 * stats.t.sf(1.7, df))
    code = "import sys, irbook.ppi; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr  # the CLI imports irbook.ppi


def test_judged_eval_human_columns_are_the_stats_intervals():
    from irbook.metrics import evaluate
    from irbook.ppi import judged_eval

    rng = np.random.default_rng(5)
    qids, docs = [f"q{i}" for i in range(30)], ["a", "b", "c", "d"]
    truth = {q: {d: int(rng.random() < 0.4) for d in docs} for q in qids}
    judge = {q: {d: 1 - v if rng.random() < 0.2 else v for d, v in lab.items()}
             for q, lab in truth.items()}  # fmt: skip
    runs = {r: {q: {d: rng.random() for d in docs} for q in qids} for r in "XY"}
    human = {q: truth[q] for q in qids[:12]}
    t = judged_eval(human, judge, runs, "precision@2", alpha=ALPHA)
    y = {
        r: evaluate(human, {q: runs[r][q] for q in human}, "precision@2", True)
        for r in runs
    }
    from irbook.stats import diff_interval, mean_interval

    for r, row in t.set_index("run").iterrows():
        ref = mean_interval(y[r]["precision@2"].to_numpy(), alpha=ALPHA)
        assert [row.human_low, row.human_high] == pytest.approx([ref.low, ref.high])
    row = t[t.baseline.notna()].iloc[0]
    d = diff_interval(y["Y"]["precision@2"], y["X"]["precision@2"], alpha=ALPHA)
    assert [row.human_diff_low, row.human_diff_high] == pytest.approx([d.low, d.high])
    assert bool(row.significant) == (row.p_holm < ALPHA)


def test_judged_eval_takes_ranx_runs_as_it_takes_dicts():
    import pandas as pd
    import ranx

    from irbook.ppi import judged_eval

    rng = np.random.default_rng(9)
    qids, docs = [f"q{i}" for i in range(20)], ["a", "b", "c", "d"]
    truth = {q: {d: int(rng.random() < 0.4) for d in docs} for q in qids}
    runs = {r: {q: {d: rng.random() for d in docs} for q in qids} for r in "XY"}
    human = {q: truth[q] for q in qids[:10]}
    want = judged_eval(human, truth, runs, "precision@2")
    as_ranx = [ranx.Run(runs[r], name=r) for r in "XY"]
    pd.testing.assert_frame_equal(
        judged_eval(human, truth, as_ranx, "precision@2"), want
    )
    one = judged_eval(human, truth, as_ranx[0], "precision@2")
    assert one["mean"].tolist() == pytest.approx(want["mean"].iloc[:1].tolist())
