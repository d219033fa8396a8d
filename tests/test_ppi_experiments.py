"""bench/ppi_experiments.py: the batch intervals equal irbook.ppi's; on a simulated
population where the truth is known, coverage is near 1 - alpha, a good judge narrows
the interval, a useless one costs PPI++ (almost) nothing and classic PPI a lot, an
uncorrected judge misses; the judge's threshold is the best-F1 one; the record has its
fields."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from irbook.ppi import human_interval, judge_intervals

_spec = importlib.util.spec_from_file_location(
    "ppi_experiments", Path(__file__).parents[1] / "bench" / "ppi_experiments.py"
)
pe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pe)


def population(Q=2000, seed=0):
    "Two systems' human values, a good biased judge's and a useless judge's (T = 1)."
    rng = np.random.default_rng(seed)
    a = rng.beta(2, 3, Q)
    b = np.clip(a - 0.05 + rng.normal(0, 0.15, Q), 0, 1)
    Y = np.stack([a, b], 1)
    good = np.clip(Y + 0.1 + rng.normal(0, 0.08, Y.shape), 0, 1)
    useless = rng.beta(2, 3, Y.shape)
    counts = np.zeros((3, 1, Q))
    return Y, good[None], useless[None], counts


@pytest.mark.parametrize("seed", range(4))
def test_batch_intervals_equal_irbook_ppi(seed):
    rng = np.random.default_rng(seed)
    Q, U, D = 300, 3, 5
    y = rng.beta(2, 3, (Q, U))
    f = np.clip(y[None] * rng.uniform(-1, 1) + rng.normal(0, 0.2, (D, Q, U)), 0, 1)
    lab = np.zeros((D, Q), bool)
    for i in range(D):
        lab[i, rng.choice(Q, rng.integers(3, 200), replace=False)] = True
    ivs = pe.batch_intervals(y, f, lab)
    for d in range(D):
        for j in range(U):
            ref = judge_intervals(y[lab[d], j], f[d, lab[d], j], f[d, ~lab[d], j])
            ref["judge only"] = human_interval(f[d, :, j])
            for k, iv in ref.items():
                got = [v[d, j] for v in ivs[k]][:3]
                np.testing.assert_allclose(
                    got, [iv.estimate, iv.low, iv.high], rtol=1e-9, atol=1e-12
                )
                if k != "judge only":
                    np.testing.assert_allclose(ivs[k][3][d, j], iv.lam, atol=1e-12)
    # and the script's own check raises when they differ
    bad = {k: tuple(v.copy() for v in t) for k, t in ivs.items()}
    bad["ppi++"][1][0, 0] -= 0.01
    with pytest.raises(AssertionError, match="ppi\\+\\+"):
        pe.check_against_irbook(y, f[0], lab[0], bad)


@pytest.fixture(scope="module")
def simulated():
    Y, good, useless, counts = population()
    systems, pairs = ["A", "B"], [("A", "B")]
    out = {}
    for name, F in (("good", good), ("useless", useless)):
        out[name] = pe.run_draws(
            {"m": Y}, {"m": F}, counts, systems, pairs, [50, 200], 400, seed=1
        )
    return out


def test_coverage_near_nominal(simulated):
    # 400 draws: Monte Carlo sd of a 95% coverage is 0.011. Sampling without
    # replacement from N = 2000 questions makes the intervals conservative: PPI's
    # judge-only term counts the judge's sampling noise, which a finite set of
    # questions does not have, so it may over-cover; none may under-cover.
    for judge, res in simulated.items():
        for n, byn in res["by n"].items():
            for unit, r in byn["m"].items():
                for k in ("human", "ppi", "ppi++"):
                    c = r[k]["coverage"]
                    assert c >= 0.91, (judge, n, unit, k, c)
                    assert c <= (0.99 if k == "human" else 1.0), (judge, n, unit, k)


def test_good_judge_narrows_useless_judge_costs_ppi_only(simulated):
    for n, r in simulated["good"]["by n"].items():
        for unit, x in r["m"].items():
            assert x["ppi++"]["mean width"] < 0.8 * x["human"]["mean width"], (n, unit)
            if " - " not in unit:  # biased by +0.1 (which cancels in a difference)
                assert x["judge only"]["coverage"] < 0.5
            assert x["ppi++"]["mean lambda"] > 0.5
    for n, r in simulated["useless"]["by n"].items():
        for unit, x in r["m"].items():
            ratio = x["ppi++"]["mean width"] / x["human"]["mean width"]
            assert ratio < 1.05, (n, unit, ratio)
            assert x["ppi"]["mean width"] > 1.2 * x["human"]["mean width"]
            assert x["ppi++"]["mean lambda"] < 0.15


def test_order_recovered_more_often_with_a_good_judge(simulated):
    g = simulated["good"]["by n"][50]["m"]["A - B"]
    assert g["ppi++"]["separated, right order"] >= g["human"]["separated, right order"]
    assert g["ppi++"]["separated, wrong order"] < 0.02


def test_order_for_a_negative_difference():
    # B - A is negative: a separated interval lies below 0 and is the right order
    Y, good, _, counts = population(Q=1000, seed=2)
    res = pe.run_draws(
        {"m": Y}, {"m": good}, counts, ["A", "B"], [("B", "A")], [200], 200, seed=0
    )
    r = res["by n"][200]["m"]["B - A"]
    assert res["truth"]["m"]["B - A"] < 0
    assert r["human"]["separated, right order"] > 0.5
    assert r["human"]["separated, wrong order"] < 0.02


def test_calibrated_threshold_best_f1():
    # 3 thresholds x 4 questions: threshold 1 agrees best on questions 0 and 1,
    # threshold 2 on questions 2 and 3
    tp = np.array([[1, 1, 1, 1], [3, 3, 0, 0], [0, 0, 3, 3]], float)
    fp = np.array([[5, 5, 5, 5], [0, 0, 5, 5], [5, 5, 0, 0]], float)
    fn = np.array([[2, 2, 2, 2], [0, 0, 3, 3], [3, 3, 0, 0]], float)
    counts = np.stack([tp, fp, fn])
    assert pe.calibrated_threshold(counts, np.array([True, True, False, False])) == 1
    assert pe.calibrated_threshold(counts, np.array([False, False, True, True])) == 2


@pytest.mark.parametrize("seed", range(3))
def test_threshold_rule_is_irbook_judges(seed):
    # the vectorized rule picks the threshold irbook.course.judges.threshold_judge picks
    rng = np.random.default_rng(seed)
    human = rng.random((60, 30)) < 0.15
    score = human * rng.normal(1, 1, human.shape) + rng.normal(0, 1, human.shape)
    score[rng.random(human.shape) < 0.05] = -np.inf  # a few candidates unscored
    human &= np.isfinite(score)
    grid = np.unique(np.quantile(score[np.isfinite(score)], np.linspace(0.3, 0.99, 40)))
    counts = pe.label_counts(score, human, grid)
    check = pe.threshold_check(score, human, grid)
    for _ in range(5):
        lab = np.zeros(60, bool)
        lab[rng.choice(60, rng.integers(5, 40), replace=False)] = True
        check(lab, pe.calibrated_threshold(counts, lab))  # raises if they differ
    with pytest.raises(AssertionError, match="irbook.course.judges"):
        t = pe.calibrated_threshold(counts, lab)
        check(lab, t + 1 if t + 1 < len(grid) else t - 1)


def test_metrics_by_hand():
    labels = np.array([[0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]], bool)
    top = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]])
    v = pe.ndcg_mrr(labels, top)
    ideal = 1 + 1 / np.log2(3) + 1 / np.log2(4)
    assert v["mrr@10"][0] == 0.5
    np.testing.assert_allclose(
        v["ndcg@10"][0], (1 / np.log2(3) + 1 / np.log2(5)) / ideal
    )
    # answer parts: part 0 found at rank 2, part 1 at rank 4, part 2 absent (padding)
    parts = np.array([[True, True, False]])
    lab3 = np.zeros((1, 3, 12), bool)
    lab3[0, 0, 1] = lab3[0, 1, 3] = True
    m = pe.modified(lab3, parts, top)
    assert m["modified_mrr"][0] == 0.25 and m["modified_recall"][0] == 1.0
    lab3[0, 1, 3] = False  # part 1 now missed: MRR 0, recall 1/2
    m = pe.modified(lab3, parts, top)
    assert m["modified_mrr"][0] == 0 and m["modified_recall"][0] == 0.5


def test_record_fields():
    Y, good, _, counts = population(Q=300)
    inputs = {
        "Y": {"m": Y},
        "judges": {
            "good": {
                "F": {"m": good},
                "counts": counts,
                "run": "sim",
                "grid": np.array([0.5]),
            }
        },
        "data": {"questions": 300},
    }
    cfg = {
        "systems": ["A", "B"],
        "pairs": [("A", "B")],
        "judges": {"good": "sim"},
        "metrics": ["m"],
        "ns": [25, 50, 400],
    }
    rec = pe.experiment("sim", cfg, inputs, draws=50, seed=3)
    s = rec["settings"]
    assert s["draws"] == 50 and s["seed"] == 3 and s["ns"] == [25, 50]  # 400 > N
    assert "without replacement" in s["sampling"]
    assert rec["meta"]["seconds"] > 0 and "finished" in rec["meta"]
    r = rec["judges"]["good"]["by n"]["25"]["m"]["A - B"]
    for k in pe.METHODS:
        assert {"coverage", "mean width", "bias", "mean lambda"} <= set(r[k])
    assert "separated, right order" in r["ppi++"]
    w = rec["worth"]["good"]["m"]["A"]["50"]
    ratio = rec["judges"]["good"]["by n"]["50"]["m"]["A"]["width ratio ppi++/human"]
    np.testing.assert_allclose(w, 50 / ratio**2)
    assert w > 50  # a good judge is worth more than the questions humans judged
