"""irbook.labelling: active draws, the judge plan and stratified PPI, on synthetic data
where the truth is known. (a) active_interval: unbiased whatever the design, covers at
n = 25, narrower than uniform-sampling PPI++ where the judge's error is uneven and its
uncertainty says where; (b) judge_plan: the closed form n_human (1 - rho^2) for large n,
and the power achieved at the planned n; (c) stratified_ppi: coverage, and narrower than
one PPI++ when the judge differs by stratum; (d) refusals of bad input."""

import math

import numpy as np
import pandas as pd
import pytest

from irbook.labelling import (
    JudgePlan,
    active_interval,
    judge_plan,
    label_next,
    label_probabilities,
    simulate_active,
    simulate_plan,
    simulate_strata,
    stratified_ppi,
)
from irbook.power import n_for
from irbook.ppi import ppi_interval, ppi_paired

TRUTH = 0.4  # the mean of Beta(2, 3)


def population(rng, N=2000, hard=0.3, hard_bias=0.05):
    "y ~ Beta(2, 3); the judge's noise sd 0.2 on the `hard` share, 0.03 on the rest."
    is_hard = rng.random(N) < hard
    y = rng.beta(2, 3, N)
    sd = np.where(is_hard, 0.2, 0.03)
    bias = np.where(is_hard, hard_bias, 0.05)
    f = np.clip(y + bias + sd * rng.standard_normal(N), 0, 1)
    u = sd**2 * np.exp(rng.normal(0, 0.5, N))  # the judge's own guess of its error
    return y, f, u


def active_draws(rng, n, sets=60, per=5, eta=0.3, design="active", **kw):
    "(estimate, low, high, width of uniform PPI++) over sets x per draws of n labels."
    out = []
    for _ in range(sets):
        y, f, u = population(rng, **kw)
        pi = label_probabilities(
            f, uncertainty=u if design == "active" else None, eta=eta
        )
        for _ in range(per):
            idx = rng.choice(len(f), n, p=pi)
            iv = active_interval(y[idx], f, idx, pi[idx])
            s = rng.choice(len(f), n, replace=False)
            w = ppi_interval(y[s], f[s], f, labeled=s).width
            out.append((iv.estimate, iv.low, iv.high, w))
    return np.array(out)


# (a) active sampling ----------------------------------------------------------------


def test_probabilities_follow_the_uncertainty_and_stay_positive():
    rng = np.random.default_rng(0)
    y, f, u = population(rng)
    pi = label_probabilities(f, uncertainty=u, eta=0.3)
    assert pi.sum() == pytest.approx(1.0, abs=1e-12)
    assert (
        pi.min() >= 0.3 / len(f) - 1e-15
    )  # the uniform share: every question a chance
    hard = u > 0.005
    assert pi[hard].mean() > 3 * pi[~hard].mean()  # labels go where the judge errs
    assert np.allclose(label_probabilities(f), 1 / len(f))  # no information: uniform


def test_labels_in_hand_calibrate_an_uninformative_uncertainty():
    rng = np.random.default_rng(1)
    N = 1000
    f = rng.random(N)
    u = np.exp(rng.normal(0, 1.5, N))  # says nothing about the judge's error
    lab = rng.integers(0, N, 300)
    y = f[lab] + rng.normal(0, 0.1, 300)
    before = label_probabilities(f, uncertainty=u)
    after = label_probabilities(f, lab, u, y)
    assert after.std() < 0.5 * before.std()
    # an informative one survives the calibration
    u2 = np.where(np.arange(N) % 2 == 0, 0.001, 0.1)
    y2 = f[lab] + rng.normal(0, 1, 300) * np.sqrt(u2[lab])
    pi = label_probabilities(f, lab, u2, y2)
    assert pi[1::2].mean() > 3 * pi[::2].mean()


