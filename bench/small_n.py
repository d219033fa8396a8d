"""Coverage at the n practitioners have (issue 34): every interval of irbook's
statistics layer against the textbook ones, on populations whose mean is known.

- Human-only means: `irbook.stats.mean_interval` (Student t; the score interval on a
  bounded metric) beside the normal (z) interval, Student's plain t and the percentile
  bootstrap, on `irbook.stats.POPULATIONS` at n = 3 to 100.
- Judge-assisted means: irbook's human-only, classic PPI and PPI++ intervals
  (`irbook.ppi.judge_coverage`) beside ppi-python's PPI++ (`ppi_mean_ci`: the normal
  quantile, lambda fitted on the same questions), with the four simulated judges of
  `irbook.ppi.JUDGES`, n = 10 to 100 human-judged of 2,000 questions.

Recorded per cell: coverage, mean width, and the share of zero-width intervals.

    python bench/small_n.py [--draws 2000] [--out bench/results]

About three minutes on two cores at 2,000 draws a cell.
"""

import argparse
import json
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path
from statistics import NormalDist

import numpy as np

from irbook.ppi import JUDGES, judge_coverage, judge_values
from irbook.stats import POPULATIONS, Interval, bootstrap_ci, coverage, mean_interval

MEAN_NS = (3, 5, 10, 25, 50, 100)
JUDGE_NS = (10, 25, 50, 100)
Z = NormalDist().inv_cdf(0.975)


def normal(x):
    "The textbook interval: the normal quantile, the variance over n."
    h = Z * x.std() / len(x) ** 0.5
    return Interval(x.mean(), x.mean() - h, x.mean() + h, len(x))


MEAN_METHODS = {
    "z": normal,
    "t": lambda x: mean_interval(x, bounds=None),
    "bootstrap": lambda x: bootstrap_ci(x, B=500),
    "irbook mean_interval": mean_interval,
}


def textbook_ppi(population, judge, n, draws, N=2000, seed=0) -> dict:
    "ppi-python's PPI++ on the draws `judge_coverage` makes (the same seed and order)."
    from ppi_py import ppi_mean_ci

    draw, truth = POPULATIONS[population]
    g, hit, width = np.random.default_rng(seed), 0, 0.0
    for _ in range(draws):
        y = draw(g, N)
        f = judge_values(y, judge, g)
        lab = np.zeros(N, bool)
        lab[g.choice(N, n, replace=False)] = True
        lo, hi = (float(v[0]) for v in ppi_mean_ci(y[lab], f[lab], f[~lab]))
        hit += bool(lo <= truth <= hi)
        width += hi - lo
    return dict(coverage=hit / draws, width=width / draws)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = ap.parse_args(argv)
    t0, means, judged = time.perf_counter(), [], []
    for pop in POPULATIONS:
        for n in MEAN_NS:
            for name, f in MEAN_METHODS.items():
                d = a.draws // 4 if name == "bootstrap" else a.draws
                means.append(dict(coverage(f, pop, n, d, seed=n), method=name, draws=d))
    for pop in POPULATIONS:
        for judge in JUDGES:
            for n in JUDGE_NS:
                for m in ("human", "ppi", "ppi++"):
                    r = judge_coverage(pop, judge, n, m, draws=a.draws, seed=n)
                    judged.append(dict(r, method=f"irbook {m}", draws=a.draws))
                r = textbook_ppi(pop, judge, n, a.draws, seed=n)
                judged.append(dict(population=pop, judge=judge, n=n, draws=a.draws,
                                   method="ppi-python PPI++", **r))  # fmt: skip
    record = dict(
        what="coverage of 95% intervals at small n (bench/small_n.py)",
        meta=dict(python=sys.version.split()[0], machine=platform.machine(),
                  numpy=version("numpy"), ppi_python=version("ppi-python"),
                  seconds=round(time.perf_counter() - t0, 1)),  # fmt: skip
        settings=dict(draws=a.draws, judges=JUDGES, mean_ns=MEAN_NS, judge_ns=JUDGE_NS,
                      N=2000, populations={p: t for p, (_, t) in POPULATIONS.items()}),
        means=means,
        judged=judged,
    )  # fmt: skip
    out = Path(a.out) / "small_n.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    for rows, key in ((means, ("population", "n")), (judged, ("population", "judge"))):
        lows = {}
        for r in rows:
            lows[r["method"]] = min(lows.get(r["method"], 1), r["coverage"])
        print({k: round(v, 3) for k, v in lows.items()})
    print(f"wrote {out} in {record['meta']['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
