"""MS MARCO-dev-shaped evaluation: `irbook eval` vs pytrec_eval, ranx (warm numba cache)
and ir_measures, each tool in a FRESH process, best of N, wall time and peak RSS.

    python bench/msmarco.py [--queries 6980] [--depth 1000] [--repeat 3] [--json FILE]
    python bench/msmarco.py --scales 0.1,1,10 --tools irbook,pytrec_eval --repeat 1 \
        --json bench/results/msmarco_scaling.json

The data is generated here, seeded, in a temporary folder (never committed): --queries
queries x --depth retrieved passages (ids like MS MARCO's, up to 8.8M), about 1.07
relevant passages per query, the relevant passage retrieved for 40% of the queries.
Each process reads the TREC qrels and run from disk with the tool's own reader and
computes ndcg@10, mrr@10, map@1000 and recall@1000; the values are checked equal
(irbook runs with --ties trec_eval). Targets (issue 12): irbook >= 4x faster than
pytrec_eval end to end, >= 10x faster than ranx warm, peak RSS <= pytrec_eval's.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

METRICS = ["ndcg@10", "mrr@10", "map@1000", "recall@1000"]
RSS = "\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
CHILD = {
    "irbook": r"""
import json, sys
from irbook.cli import main
args = ["eval", sys.argv[1], sys.argv[2], "-m", *json.loads(sys.argv[3])]
status = main(args + ["--ties", "trec_eval", "--format", "json"])
"""
    + RSS,
    "pytrec_eval": r"""
import json, sys
from collections import defaultdict
import numpy as np
import pytrec_eval
def read(path, col, cast):
    out = defaultdict(dict)
    with open(path) as f:
        for line in f:
            p = line.split()
            out[p[0]][p[2]] = cast(p[col])
    return out
qrels, run = read(sys.argv[1], 3, int), read(sys.argv[2], 4, float)
measures = {"ndcg_cut.10", "map_cut.1000", "recall.1000"}
res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
def top10(d):  # trec_eval's order: 32-bit score descending, then doc id descending
    items = sorted(d.items(), reverse=True)
    items.sort(key=lambda x: -np.float32(x[1]))
    return dict(items[:10])
# trec_eval's recip_rank has no cut-off: MRR@10 from each query's top 10
rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
    {q: top10(d) for q, d in run.items()})
def mean(k, r):
    return float(np.mean([v[k] for v in r.values()]))
print(json.dumps({"ndcg@10": mean("ndcg_cut_10", res), "mrr@10": mean("recip_rank", rr),
    "map@1000": mean("map_cut_1000", res), "recall@1000": mean("recall_1000", res)}))
"""
    + RSS,
    "ranx": r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
from ranx import Qrels, Run, evaluate
q = Qrels.from_file(sys.argv[1], kind="trec")
r = Run.from_file(sys.argv[2], kind="trec")
out = evaluate(q, r, json.loads(sys.argv[3]))
print(json.dumps({k: float(v) for k, v in out.items()}))
"""
    + RSS,
    "ir_measures": r"""
import json, sys
import ir_measures
from ir_measures import nDCG, RR, AP, R
qrels = list(ir_measures.read_trec_qrels(sys.argv[1]))
run = list(ir_measures.read_trec_run(sys.argv[2]))
agg = ir_measures.calc_aggregate([nDCG@10, RR@10, AP@1000, R@1000], qrels, run)
print(json.dumps({"ndcg@10": agg[nDCG@10], "mrr@10": agg[RR@10],
    "map@1000": agg[AP@1000], "recall@1000": agg[R@1000]}))
"""
    + RSS,
}