def test_label_next_is_seeded_and_names_questions_by_id():
    f = pd.Series([0.2, 0.9, 0.5, 0.4], index=["a", "b", "c", "d"])
    u = [0.01, 0.01, 0.3, 0.01]
    t = label_next(f, k=4, uncertainty=u, seed=7)
    assert list(t.columns) == ["question", "pi", "labeled"]
    assert set(t.question) <= set(f.index)
    assert t.equals(label_next(f, k=4, uncertainty=u, seed=7))
    many = pd.concat([label_next(f, k=4, uncertainty=u, seed=s) for s in range(30)])
    assert (many.question == "c").mean() > 0.35  # pi("c") = 0.7 * 0.548 / 0.848 + 0.075
    assert many.pi[many.question == "c"].eq(many.pi.max()).all()
    done = label_next(f, ["a", "c"], k=4, y=[0.3, 0.1], seed=1)
    assert done.labeled.tolist() == done.question.isin(["a", "c"]).tolist()


def test_active_interval_is_unbiased():
    rng = np.random.default_rng(2)
    # the judge is harsh where it is unsure: unweighted active draws would be biased
    est = active_draws(rng, 20, sets=200, per=10, hard_bias=-0.15)[:, 0]
    se = est.std() / np.sqrt(len(est))
    assert abs(est.mean() - TRUTH) < 3 * se + 0.001, (est.mean(), se)


def test_active_interval_covers_at_n25_and_beats_uniform_ppi():
    r = active_draws(np.random.default_rng(3), 25)
    covered = (r[:, 1] <= TRUTH) & (TRUTH <= r[:, 2])
    assert len(r) == 300 and covered.mean() >= 0.915, covered.mean()
    width, width_ppi = (r[:, 2] - r[:, 1]).mean(), r[:, 3].mean()
    assert width < 0.9 * width_ppi, (width, width_ppi)


def test_uniform_draws_give_back_the_ppi_estimate():
    # pi = 1/N: Z = y - lam (f - fbar); with lam fixed at 1 by a judge equal to y on the
    # labelled draws, the estimate is the judge's mean over all N questions
    rng = np.random.default_rng(4)
    f = rng.random(500)
    idx = rng.choice(500, 40, replace=False)
    iv = active_interval(f[idx], f, idx, np.full(40, 1 / 500))
    assert iv.lam == pytest.approx(1.0)
    assert iv.estimate == pytest.approx(f.mean(), abs=1e-12)


def test_active_interval_refuses_bad_input():
    f = np.linspace(0, 1, 10)
    with pytest.raises(ValueError, match="empty"):
        active_interval([], f, [], [])
    with pytest.raises(ValueError, match="one entry a draw"):
        active_interval([0.1, 0.2, 0.3], f, [0, 1], [0.1, 0.1])
    with pytest.raises(ValueError, match="probabilities"):
        active_interval([0.1, 0.2], f, [0, 1], [0.1, 0.0])
    with pytest.raises(ValueError, match="probabilities"):
        active_interval([0.1, 0.2], f, [0, 1], [0.1, 1.5])
    with pytest.raises(ValueError, match="at least 2"):
        active_interval([0.1], f, [0], [0.1])
    with pytest.raises(ValueError, match="outside"):
        active_interval([0.1, 0.2], f, [0, 10], [0.1, 0.1])
    with pytest.raises(ValueError, match="alpha"):
        active_interval([0.1, 0.2], f, [0, 1], [0.1, 0.1], alpha=1)


def test_label_next_refuses_bad_input():
    f = np.linspace(0, 1, 5)
    with pytest.raises(ValueError, match="more than the 5"):
        label_next(f, k=6)
    with pytest.raises(ValueError, match="positive integer"):
        label_next(f, k=0)
    with pytest.raises(ValueError, match="empty"):
        label_next([], k=1)
    with pytest.raises(ValueError, match="uncertainty has 2"):
        label_next(f, k=2, uncertainty=[1, 2])
    with pytest.raises(ValueError, match=">= 0"):
        label_next(f, k=2, uncertainty=[1, 1, -1, 1, 1])
    with pytest.raises(ValueError, match="not 0 everywhere"):
        label_next(f, k=2, uncertainty=np.zeros(5))
    with pytest.raises(ValueError, match="together"):
        label_next(f, k=2, labeled=[0])
    with pytest.raises(ValueError, match="y has 2"):
        label_next(f, k=2, labeled=[0], y=[0.1, 0.2])
    with pytest.raises(ValueError, match="eta"):
        label_next(f, k=2, eta=0)


