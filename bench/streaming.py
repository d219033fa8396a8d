"""Peak memory of a run's evaluation against its size: streaming (`evaluate_file`, what
`irbook eval` does by default) and the whole run in memory (`read_columns` then
`evaluate`, `irbook eval --memory 0`).

    python bench/streaming.py [--lines 14,50,200] [--memory-paths 14,50]
                              [--json bench/results/streaming.json]
    python bench/streaming.py --sweep --lines 7,50,10x10 --memories 4,16,64,256,512 \
                              --rounds 2 --json /tmp/memory_sweep.json

Runs shaped like MS MARCO's (1,000 passages a query, ids up to 8.8M, about 1.07
relevant passages per query, seeded; `msmarco.py`'s recipe, written a few thousand
queries at a time so that even 200M lines are generated in little memory) are written
to a temporary folder (deleted after each size; a size is skipped, with the reason, if
the disk lacks room for it). Each evaluation runs in a fresh process that imports
irbook's command line and computes trec_eval's ndcg_cut_10, recip_rank, map_cut_1000 and
recall_1000 (`--convention trec_eval`) per query. Recorded per process: wall and CPU
seconds (user + system), peak RSS (the kernel's ru_maxrss of the child), lines per CPU
second (per core), the four means, and a SHA-256 of every per-query value: the
streaming and in-memory paths must agree bit for bit. Targets (issue 21): peak RSS
<= 1 GB at every size for streaming; identical values.

`--sweep` measures the bound of `--memory` instead (issue 37): for each size, the run
in query order and the same lines shuffled (a random permutation of every window of
--window MB of text: the whole run up to that size), each evaluated in fresh processes
at every setting of --memories, the settings and orders alternating, --rounds times.
Each process reports its RSS after start-up and the qrels (before it reads the run:
R0, what it holds then, not the qrels reader's peak) and its own peak (VmHWM: the
kernel's ru_maxrss would also hold the parent's RSS at the fork); the bound is
M + R0 + irbook.metrics.stream.OVERHEAD, and the record says, per
process, whether the peak kept it, with wall and CPU seconds, the machine's load and
the four means (equal at every setting and order).
"""

import argparse
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import msmarco
import numpy as np
from msmarco import MEASURES, _table, measure

CHILD = r"""
import hashlib, json, sys
import irbook.cli  # the command's imports, as `irbook eval` pays them
import irbook.metrics as M
from irbook.metrics.stream import evaluate_file
names = ["ndcg@10", "mrr", "map@1000", "recall@1000"]
qc = M.read_columns(sys.argv[1], "qrels")
kw = dict(per_query=True, convention="trec_eval")
if "{path}" == "memory":
    t = M.evaluate(qc, M.read_columns(sys.argv[2], "run"), names, **kw)
else:
    t = evaluate_file(qc, sys.argv[2], names, memory={memory}, **kw)
sha = hashlib.sha256(t.to_numpy().tobytes() + "\n".join(t.index).encode()).hexdigest()
means = {{m: M.aggregate(m, t[m].to_numpy()) for m in names}}
print(json.dumps(means | {{"sha": sha, "queries": len(t)}}))
"""


