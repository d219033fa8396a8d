"""Coverage at the n practitioners have (issue 34): every interval of the statistics
layer, drawn many times from populations whose mean is known, holds its level.

Populations are `irbook.stats.POPULATIONS` (an nDCG-like graded metric, a skewed one,
two binary ones); judges go from useless to near-perfect. 1,000 draws a cell give a
Monte Carlo sd of about 0.007, so a cell must cover at least 0.92 at n = 25 (target
0.935) and 0.90 at n = 10 (target 0.91). The landed code before this policy covered
0.79-0.92 in such cells (normal quantile, lambda fitted on the same questions), so
these tests fail on it."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irbook.ppi import (
    JUDGES,
    human_interval,
    judge_coverage,
    judge_values,
    ppi_paired,
)
from irbook.stats import POPULATIONS, coverage, diff_interval, mean_interval

DRAWS = 1000


def ppi_coverage(pop, kind, n, method="ppi++", draws=DRAWS, seed=0):
    r = judge_coverage(pop, kind, n, method, draws=draws, seed=seed)
    return r["coverage"], r["width"], r["zero_width"]


@pytest.mark.parametrize("pop", ["graded", "binary", "rare"])
@pytest.mark.parametrize("kind", ["good", "biased", "useless", "flip"])
@pytest.mark.parametrize("n", [10, 25])
def test_ppi_plus_plus_holds_its_level(pop, kind, n):
    cov, width, zero = ppi_coverage(pop, kind, n)
    assert cov >= (0.92 if n >= 25 else 0.90), (pop, kind, n, cov, width)
    assert zero == 0, "a zero-width interval from data with variation"


def test_classic_ppi_falls_short_on_the_binary_metric():
    """api/ppi's claim (its table of 400 draws a cell, the same seeds): classic PPI
    (lambda = 1) trusts a biased or useless judge fully and covers less than 0.935
    somewhere on the binary metric, while it holds on the graded one."""
    ns = (10, 25, 50)
    bad = [ppi_coverage("binary", k, n, "ppi", 400)[0] for k in ("biased", "useless")
           for n in ns]  # fmt: skip
    graded = [ppi_coverage("graded", k, n, "ppi", 400)[0] for k in JUDGES for n in ns]
    assert min(bad) < 0.935 <= min(graded), (bad, graded)


def test_a_good_judge_narrows_the_interval():
    "Coverage alone is not a fix: with a good judge PPI++ is narrower than humans."
    _, w_good, _ = ppi_coverage("graded", "good", 25, draws=300)
    _, w_useless, _ = ppi_coverage("graded", "useless", 25, draws=300)
    draw, _ = POPULATIONS["graded"]
    g = np.random.default_rng(1)
    w_human = np.mean([human_interval(draw(g, 25)).width for _ in range(300)])
    assert w_good < 0.5 * w_human, (w_good, w_human)
    assert w_useless < 1.15 * w_human, (w_useless, w_human)  # costs little


@pytest.mark.parametrize("pop", list(POPULATIONS))
@pytest.mark.parametrize("n", [3, 5, 10, 25, 50])
def test_human_only_mean_interval_holds(pop, n):
    c = coverage(mean_interval, pop, n, draws=DRAWS, seed=n)
    assert c["coverage"] >= 0.925, c
    assert c["zero_width"] == 0, c


def test_the_normal_interval_does_not():
    "The test can fail: the textbook z interval misses badly on the same draws."
    from statistics import NormalDist

    from irbook.stats import Interval

    z = NormalDist().inv_cdf(0.975)

    def normal(x):
        h = z * x.std() / len(x) ** 0.5
        return Interval(x.mean(), x.mean() - h, x.mean() + h, len(x))

    assert coverage(normal, "binary", 10, draws=DRAWS)["coverage"] < 0.9
    assert coverage(normal, "graded", 10, draws=DRAWS)["coverage"] < 0.925


def textbook(method: str):
    "api/stats' textbook intervals: normal (z), percentile bootstrap, Student's t."
    from statistics import NormalDist

    from irbook.stats import Interval, bootstrap_ci

    z = NormalDist().inv_cdf(0.975)

    def normal(x):
        h = z * x.std() / len(x) ** 0.5
        return Interval(x.mean(), x.mean() - h, x.mean() + h, len(x))

    return {
        "z": normal,
        "bootstrap": lambda x: bootstrap_ci(x, B=500),
        "t": lambda x: mean_interval(x, bounds=None),
    }[method]


@pytest.mark.parametrize("method", ["z", "bootstrap", "t"])
def test_textbook_intervals_miss_a_rare_failure(method):
    """api/stats' coverage table (the book runs it; make test runs this): with 95% of
    questions at 1, z, the bootstrap and even t cover below 0.93 at every n from 5 to
    50, and far below at small n; the score interval holds there
    (test_human_only_mean_interval_holds). The table's draws and seeds."""
    draws = 300 if method == "bootstrap" else 2000
    c = [
        coverage(textbook(method), "rare", n, draws=draws)["coverage"]
        for n in (5, 10, 25, 50)
    ]
    assert max(c) < 0.93 and min(c) < 0.85, c


