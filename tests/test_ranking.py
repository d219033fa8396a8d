"""irbook.ranking: simultaneous pairwise intervals and rank ranges, measured.

Coverage is measured on a population of graded scores (quarter steps in [0, 1], about
28% zeros) that the module's own `toy_scores` does not draw, so the tests do not share
the notebook's population. With 300 draws a coverage of 0.95 is measured to within
about +-0.025 (two standard errors), so the targets (0.935 from 25 questions, 0.91 at
10) are asserted less 0.02: 0.915 and 0.89."""

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from irbook.ranking import (
    pairwise_intervals,
    plot_ranks,
    rank_intervals,
    rank_report,
    simulate_coverage,
    toy_scores,
)

NAMES = ("a", "b", "c", "d")
EFFECTS = np.array([0.0, 0.04, 0.08, 0.16])
DRAWS = 300
TARGET = {10: 0.91 - 0.02, 25: 0.935 - 0.02}


def graded(rng, n, effects=EFFECTS):
    "n questions x len(effects) systems of graded scores: 0, 0.25, ..., 1."
    u = rng.uniform(-0.3, 1.0, (n, 1))  # the question's difficulty, shared
    x = u + effects + rng.normal(0, 0.2, (n, len(effects)))
    return pd.DataFrame(np.clip(np.round(x * 4) / 4, 0, 1), columns=NAMES)


@lru_cache
def true_means() -> pd.Series:
    return graded(np.random.default_rng(99), 2_000_000).mean()


def covered(p: pd.DataFrame, mu: pd.Series) -> np.ndarray:
    "Which of the pairs' intervals hold the true difference."
    truth = mu[p["a"]].to_numpy() - mu[p["b"]].to_numpy()
    return ((p["low"] <= truth) & (truth <= p["high"])).to_numpy()


@lru_cache
def coverage(n: int) -> dict:
    "{method: (share of draws with all pairs covered, share of pairs covered)}."
    rng, mu = np.random.default_rng(n), true_means()
    tables = [graded(rng, n) for _ in range(DRAWS)]
    out = {}
    for method in ("max-t", "bonferroni", "unadjusted"):
        ok = [
            covered(pairwise_intervals(t, method=method, B=1000, seed=i), mu)
            for i, t in enumerate(tables)
        ]
        out[method] = (np.mean([o.all() for o in ok]), np.mean(ok))
    return out


def test_the_population_is_a_hard_one():
    x = graded(np.random.default_rng(1), 100_000)
    assert 0.2 < (x == 0).mean().mean() < 0.35 and (x == 1).mean().mean() > 0.05
    assert list(true_means().sort_values().index) == list(NAMES)


@pytest.mark.parametrize("n", [25, 10])
@pytest.mark.parametrize("method", ["max-t", "bonferroni"])
def test_simultaneous_coverage_meets_the_target(n, method):
    assert coverage(n)[method][0] >= TARGET[n], coverage(n)


@pytest.mark.parametrize("n", [25, 10])
def test_ignoring_multiplicity_covers_all_pairs_clearly_less_often(n):
    c = coverage(n)
    all_pairs, per_pair = c["unadjusted"]
    assert abs(per_pair - 0.95) < 0.025, c  # each pair alone holds its 95%...
    assert all_pairs < 0.88, c  # ...but not all six at once
    assert all_pairs < c["max-t"][0] - 0.07 and all_pairs < c["bonferroni"][0] - 0.07


def test_simulate_coverage_bears_out_the_pages_table():
    """api/ranking's coverage table, `simulate_coverage` on the page's own four toy
    systems (the book runs it with 1,000 draws; here 200, two standard errors about
    +-0.03 on a coverage): what the page says of it."""
    c = simulate_coverage(ns=(10, 25, 50), draws=200).set_index(["n", "method"])
    for n in (10, 25, 50):
        for m in ("max-t", "bonferroni"):
            assert c.loc[(n, m), "all_pairs"] >= TARGET[min(n, 25)], c
            # a rank range misses less often than the intervals it comes from
            assert c.loc[(n, m), "ranks"] >= max(0.985, c.loc[(n, m), "all_pairs"]), c
        # max-t is never wider than Bonferroni, and at most a few percent narrower
        r = c.loc[(n, "max-t"), "width"] / c.loc[(n, "bonferroni"), "width"]
        assert 0.9 < r <= 1 + 1e-9, (n, r)
        assert abs(c.loc[(n, "unadjusted"), "per_pair"] - 0.95) < 0.025, c
        assert 0.7 < c.loc[(n, "unadjusted"), "all_pairs"] < 0.88, c
    cr = c["critical"].unstack()
    # the cap binds at 10 questions; at 50 the bootstrap's c is below Bonferroni's
    assert cr.loc[10, "max-t"] > 0.99 * cr.loc[10, "bonferroni"], cr
    assert cr.loc[50, "max-t"] < cr.loc[50, "bonferroni"], cr