def generate(folder: Path, queries: int, depth: int = 1000, seed: int = 0) -> tuple:
    "A seeded MS MARCO-shaped qrels and run, written a few thousand queries at a time."
    import pyarrow.csv as pc

    rng = np.random.default_rng(seed)
    qids = rng.choice(max(1_100_000, 2 * queries), queries, replace=False)
    n_rel = 1 + (rng.random(queries) < 0.07)
    qrel_q = np.repeat(qids, n_rel)
    qrel_d = rng.integers(0, 8_841_823, len(qrel_q))
    qrels = folder / "qrels.tsv"
    pc.write_csv(
        _table(qrel_q, qrel_d, None, np.ones(len(qrel_q), np.int8)),
        qrels,
        pc.WriteOptions(include_header=False, delimiter="\t", quoting_style="none"),
    )
    first = np.cumsum(n_rel) - n_rel
    run, lines, step = folder / "run.trec", 0, max(1, 2_000_000 // depth)
    opts = pc.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    rank = np.arange(1, depth + 1, dtype=np.int32)
    schema = _table(qids[:0], qids[:0], rank[:0], np.zeros(0)).schema
    with pc.CSVWriter(run, schema, write_options=opts) as w:
        for a in range(0, queries, step):
            n = min(step, queries - a)
            docs = rng.integers(0, 8_841_823, (n, depth))
            hit = rng.random(n) < 0.4  # the relevant passage retrieved for 40%
            docs[hit, rng.integers(0, depth, hit.sum())] = qrel_d[first[a : a + n][hit]]
            scores = np.sort(rng.normal(10, 2, (n, depth)).round(4), axis=1)[:, ::-1]
            order = np.argsort(docs, axis=1, kind="stable")  # a repeat keeps rank 1
            srt = np.take_along_axis(docs, order, axis=1)
            keep = np.ones(docs.shape, bool)
            r, c = np.nonzero(srt[:, 1:] == srt[:, :-1])
            keep[r, order[r, c + 1]] = False
            q = np.broadcast_to(qids[a : a + n, None], keep.shape)[keep]
            ranks = np.broadcast_to(rank, keep.shape)[keep]
            w.write_table(_table(q, docs[keep], ranks, scores[keep]))
            lines += int(keep.sum())
    return qrels, run, lines


SWEEP_CHILD = r"""
import gc, json, sys
import irbook.cli  # the command's imports, as `irbook eval` pays them
import irbook.metrics as M
import pyarrow.compute, pyarrow.csv  # a large run's first block imports them
from irbook.metrics.stream import evaluate_file
def status(field):  # this process's own memory, MB: ru_maxrss would hold the parent's
    for line in open("/proc/self/status"):  # RSS at the fork (Linux keeps the larger
        if line.startswith(field + ":"):  # across exec), VmHWM does not
            return int(line.split()[1]) / 1024
names = ["ndcg@10", "mrr", "map@1000", "recall@1000"]
qc = M.read_columns(sys.argv[1], "qrels")
gc.collect()
with open("/proc/self/clear_refs", "w") as f:  # the peak from here on: the qrels
    f.write("5")  # reader's own (transient) peak is not the run's
rss0 = status("VmRSS")  # what the process holds once the qrels are read
means = evaluate_file(qc, sys.argv[2], names, convention="trec_eval", memory={memory})
print(json.dumps(means | {{"rss0_mb": rss0, "hwm_mb": status("VmHWM")}}))
"""


def shuffle(run: Path, out: Path, window: int) -> None:
    "`run`'s lines in random order within each `window` bytes of text (seeded)."
    import pyarrow as pa
    import pyarrow.csv as pc

    rng = np.random.default_rng(1)
    names = list("qzdrst")
    ro = pc.ReadOptions(column_names=names, block_size=window)
    co = pc.ConvertOptions(column_types={n: pa.string() for n in names})
    po = pc.ParseOptions(delimiter=" ")
    opts = pc.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    with (
        pc.open_csv(run, ro, po, co) as r,
        pc.CSVWriter(out, r.schema, write_options=opts) as w,
    ):
        for batch in r:
            w.write_batch(batch.take(pa.array(rng.permutation(batch.num_rows))))


def _make(folder: Path, queries: int, window: int, depth: int = 1000) -> tuple:
    "The qrels and the run in query order, and the run shuffled (`shuffle`)."
    qrels, run, lines = generate(folder, queries, depth)
    shuffle(run, folder / "shuffled.trec", window)
    return qrels, run, lines


def sweep(a, limits, env) -> dict:
    "Peak RSS against the bound M + R0 + OVERHEAD, in query order and shuffled."
    from irbook.metrics.stream import OVERHEAD

    runs, skipped = [], []
    memories = [int(x) for x in a.memories.split(",")]
    for shape in a.lines.split(","):  # millions of lines, or millions x depth
        millions, depth = (int(x) for x in (shape + "x1000").split("x")[:2])
        folder = Path(tempfile.mkdtemp(prefix="irbook-sweep-", dir=a.tmp))
        try:
            need = millions * 36e6 * 2.4  # two copies of the run
            free = shutil.disk_usage(folder).free
            if free < need:
                why = f"disk: {free / 1e9:.1f} GB free, {need / 1e9:.1f} GB needed"
                skipped.append({"lines": millions * 1_000_000, "reason": why})
                print(f"{millions}M lines skipped: {why}", flush=True)
                continue
            t = time.perf_counter()
            # made in a process of its own: a child forked from a big parent would
            # start with the parent's RSS, and its ru_maxrss would report that
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=spawn) as ex:
                queries = millions * 1_000_000 // depth
                job = ex.submit(_make, folder, queries, a.window * 2**20, depth)
                qrels, run, lines = job.result()
            print(
                f"{lines:,} lines, {queries:,} queries ({run.stat().st_size / 1e9:.2f}"
                f" GB), sorted and shuffled, made in {time.perf_counter() - t:.0f} s",
                flush=True,
            )
            files = {"sorted": run, "shuffled": folder / "shuffled.trec"}
            for i in range(a.rounds):
                for m in memories if i % 2 == 0 else memories[::-1]:
                    for order in files if (i + m) % 2 else list(files)[::-1]:
                        tool = f"sweep-{m}"
                        msmarco.CHILD[tool] = SWEEP_CHILD.format(memory=m * 2**20)
                        msmarco.NAMES[tool] = dict(zip(msmarco.IRBOOK, MEASURES))
                        msmarco.NAMES[tool]["rss0_mb"] = "rss0_mb"
                        msmarco.NAMES[tool]["hwm_mb"] = "hwm_mb"
                        r = measure(tool, qrels, files[order], env, limits)
                        r |= {"lines": lines, "order": order, "memory_mb": m}
                        r |= {"queries": queries, "depth": depth}
                        r["round"] = i
                        if r["status"] == "ok":
                            r0 = r["values"].pop("rss0_mb")
                            r["rss_mb"] = r["values"].pop("hwm_mb")  # its own peak
                            bound = m + r0 + OVERHEAD / 2**20
                            r |= {"rss0_mb": r0, "bound_mb": bound}
                            r["within"] = r["rss_mb"] <= bound
                        runs.append(r)
                        print(
                            f"  {lines / 1e6:.0f}M {order:8s} --memory {m:4d}: "
                            f"{r['wall']:6.1f} s (CPU {r['cpu']:6.1f}) peak "
                            f"{r['rss_mb']:5.0f} MB (R0 {r.get('rss0_mb', 0):.0f}, "
                            f"bound {r.get('bound_mb', 0):.0f}) load {r['load']:.1f} "
                            f"{r['status'] if r['status'] != 'ok' else ''}",
                            flush=True,
                        )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    ok = [r for r in runs if r["status"] == "ok"]
    sizes = {r["lines"] for r in ok}
    same = all(
        len({json.dumps(r["values"], sort_keys=True) for r in ok if r["lines"] == n})
        == 1
        for n in sizes
    )
    return {
        "runs": runs,
        "skipped": skipped,
        "overhead_mb": OVERHEAD / 2**20,
        "targets": {
            "peak RSS <= M + R0 + OVERHEAD in every process": all(
                r["within"] for r in ok
            ),
            "the same means at every setting and order": same,
        },
    }


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--lines",
        default="14,50,200",
        help="run sizes, millions of lines (--sweep: MxD, D results a query: 10x10)",
    )
    ap.add_argument("--memory-paths", default="14,50", help="sizes also run in memory")
    ap.add_argument("--memory", type=int, default=512, help="streaming setting, MB")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per process")
    ap.add_argument("--tmp", default=None, help="folder for the generated files")
    ap.add_argument("--json", help="write the record to this file")
    ap.add_argument("--sweep", action="store_true", help="the bound of --memory")
    ap.add_argument("--memories", default="4,16,64,256,512", help="--sweep: MB")
    ap.add_argument("--rounds", type=int, default=2, help="--sweep: rounds")
    ap.add_argument("--window", type=int, default=512, help="--sweep: shuffle, MB")
    a = ap.parse_args()
    sizes = [] if a.sweep else [int(x) for x in a.lines.split(",")]
    in_memory = {int(x) for x in a.memory_paths.split(",") if x}
    limits = {"timeout": a.timeout, "max_rss_mb": 16 * 1024, "min_available_mb": 1024}
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    meta = {
        "what": "irbook evaluating MS MARCO-shaped runs (1,000 passages a query) in "
        "a fresh process: streaming (evaluate_file, irbook eval's default) and the "
        "whole run in memory (read_columns + evaluate, irbook eval --memory 0); "
        "trec_eval's ndcg_cut_10, recip_rank, map_cut_1000, recall_1000 per query",
        "memory_setting_mb": a.memory,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "code": os.popen("git rev-parse --short HEAD 2>/dev/null").read().strip(),
    }
    if a.sweep:
        record = {
            "meta": meta
            | {
                "what": "peak RSS of evaluate_file against "
                "--memory M, runs in query order and shuffled"
            }
        }
        record |= sweep(a, limits, env)
        meta["load_after"] = os.getloadavg()
        if a.json:
            Path(a.json).write_text(json.dumps(record, indent=1))
        return
    runs, skipped = [], []
    for millions in sizes:
        queries = millions * 1000
        folder = Path(tempfile.mkdtemp(prefix="irbook-stream-", dir=a.tmp))
        try:
            need = millions * 36e6 * 1.2  # ~35 bytes a line, and room to spare
            free = shutil.disk_usage(folder).free
            if free < need:
                skipped.append(
                    {
                        "lines": millions * 1_000_000,
                        "reason": f"disk: {free / 1e9:.1f} GB free, the run needs "
                        f"{need / 1e9:.1f} GB",
                    }
                )
                print(f"{millions}M lines skipped: {skipped[-1]['reason']}", flush=True)
                continue
            t = time.perf_counter()
            qrels, run, lines = generate(folder, queries)
            size = run.stat().st_size
            print(
                f"{lines:,} lines ({size / 1e9:.2f} GB) generated in "
                f"{time.perf_counter() - t:.0f} s",
                flush=True,
            )
            paths = ["streaming"] + ["memory"] * (millions in in_memory)
            if millions not in in_memory:
                skipped.append(
                    {
                        "lines": lines,
                        "path": "memory",
                        "reason": "not in --memory-paths",
                    }
                )
            for path in paths:
                msmarco.CHILD[path] = CHILD.format(path=path, memory=a.memory * 2**20)
                msmarco.NAMES[path] = dict(zip(msmarco.IRBOOK, MEASURES)) | {
                    "sha": "sha",
                    "queries": "queries",
                }
                r = measure(path, qrels, run, env, limits)
                r |= {
                    "path": path,
                    "lines": lines,
                    "run_gb": size / 1e9,
                    "lines_per_s_per_core": lines / r["cpu"],
                    "lines_per_s": lines / r["wall"],
                    "load": os.getloadavg()[0],
                }
                runs.append(r)
                print(
                    f"  {path:9s} {r['wall']:8.1f} s (CPU {r['cpu']:7.1f}) "
                    f"{r['rss_mb']:7.0f} MB  {r['lines_per_s_per_core'] / 1e6:.2f}M "
                    f"lines/s/core  {r['status']}",
                    flush=True,
                )
            mine = [r for r in runs if r["lines"] == lines and r["status"] == "ok"]
            if len(mine) == 2:
                same = mine[0]["values"] == mine[1]["values"]
                for r in mine:
                    r["equal"] = same
                print(f"  identical per-query values: {same}", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    for r in runs:
        r.setdefault("equal", None)
    meta["load_after"] = os.getloadavg()
    stream = [r for r in runs if r["path"] == "streaming" and r["status"] == "ok"]
    record = {
        "meta": meta,
        "runs": runs,
        "skipped": skipped,
        "targets": {
            "streaming peak RSS <= 1 GB at every size": all(
                r["rss_mb"] <= 1024 for r in stream
            ),
            "streaming equals in memory": all(
                r["equal"] for r in runs if r["equal"] is not None
            ),
        },
    }
    if a.json:
        Path(a.json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