# (b) the judge plan ------------------------------------------------------------------


def test_judge_plan_closed_form_for_large_n():
    rng = np.random.default_rng(5)
    z1, z2 = rng.standard_normal((2, 40000))
    for rho in (0.6, 0.85):
        f = rho * z1 + np.sqrt(1 - rho**2) * z2
        p = judge_plan(z1[:20000], f[:20000], f[20000:], 0.05, N=10**7)
        assert isinstance(p, JudgePlan)
        assert p.n_human == n_for(0.05, p.sd_human)
        assert p.rho == pytest.approx(rho, abs=0.02)
        assert p.n_ppi / p.n_human == pytest.approx(1 - p.rho**2, abs=0.02)
        assert p.labels_saved == p.n_human - p.n_ppi > 0


def test_judge_plan_is_more_careful_at_small_n():
    # few questions: the t quantile and an estimated lambda ask for more than 1 - rho^2
    rng = np.random.default_rng(6)
    z1, z2 = rng.standard_normal((2, 40000))
    f = 0.95 * z1 + np.sqrt(1 - 0.95**2) * z2
    p = judge_plan(z1[:20000], f[:20000], f[20000:], 0.45, N=10**6)
    assert p.n_human < 50
    assert p.n_ppi > 1.5 * p.n_human * (1 - p.rho**2)
    useless = judge_plan(z1[:20000], z2[:20000], z2[20000:], 0.05, N=10**6)
    assert useless.n_human <= useless.n_ppi <= 1.05 * useless.n_human


def two_systems(rng, N, noise=0.12):
    yb = rng.beta(2, 2, N)
    ya = np.clip(yb + 0.06 + rng.normal(0, 0.25, N), 0, 1)
    fa = np.clip(ya + 0.1 + rng.normal(0, noise, N), 0, 1)
    fb = np.clip(yb + 0.1 + rng.normal(0, noise, N), 0, 1)
    return ya, yb, fa, fb


def test_judge_plan_reaches_its_power():
    rng = np.random.default_rng(8)
    ya, yb, fa, fb = two_systems(rng, 400_000)
    y, f = ya - yb, fa - fb
    diff = float(y.mean())
    p = judge_plan(y[:20000], f[:20000], f[20000:], diff, N=2000)
    n, hits = p.n_ppi, []
    assert 0.3 * p.n_human < n < 0.7 * p.n_human  # rho about 0.8: about 0.4
    for _ in range(400):
        ya, yb, fa, fb = two_systems(rng, 2000)
        iv = ppi_paired(ya[:n], yb[:n], fa[:n], fb[:n], fa[n:], fb[n:])
        hits.append(iv.low > 0)
    assert abs(np.mean(hits) - 0.8) <= 0.07, np.mean(hits)


def test_judge_plan_from_small_pilots_reaches_about_its_power():
    rng = np.random.default_rng(9)
    ya, yb, fa, fb = two_systems(rng, 400_000)
    diff = float((ya - yb).mean())
    hits = []
    for _ in range(400):
        ya, yb, fa, fb = two_systems(rng, 2000)
        y, f = ya - yb, fa - fb
        n = judge_plan(y[:30], f[:30], f[30:], diff).n_ppi
        ya, yb, fa, fb = two_systems(rng, 2000)
        hits.append(ppi_paired(ya[:n], yb[:n], fa[:n], fb[:n], fa[n:], fb[n:]).low > 0)
    assert abs(np.mean(hits) - 0.8) <= 0.07, np.mean(hits)