def generate(folder: Path, queries: int, depth: int, seed: int = 0) -> tuple:
    "Write a seeded MS MARCO-dev-shaped qrels and run as TREC files; their paths."
    rng = np.random.default_rng(seed)
    qids = rng.choice(1_100_000, queries, replace=False)
    n_rel = 1 + (rng.random(queries) < 0.07)  # ~1.07 relevant passages per query
    qrel_q = np.repeat(qids, n_rel)
    qrel_d = rng.integers(0, 8_841_823, len(qrel_q))
    qrels = folder / "qrels.dev.tsv"
    with open(qrels, "w") as f:
        f.writelines(f"{q}\t0\t{d}\t1\n" for q, d in zip(qrel_q, qrel_d))
    run = folder / "run.dev.trec"
    docs = rng.integers(0, 8_841_823, (queries, depth))
    first = np.cumsum(n_rel) - n_rel
    hit = rng.random(queries) < 0.4  # the relevant passage is retrieved for 40%
    docs[hit, rng.integers(0, depth, hit.sum())] = qrel_d[first[hit]]
    scores = np.sort(rng.normal(10, 2, (queries, depth)).round(4), axis=1)[:, ::-1]
    with open(run, "w") as f:
        for q, ds, ss in zip(qids, docs, scores):
            seen = set()
            f.writelines(
                f"{q} Q0 {d} {i} {s} bench\n"
                for i, (d, s) in enumerate(zip(ds, ss), 1)
                if not (d in seen or seen.add(d))
            )
    return qrels, run


def measure(tool: str, qrels: Path, run: Path, env: dict) -> dict:
    "One fresh process: wall time, its own peak RSS (MB), the values it printed."
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", CHILD[tool], str(qrels), str(run), json.dumps(METRICS)],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t
    if p.returncode:
        raise RuntimeError(f"{tool} failed:\n{p.stderr[-3000:]}")
    *_, values, rss = p.stdout.strip().splitlines()
    return {"wall": wall, "rss_mb": int(rss) / 1024, "values": json.loads(values)}


def run_tools(tools: list, queries: int, depth: int, repeat: int, env: dict) -> dict:
    "Generate one data set and measure each tool on it: {tool: best run}."
    out = {}
    with tempfile.TemporaryDirectory(prefix="irbook-msmarco-") as tmp:
        t = time.perf_counter()
        qrels, run = generate(Path(tmp), queries, depth)
        mb = run.stat().st_size / 1e6
        print(
            f"{queries} queries x {depth} docs ({mb:.0f} MB run) generated in "
            f"{time.perf_counter() - t:.0f} s; best of {repeat} fresh processes"
        )
        for tool in tools:
            runs = [measure(tool, qrels, run, env) for _ in range(repeat)]
            best = min(runs, key=lambda r: r["wall"])
            out[tool] = {**best, "rss_mb": min(r["rss_mb"] for r in runs)}
            vals = {k: round(v, 6) for k, v in best["values"].items()}
            print(
                f"{tool:12s} {best['wall']:7.2f} s  peak RSS "
                f"{out[tool]['rss_mb']:6.0f} MB  {vals}"
            )
    return out


def report(out: dict):
    "Print the values' agreement and each tool's time and memory against irbook."
    ref = next(iter(out.values()))["values"]
    for tool, r in out.items():
        diff = max(abs(r["values"][m] - ref[m]) for m in METRICS)
        print(f"max |{tool} - {next(iter(out))}| = {diff:.1e}")
    if "irbook" in out:
        ib = out["irbook"]
        for tool, r in out.items():
            if tool != "irbook":
                print(
                    f"{tool} / irbook: time {r['wall'] / ib['wall']:.2f}x, "
                    f"peak RSS {r['rss_mb'] / ib['rss_mb']:.2f}x"
                )
        print("targets: pytrec_eval time >= 4x, ranx >= 10x, pytrec_eval RSS >= 1x")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=6980)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default="irbook,pytrec_eval,ranx,ir_measures")
    ap.add_argument(
        "--scales",
        help="comma-separated multiples of --queries (e.g. 0.1,1,10): measure the "
        "tools at each size instead, to see how the cost grows",
    )
    ap.add_argument("--json", help="write the measurements to this file")
    a = ap.parse_args()
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    tools = a.tools.split(",")
    meta = {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "queries": a.queries,
        "depth": a.depth,
        "repeat": a.repeat,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if a.scales:
        record = {"meta": meta, "scaling": []}
        for f in (float(x) for x in a.scales.split(",")):
            n = round(a.queries * f)
            out = run_tools(tools, n, a.depth, a.repeat, env)
            report(out)
            record["scaling"].append({"queries": n, "results": out})
    else:
        out = run_tools(tools, a.queries, a.depth, a.repeat, env)
        report(out)
        record = {"meta": meta, "results": out}
    if a.json:
        Path(a.json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