@pytest.mark.parametrize("method", ["max-t", "bonferroni"])
def test_identical_systems_are_rarely_separable(method):
    rng = np.random.default_rng(5)
    same = np.zeros(4)  # four different systems of the same quality
    tables = [graded(rng, 25, same) for _ in range(DRAWS)]
    hits = [
        pairwise_intervals(t, method=method, B=1000, seed=i)["separable"].any()
        for i, t in enumerate(tables)
    ]
    assert np.mean(hits) <= 0.05 + 0.025, np.mean(hits)


def test_unadjusted_separates_identical_systems_too_often():
    rng = np.random.default_rng(5)
    same = np.zeros(4)
    tables = [graded(rng, 25, same) for _ in range(DRAWS)]
    hits = [
        pairwise_intervals(t, method="unadjusted")["separable"].any() for t in tables
    ]
    assert np.mean(hits) > 0.12, np.mean(hits)


def test_true_ranks_lie_in_their_ranges():
    rng, mu = np.random.default_rng(8), true_means()
    true_rank = mu.rank(ascending=False).astype(int)
    held = []
    for i in range(DRAWS):
        r = rank_intervals(graded(rng, 25), B=1000, seed=i)
        t = true_rank[r.index]
        held.append(((r["best"] <= t) & (t <= r["worst"])).all())
    assert np.mean(held) >= TARGET[25], np.mean(held)


@pytest.mark.parametrize("method", ["max-t", "bonferroni", "unadjusted"])
def test_pairs_with_no_spread_get_a_positive_width(method):
    n = 12
    table = {"a": [0.5] * n, "b": [0.4] * n, "c": [0.4] * n, "d": [1.0] * n}
    p = pairwise_intervals(table, method=method)
    width = p["high"] - p["low"]
    assert (width > 0.05).all(), p
    # the floor: one of n equal differences moved to the far bound, s = delta/sqrt(n)
    pair = p.set_index(["a", "b"])
    se = (0.1 + 1) / np.sqrt(n) / np.sqrt(n)  # diff 0.1: the far end, -1, is 1.1 away
    half = p.attrs["critical"] * se
    assert pair.loc[("a", "b"), "high"] - 0.1 == pytest.approx(half)
    assert not pair.loc[("b", "c"), "separable"]  # equal systems: width, no verdict


def test_critical_values():
    x = graded(np.random.default_rng(3), 25)
    bonf = pairwise_intervals(x, method="bonferroni").attrs["critical"]
    assert bonf == pytest.approx(stats.t.ppf(1 - 0.05 / 6 / 2, 24))
    one = pairwise_intervals(x, method="unadjusted").attrs["critical"]
    assert one == pytest.approx(stats.t.ppf(0.975, 24))
    for seed in range(5):
        c = pairwise_intervals(x, seed=seed).attrs["critical"]
        assert one <= c <= bonf
    # with 400 questions the bootstrap's max-t is below Bonferroni's bound
    big = graded(np.random.default_rng(4), 400)
    p = pairwise_intervals(big)
    assert (
        p.attrs["critical"]
        < pairwise_intervals(big, method="bonferroni").attrs["critical"]
    )


def test_ranks_are_consistent():
    rng = np.random.default_rng(11)
    for i in range(50):
        x = graded(rng, 15)
        r = rank_intervals(x, B=500, seed=i)
        assert (r["best"] <= r["rank"]).all() and (r["rank"] <= r["worst"]).all()
        assert (r["best"] >= 1).all() and (r["worst"] <= 4).all()
        assert list(r["mean"]) == sorted(r["mean"], reverse=True)
        # the ranges are read off the pairs: rows are better system first
        p = pairwise_intervals(x, B=500, seed=i)
        sep = p[p["separable"]]
        for s in NAMES:
            assert r.loc[s, "best"] == 1 + (sep["b"] == s).sum()
            assert r.loc[s, "worst"] == 4 - (sep["a"] == s).sum()


