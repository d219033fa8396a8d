"""Compile ranx's numba functions once, into this environment's numba cache.

ranx jit-compiles its metrics, fusion methods, normalisations and tests with numba
(`cache=True`) the first time each is called, once per doc-id width: in a fresh
environment every new process (each test worker, each notebook kernel) pays tens of
seconds until the cache holds them. `make install` runs this script once, so tests and
chapters start warm, as pip compiles bytecode at install time. It calls what irbook, its
tests and its chapters call.
"""

import tempfile
import time
import warnings
from pathlib import Path

t0 = time.perf_counter()
import numpy as np  # noqa: E402
import ranx  # noqa: E402
from ranx.statistical_tests import fisher_randomization_test  # noqa: E402

from irbook.course.search.fusion import fuse, tune_fusion  # noqa: E402
from irbook.metrics import METRICS, evaluate, ranx_order  # noqa: E402

# irbook's fusion codes doc ids to one width (12); the tests' generated ids have three
# characters, as these do
qrels = {"q1": {"d01": 2, "d02": 1, "d09": 0}, "q2": {"d03": 1}, "q3": {"d04": 3}}
runs = [
    {
        "q1": {"d01": 0.9, "d02": 0.5, "d07": 0.3},
        "q2": {"d03": 0.2, "d08": 0.8},
        "q3": {"d04": 0.1},
    },
    {
        "q1": {"d02": 1.0, "d07": 0.4},
        "q2": {"d08": 0.3, "d03": 0.1},
        "q3": {"d05": 0.7},
    },
    {
        "q1": {"d01": 0.2, "d09": 0.9},
        "q2": {"d03": 0.5},
        "q3": {"d04": 0.6, "d05": 0.1},
    },
]
base = ["rbp.8" if m == "rbp" else m for m in METRICS]
names = base + [f"{m}@2" for m in base if m not in ("r-precision", "rbp.8")]
names += ["ndcg@2-l2", "map-l2"]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    Q, R = ranx.Qrels(qrels), ranx.Run(runs[0], name="a")
    ranx.evaluate(Q, R, names, return_mean=False)
    ranx.evaluate(Q, ranx.Run(runs[1]), names, make_comparable=True)
    evaluate(qrels, runs[0], names, per_query=True)
    ranx_order([0.3, 0.3, 0.1])
    ranx_order([1, 1, 0], source="Qrels")
    for method in ("rrf", "sum", "mnz"):
        for norm in (None, "min-max"):
            fuse(runs, method=method, norm=norm, k=None)
    fuse(runs, method="wsum", norm="min-max", params={"weights": [0.2, 0.3, 0.5]})
    for method, norm in (("rrf", None), ("sum", None), ("mnz", "min-max")):
        ranx.fuse([ranx.Run(r) for r in runs], method=method, norm=norm)
    ranx.fuse([ranx.Run(r) for r in runs], method="wsum", params={"weights": [1] * 3})
    tune_fusion(runs, qrels, list(qrels), method="wsum", step=0.5)
    tune_fusion(runs, qrels, list(qrels), method="rrf")
    Rs = [ranx.Run(r, name=n) for r, n in zip(runs, "abc")]
    for r in Rs:
        ranx.evaluate(Q, r, names, make_comparable=True)
    for test in ("fisher", "student", "tukey"):
        ranx.compare(
            Q, Rs, metrics=["ndcg@2", "mrr"], stat_test=test, n_permutations=10
        )

    # Qrels and Run from dicts are compiled once per doc-id width too, and so are the
    # normalisations: ids of one character (chapter 1's toy dicts), two (the quick
    # start's d1..d9), seven (JQaRA's fusions in chapter 18), eight (reference pages)
    def toy(width: int) -> tuple:
        "Qrels and two runs as dicts, with doc ids `width` characters wide."
        d = [f"{i:0{width}}" for i in range(1, 5)]
        q = {"q1": {d[0]: 1, d[1]: 0}, "q2": {d[2]: 2}}
        return q, [
            {"q1": {d[0]: 0.5, d[3]: 0.2}, "q2": {d[2]: 0.9}},
            {"q1": {d[1]: 0.7}, "q2": {d[2]: 0.3, d[3]: 0.1}},
        ]

    for width in (1, 2, 8):
        q, rs = toy(width)
        ranx.evaluate(ranx.Qrels(q), ranx.Run(rs[0]), "precision@1")
    q, rs = toy(1)
    ranx.evaluate(q, rs[0], "precision@1")  # plain dicts: a path of their own
    for width, norm in ((1, "min-max"), (7, "min-max"), (7, "zmuv")):
        ranx.fuse([ranx.Run(r) for r in toy(width)[1]], method="sum", norm=norm)
    ranx.fuse([ranx.Run(r) for r in toy(8)[1]], method="rrf", norm=None)
    # chapter 5 calls the permutation test itself, on pandas' read-only arrays
    frozen = np.array([0.1, 0.5, 0.3])
    frozen.flags.writeable = False
    fisher_randomization_test(frozen, frozen, 10, 0.05, 0)
    # files read by ranx (Qrels/Run.from_file, as the JQaRA loaders do) key docs by
    # fixed-width strings: one more compilation per width. JQaRA's ids have 7 digits;
    # compiled here, two test workers never compile (and cache) the same one at once
    with tempfile.TemporaryDirectory() as tmp:
        qp, rp, lz = (Path(tmp) / n for n in ("q.trec", "r.trec", "r.lz4"))
        qp.write_text("q1 0 1206502 1\nq1 0 1206503 0\nq2 0 3780994 1\n")
        rp.write_text(
            "q1 Q0 1206503 1 2.5 t\nq1 Q0 1206502 2 1.5 t\nq2 Q0 3780994 1 0.5 t\n"
        )
        Qf, Rf = ranx.Qrels.from_file(str(qp), kind="trec"), ranx.Run.from_file(str(rp))
        Rf.save(str(lz), kind="lz4")
        for r in (Rf, ranx.Run.from_file(str(lz), kind="lz4")):
            ranx.evaluate(Qf, r, names, return_mean=False)
            ranx.evaluate(Qf, r, names, make_comparable=True)
            evaluate(Qf, r, names, per_query=True)
print(f"ranx compiled into the numba cache in {time.perf_counter() - t0:.0f} s")
