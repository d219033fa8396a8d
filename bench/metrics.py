"""irbook.metrics vs ranx on the 8 offline JQaRA runs, each measured in a FRESH Python
process.

    IRBOOK_DATA=/path/to/data python bench/metrics.py \
        [--repeat N] [--json bench/results/metrics.json]

The committed bench/results/metrics.json is what chapter 2 (nbs/02_set_metrics)
displays.

Two workloads: (A) ndcg@10 + mrr@10, the JQaRA leaderboard metrics; (B) all 14 ranx
metrics. Each process imports its library, reads the qrels and the 8 runs from disk with
its own natural reader (ranx: Qrels.from_file / Run.from_file; irbook: read_qrels /
read_run) and evaluates every run.
  ranx cold  = numba's on-disk cache pointed at an empty directory (NUMBA_CACHE_DIR), so
               everything compiles;
  ranx warm  = a later process reusing that cache (what a user sees from the 2nd run);
  irbook     = no compilation exists; "cold" is the first process, "warm" a later one.
The wall time is the whole process, from spawn to exit (interpreter start-up included).
Every process prints its means; the bench checks that both libraries agree to 1e-9.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = [
    "bm25",
    "multilingual-e5-small",
    "multilingual-e5-large",
    "bge-m3+dense",
    "JaColBERTv2.5",
    "ruri-small",
    "japanese-reranker-cross-encoder-small-v1",
    "random",
]
ALL14 = [
    "hits@10",
    "hit_rate@10",
    "precision@10",
    "recall@10",
    "f1@10",
    "r-precision",
    "bpref",
    "rbp.8",
    "mrr@10",
    "map@100",
    "dcg@10",
    "ndcg@10",
    "dcg_burges@10",
    "ndcg_burges@10",
]
WORKLOADS = {"A: ndcg@10 + mrr@10": ["ndcg@10", "mrr@10"], "B: all 14 metrics": ALL14}

CHILD = r"""
import json, sys, time, warnings
t0 = time.perf_counter()
warnings.filterwarnings("ignore")
lib, qrels_path = sys.argv[1], sys.argv[2]
run_paths, metrics = json.loads(sys.argv[3]), json.loads(sys.argv[4])
if lib == "ranx":
    from ranx import Qrels, Run, evaluate
    t1 = time.perf_counter()
    qrels = Qrels.from_file(qrels_path, kind="trec")
    runs = {n: Run.from_file(p, kind="lz4") for n, p in run_paths.items()}
    t2 = time.perf_counter()
    def scores(r, kw={"save_results_in_run": False}):
        if len(metrics) == 1:  # ranx returns a bare float for one metric
            return {metrics[0]: float(evaluate(qrels, r, metrics[0], **kw))}
        return {m: float(v) for m, v in evaluate(qrels, r, metrics, **kw).items()}
    out = {n: scores(r) for n, r in runs.items()}
else:
    from irbook.metrics import evaluate, read_qrels, read_run
    t1 = time.perf_counter()
    qrels = read_qrels(qrels_path)
    runs = {n: read_run(p) for n, p in run_paths.items()}
    t2 = time.perf_counter()
    out = {n: evaluate(qrels, r, metrics) for n, r in runs.items()}