def test_a_system_clearly_ahead_holds_rank_one_alone():
    x = graded(np.random.default_rng(12), 200, np.array([0.0, 0.02, 0.04, 0.5]))
    r = rank_intervals(x)
    assert r.index[0] == "d"
    assert r.loc["d", ["rank", "best", "worst"]].tolist() == [1, 1, 1]
    assert r.loc[["a", "b", "c"], "best"].min() == 2


def test_report_and_plot():
    r = rank_intervals(toy_scores(30))
    text = rank_report(r).splitlines()
    assert len(text) == 5 and "all at once" in text[0]
    for line, (s, row) in zip(text[1:], r.iterrows()):
        b, w = int(row["best"]), int(row["worst"])
        assert line.startswith(s)
        assert line.endswith(f"rank {b}" if b == w else f"ranks {b}-{w}")
    fig = plot_ranks(r)
    assert tuple(fig.get_size_inches()) == (
        7,
        3,
    )  # the article column: 7 in at most (tests/test_site.py)
    ax = fig.axes[0]
    assert all(t.get_fontsize() >= 11 for t in ax.get_yticklabels())
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_small_n_is_noted():
    assert "measured from 10" in pairwise_intervals(toy_scores(6)).attrs["note"]
    assert pairwise_intervals(toy_scores(10)).attrs["note"] is None
    assert "note:" in rank_report(rank_intervals(toy_scores(6)))


@pytest.mark.parametrize(
    "table, kw, match",
    [
        ({"a": [0.1, 0.2], "b": [0.3, 0.4]}, {}, "at least 3 questions"),
        ({"a": [0.1, 0.2, 0.3]}, {}, "at least 2 systems"),
        ({"a": [0.1, 0.2, 0.3], "b": [0.1, 0.2]}, {}, "same length"),
        ({"a": [0.1, np.nan, 0.3], "b": [0.1, 0.2, 0.3]}, {}, "missing"),
        ({"a": [0.1, 0.2, 0.3], "b": [3, 2, 1]}, {}, "exceed bounds"),
        ({"a": [0.1, 0.2, 0.3], "b": [0.3, 0.2, 0.1]}, {"alpha": 0}, "alpha"),
        ({"a": [0.1, 0.2, 0.3], "b": [0.3, 0.2, 0.1]}, {"method": "x"}, "method"),
        ({"a": [0.1, 0.2, 0.3], "b": [0.3, 0.2, 0.1]}, {"B": 10}, "B >= 100"),
        ({"a": [0.1, 0.2, 0.3], "b": [0.3, 0.2, 0.1]}, {"method": "ppi"}, "judge"),
    ],
)
def test_bad_input_is_refused_in_one_line(table, kw, match):
    with pytest.raises(ValueError, match=match) as e:
        pairwise_intervals(table, **kw)
    assert "\n" not in str(e.value)


def test_judge_assisted_pairs_hold_and_are_narrower():
    "PPI++ over all pairs (Bonferroni) on 50 human-judged of 500 questions."
    mu = toy_scores(2_000_000, seed=77).mean()
    rng, ok, ratio = np.random.default_rng(50), [], []
    for _ in range(200):
        everything = toy_scores(500, seed=rng)
        noise = rng.normal(0.05, 0.1, everything.shape)
        judge = (everything + noise).clip(0, 1)
        humans = everything.iloc[rng.choice(500, 50, replace=False)]
        p = pairwise_intervals(humans, method="ppi", judge=judge)
        h = pairwise_intervals(humans, method="bonferroni")
        ok.append(covered(p, mu).all())
        ratio.append((p["high"] - p["low"]).mean() / (h["high"] - h["low"]).mean())
    assert p.attrs["note"] is None  # measured here, at 50 human-judged questions
    assert np.mean(ok) >= 0.935 - 0.035, np.mean(ok)  # 200 draws: +-0.03
    assert np.mean(ratio) < 0.9, np.mean(ratio)