def test_judge_plan_refuses_bad_input():
    y, f = [0.1, -0.2, 0.0, 0.3], [0.1, -0.1, 0.0, 0.2]
    with pytest.raises(ValueError, match="empty"):
        judge_plan(y, f, [], 0.1)
    with pytest.raises(ValueError, match="the same ones"):
        judge_plan(y, f[:3], [0.2], 0.1)
    with pytest.raises(ValueError, match="at least 3"):
        judge_plan(y[:2], f[:2], [0.2], 0.1)
    with pytest.raises(ValueError, match="non-zero"):
        judge_plan(y, f, [0.2], 0.0)
    with pytest.raises(ValueError, match="not vary"):
        judge_plan([0.1] * 4, f, [0.2], 0.1)
    with pytest.raises(ValueError, match="alpha < power"):
        judge_plan(y, f, [0.2], 0.1, power=1.0)
    with pytest.raises(ValueError, match="at least 3 questions"):
        judge_plan(y, f, [0.2], 0.1, N=2)
    assert math.isinf(judge_plan(y, f, [0.2], 1e-4, N=10).n_ppi)  # not within N


# (c) stratified PPI ------------------------------------------------------------------

SHARES = np.array([0.5, 0.3, 0.2])


def strata(rng, N=2000):
    s = rng.choice(3, N, p=SHARES)
    y = np.clip(np.array([0.6, 0.4, 0.2])[s] + rng.normal(0, 0.15, N), 0, 1)
    bias, sd = np.array([0.15, -0.1, 0.0])[s], np.array([0.05, 0.1, 0.25])[s]
    return s, y, np.clip(y + bias + sd * rng.standard_normal(N), 0, 1)


def test_stratified_covers_and_narrows_when_the_judge_differs():
    rng = np.random.default_rng(10)
    truth = strata(rng, 10**6)[1].mean()
    n_h = np.round(40 * SHARES).astype(int)
    got = []
    for _ in range(300):
        s, y, f = strata(rng)
        L = np.zeros(len(s), bool)
        for h, k in enumerate(n_h):
            L[rng.choice(np.flatnonzero(s == h), k, replace=False)] = True
        a = stratified_ppi(y[L], f[L], f[~L], s[L], s[~L])
        got.append((truth in a, a.width, ppi_interval(y[L], f[L], f[~L]).width))
    covered, width, width_ppi = np.mean(got, axis=0)
    assert covered >= 0.92, covered
    assert width < 0.9 * width_ppi, (width, width_ppi)


def test_stratified_one_stratum_and_a_fully_labelled_one():
    rng = np.random.default_rng(11)
    y, f = rng.random(30), rng.random(200)
    one = stratified_ppi(y, f[:30], f[30:], ["x"] * 30, ["x"] * 170)
    assert one.N == 200 and one.n == 30
    # a stratum without judge-only questions is its human mean, weighted by its share
    two = stratified_ppi(
        np.r_[y, [1.0, 0.0]], np.r_[f[:30], [0.5, 0.5]], f[30:],
        ["x"] * 30 + ["z", "z"], ["x"] * 170,
    )  # fmt: skip
    assert two.estimate == pytest.approx(200 / 202 * one.estimate + 2 / 202 * 0.5)