t3 = time.perf_counter()
times = {"import": t1 - t0, "load": t2 - t1, "evaluate": t3 - t2}
print(json.dumps({**times, "scores": out}))
"""


def run_child(lib, metrics, paths, env):
    t = time.perf_counter()
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            lib,
            str(paths["qrels"]),
            json.dumps(paths["runs"]),
            json.dumps(metrics),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{lib} child failed:\n{p.stderr[-3000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall"] = wall
    return res


def agreement(paths, metrics):
    """Largest per-query |irbook - ranx| over the runs, checked by irbook.stats.vs_ranx
    (the one agreement check of the project: it fails above 1e-9 or on nan, and skips
    bpref where irbook follows trec_eval on purpose)."""
    from irbook.metrics import read_qrels, read_run
    from irbook.stats import departs_from_ranx, vs_ranx

    qrels, worst = read_qrels(paths["qrels"]), 0.0
    checked = [m for m in metrics if not departs_from_ranx(m, qrels)]
    for p in paths["runs"].values():
        both = vs_ranx(qrels, read_run(p), metrics)
        diff = (both["irbook"][checked] - both["ranx"][checked]).abs()
        worst = max(worst, float(diff.max().max()))
    return worst


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="processes per (library, mode); the minimum wall time is kept",
    )
    ap.add_argument("--json", help="write all measurements to this file")
    ap.add_argument(
        "--metrics",
        help="comma-separated metric names: one custom workload instead of A and B",
    )
    args = ap.parse_args()
    import irbook.metrics as M
    from irbook.data import fetch

    paths = {
        "qrels": str(fetch("jqara/qrels.trec")),
        "runs": {n: str(fetch(f"jqara/runs/{n}.lz4")) for n in RUNS},
    }
    workloads = {"custom": args.metrics.split(",")} if args.metrics else WORKLOADS
    missing = sorted(
        {
            m.split("-l")[0].split("@")[0].split(".")[0]
            for ms in workloads.values()
            for m in ms
        }
        - set(M.METRICS)
    )
    if missing:
        sys.exit(
            f"irbook does not register {missing} yet: run the bench once chapters 3-4 "
            "are exported"
        )

    results = {}
    with tempfile.TemporaryDirectory(prefix="irbook-bench-") as tmp:
        base = dict(os.environ, PYTHONWARNINGS="ignore")
        for wname, metrics in workloads.items():
            r = results[wname] = {}
            for rep in range(args.repeat):
                cold_dir = Path(tmp) / f"cold-{len(r)}-{rep}"
                cold_dir.mkdir()
                env_cold = dict(base, NUMBA_CACHE_DIR=str(cold_dir))
                r.setdefault("ranx cold", []).append(
                    run_child("ranx", metrics, paths, env_cold)
                )
                r.setdefault("ranx warm", []).append(
                    run_child("ranx", metrics, paths, env_cold)
                )  # same, now filled, cache
                r.setdefault("irbook cold", []).append(
                    run_child("irbook", metrics, paths, base)
                )
                r.setdefault("irbook warm", []).append(
                    run_child("irbook", metrics, paths, base)
                )
                shutil.rmtree(cold_dir, ignore_errors=True)
            r["max |irbook - ranx|"] = agreement(paths, metrics)

    print(
        f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} "
        f"CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        "8 JQaRA runs x 1,667 queries x 100 candidates; fresh process each; min of "
        f"{args.repeat} process(es)\n"
    )
    for wname, r in results.items():
        best = {
            k: min(v, key=lambda x: x["wall"])
            for k, v in r.items()
            if isinstance(v, list)
        }
        note = (
            ", bpref excluded"
            if any(m.startswith("bpref") for m in WORKLOADS.get(wname, []))
            else ""
        )
        print(f"{wname}   (max |irbook - ranx| = {r['max |irbook - ranx|']:.1e}{note})")
        print(
            f"  {'':12s} {'process':>9s} {'import':>8s} {'load':>8s} {'evaluate':>9s}"
        )
        for k, x in best.items():
            print(
                f"  {k:12s} {x['wall']:8.2f}s {x['import']:7.2f}s {x['load']:7.2f}s "
                f"{x['evaluate']:8.2f}s"
            )
        rc, rw = best["ranx cold"]["wall"], best["ranx warm"]["wall"]
        ic, iw = best["irbook cold"]["wall"], best["irbook warm"]["wall"]
        print(f"  ratio ranx cold / irbook cold = {rc / ic:.1f}x   (target >= 5x)")
        print(f"  ratio ranx warm / irbook warm = {rw / iw:.1f}x   (target >= 1x)\n")
        r["summary"] = {
            k: {kk: vv for kk, vv in x.items() if kk != "scores"}
            for k, x in best.items()
        }
        r["summary"]["ratios"] = {
            "ranx cold / irbook cold": rc / ic,
            "ranx warm / irbook warm": rw / iw,
        }
    if args.json:
        from importlib.metadata import version

        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "load average": round(os.getloadavg()[0], 1),
            "python": platform.python_version(),
            "ranx": version("ranx"),
            "repeat": args.repeat,
            "workload": (
                "8 JQaRA runs x 1,667 queries x 100 candidates, fresh process each"
            ),
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {
                    "meta": meta,
                    "workloads": {w: r["summary"] for w, r in results.items()},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