@pytest.mark.parametrize("n", [5, 10, 25, 50])
def test_the_score_interval_costs_no_width_on_graded_values(n):
    "Where t holds (graded, nDCG-like values) the score interval is no wider than t's."
    score = coverage(mean_interval, "graded", n, draws=DRAWS, seed=n)
    t = coverage(textbook("t"), "graded", n, draws=DRAWS, seed=n)
    assert score["width"] <= 1.02 * t["width"], (score, t)


@pytest.mark.parametrize("n", [3, 10, 25])
def test_paired_difference_interval_holds(n):
    "Two correlated systems on the graded population; and two binary ones."
    g = np.random.default_rng(n)
    draw, _ = POPULATIONS["graded"]
    big = draw(g, 400_000)
    shift = lambda a: np.clip(a + g.normal(0.05, 0.2, a.shape), 0, 1)  # noqa: E731
    truth = float((shift(big) - big).mean())
    hit = 0
    for _ in range(DRAWS):
        a = draw(g, n)
        iv = diff_interval(shift(a), a)
        hit += iv.low <= truth <= iv.high
        assert iv.width > 0
    assert hit / DRAWS >= 0.925


def test_no_spread_is_not_certainty():
    "Two questions, b lower by 1 on both: not p < 0.001 (the CLI's old verdict)."
    d = diff_interval([0.0, 0.0], [1.0, 1.0])
    assert d.p > 0.05 and d.width > 0.5
    iv = ppi_paired([0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 1], [0] * 50, [1] * 50)
    assert iv.width > 0 and iv.p > 1e-3, iv
    assert mean_interval([1.0] * 5).low < 0.9


# --- the larger study: bench/small_n.py, recorded in bench/results/small_n.json -------
RECORD = Path(__file__).resolve().parents[1] / "bench" / "results" / "small_n.json"


def _lowest(rows, method, n_from):
    return min(
        r["coverage"] for r in rows if r["method"] == method and r["n"] >= n_from
    )


def _check_study(rec):
    """The claims the record supports: irbook's intervals hold, the textbook ones do
    not; classic PPI falls short with a useless judge on a rare metric (its note)."""
    m, j = rec["means"], rec["judged"]
    mc = 3 * np.sqrt(0.05 * 0.95 / rec["settings"]["draws"])  # three Monte Carlo sds
    assert _lowest(m, "irbook mean_interval", 3) >= 0.95 - mc - 0.01
    assert _lowest(m, "z", 3) < 0.8 and _lowest(m, "bootstrap", 3) < 0.8
    for method in ("irbook human", "irbook ppi++"):
        assert _lowest(j, method, 25) >= 0.935 - mc, method
        assert _lowest(j, method, 10) >= 0.91 - mc, method
    assert _lowest(j, "ppi-python PPI++", 10) < 0.8  # the textbook PPI++ at small n
    assert _lowest(j, "irbook ppi", 10) < 0.9  # why classic PPI carries a note
    assert all(r["zero_width"] == 0 for r in m + j if r["method"].startswith("irbook"))


def test_the_recorded_study_supports_its_claims():
    _check_study(json.loads(RECORD.read_text()))


@pytest.mark.slow
def test_the_study_reproduces(tmp_path):
    "bench/small_n.py itself, at 400 draws a cell (a few minutes)."
    bench = RECORD.parents[1] / "small_n.py"
    subprocess.run(
        [sys.executable, str(bench), "--draws", "400", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    _check_study(json.loads((tmp_path / "small_n.json").read_text()))


def _two_systems(pop, g, size):
    "Per-question values of systems a and b on the same questions, b a noisy a."
    draw, _ = POPULATIONS[pop]
    a = draw(g, size)
    if pop == "binary":  # b differs from a on 15% of the questions
        b = np.where(g.random(size) < 0.15, (g.random(size) < 0.6) * 1.0, a)
    else:
        b = np.clip(a + g.normal(0.05, 0.2, size), 0, 1)
    return a, b


@pytest.mark.parametrize("pop", ["graded", "binary"])
@pytest.mark.parametrize("kind", ["good", "useless", "biased"])
@pytest.mark.parametrize("method", ["human", "ppi++"])
def test_paired_difference_with_a_judge_holds(pop, kind, method):
    "ppi_paired at n = 25 of 2,000 questions: 600 draws, Monte Carlo sd about 0.009."
    big_a, big_b = _two_systems(pop, np.random.default_rng(99), 400_000)
    truth, g, hit = float((big_a - big_b).mean()), np.random.default_rng(1), 0
    for _ in range(600):
        a, b = _two_systems(pop, g, 2000)
        fa, fb = judge_values(a, kind, g), judge_values(b, kind, g)
        lab = np.zeros(2000, bool)
        lab[g.choice(2000, 25, replace=False)] = True
        iv = ppi_paired(a[lab], b[lab], fa[lab], fb[lab], fa[~lab], fb[~lab],
                        method=method)  # fmt: skip
        hit += iv.low <= truth <= iv.high
        assert iv.width > 0
    assert hit / 600 >= 0.91, (pop, kind, method, hit / 600)