def test_stratified_refuses_bad_input():
    y, f = [0.1, 0.5, 0.3, 0.9], [0.2, 0.4, 0.3, 0.8]
    with pytest.raises(ValueError, match="stratum 'b' has 1 human-labelled"):
        stratified_ppi(y, f, [0.5, 0.6], ["a", "a", "a", "b"], ["a", "b"])
    with pytest.raises(ValueError, match="stratum 'c' has 0 human-labelled"):
        stratified_ppi(y, f, [0.5, 0.6], ["a", "a", "b", "b"], ["a", "c"])
    with pytest.raises(ValueError, match="one entry a question"):
        stratified_ppi(y, f, [0.5, 0.6], ["a", "a", "b"], ["a", "b"])
    with pytest.raises(ValueError, match="one entry a question"):
        stratified_ppi(y, f, [0.5, 0.6], ["a", "a", "b", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        stratified_ppi([], [], [0.5], [], ["a"])
    with pytest.raises(ValueError, match="alpha"):
        stratified_ppi(y, f, [0.5], list("aabb"), ["a"], alpha=0)


# (e) what api/labelling's page checks, kept in `make test` while the page's Monte
# Carlo tables are `make test-slow`'s and the book's (issue 37) ------------------------


def test_a_constant_judge_gives_the_mean_of_y_with_students_t():
    # uniform draws and a judge that says nothing: the estimate is the mean of the
    # labels, the half-width Student's t (4 df) times the two-part standard error
    y = np.array([0.2, 0.9, 0.4, 0.7, 0.1])
    iv = active_interval(y, np.full(100, 0.5), [3, 8, 1, 50, 7], np.full(5, 0.01))
    assert iv.estimate == pytest.approx(y.mean(), abs=1e-12)
    se = np.sqrt(y.var(ddof=1) / 5 + (np.mean(y**2) - y.mean() ** 2) / 100)
    assert iv.high - iv.estimate == pytest.approx(2.776445 * se, abs=1e-5)
    assert iv.estimate - iv.low == pytest.approx(iv.high - iv.estimate, abs=1e-12)


def test_stratified_estimate_is_the_share_weighted_sum_of_its_strata():
    rng = np.random.default_rng(12)
    y = rng.random(12)
    f = np.clip(y + rng.normal(0, 0.1, 12), 0, 1)
    f_u = rng.random(12)
    kind_l = np.array(["a"] * 5 + ["b"] * 7)
    kind_u = np.array(["a"] * 5 + ["b"] * 7)
    s = stratified_ppi(y, f, f_u, kind_l, kind_u)
    assert (s.n, s.N, s.method) == (12, 24, "stratified ppi++")
    each = [
        stratified_ppi(y[kind_l == k], f[kind_l == k], f_u[kind_u == k],
                       kind_l[kind_l == k], kind_u[kind_u == k]).estimate
        for k in ("a", "b")
    ]  # fmt: skip
    assert s.estimate == pytest.approx(10 / 24 * each[0] + 14 / 24 * each[1], abs=1e-12)
    # a judge that says nothing (lambda 0): each stratum is its human mean
    c = stratified_ppi(y, np.full(12, 0.5), np.full(12, 0.5), kind_l, kind_u)
    means = [y[kind_l == k].mean() for k in ("a", "b")]
    assert c.estimate == pytest.approx(10 / 24 * means[0] + 14 / 24 * means[1])


def test_judge_plan_reports_its_pilot():
    rng = np.random.default_rng(3)
    d_human = np.clip(rng.normal(0.04, 0.2, 1000), -1, 1)
    d_judge = np.clip(d_human + rng.normal(0, 0.1, 1000), -1, 1)
    plan = judge_plan(d_human[:40], d_judge[:40], d_judge[40:], diff=0.03)
    assert (plan.pilot, plan.N) == (40, 1000)
    assert plan.rho == pytest.approx(np.corrcoef(d_human[:40], d_judge[:40])[0, 1])
    assert 0.8 < plan.rho < 0.95 and plan.n_ppi < 0.45 * plan.n_human


@pytest.mark.parametrize(
    "simulate, kw, columns",
    [
        (simulate_active, dict(ns=(10, 25), sets=3, draws=3),
         ["n", "coverage", "coverage_ppi", "width", "width_uniform", "width_ppi",
          "bias"]),
        (simulate_plan, dict(noises=(0.25, 0.06), pilots=5, studies=10),
         ["noise", "rho", "n_human", "n_ppi", "saved", "power_human", "power_ppi",
          "pilot_n_ppi", "power_pilot"]),
        (simulate_strata, dict(ns=(10, 20), draws=5),
         ["n", "coverage", "coverage_ppi", "width", "width_ppi", "ratio"]),
    ],
)  # fmt: skip
def test_the_page_simulations_run_small_and_are_seeded(simulate, kw, columns):
    "The page's simulations at full size are `make test-slow`'s (api/labelling)."
    t = simulate(**kw)
    assert list(t.columns) == columns and len(t) == 2
    rates = t[[c for c in columns if c.startswith(("coverage", "power"))]]
    assert ((rates >= 0) & (rates <= 1)).all().all(), rates
    pd.testing.assert_frame_equal(t, simulate(**kw))
    assert not t.equals(simulate(**kw, seed=1))
