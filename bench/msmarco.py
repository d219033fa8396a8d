"""MS MARCO-shaped evaluation, like for like: `irbook eval` (its json and trec layouts)
against trec_eval 10 (C), pytrec_eval, ranx (warm numba cache) and ir_measures, and a
bare pyarrow read of the run (the floor).

    python bench/msmarco.py [--shapes 6980x1000] [--rounds 5] [--json FILE]
    python bench/msmarco.py --data /tmp/irbook-msmarco   # the files kept for next time
    python bench/msmarco.py --tools irbook,irbook_trec,pyarrow,trec_eval,pytrec_eval
    python bench/msmarco.py --shapes 1000000x100 --rounds 1 --json FILE
    python bench/msmarco.py --scales 0.1,1,10 --tools irbook,pytrec_eval --rounds 1

The data is generated here, seeded, in a temporary folder (never committed; `--data
DIR` keeps it there and reuses it): queries x depth retrieved passages (ids like MS
MARCO's, up to 8.8M), about 1.07 relevant passages per query, the relevant passage
retrieved for 40% of the queries. 6,980 x 1,000 is the dev set's shape (6,979,615
lines, 245 MB of TREC text).

Every tool reads the TREC qrels and run from disk with ITS OWN reader
(`irbook eval` on the command line, which streams the run a batch of whole queries at a
time by default, `--memory` MB, in its json and its trec layout; trec_eval 10 built
from its source, `--trec-eval-src`, as tests/conftest.py builds it;
pytrec_eval.parse_qrel/parse_run; ranx Qrels/Run.from_file(kind="trec");
ir_measures.read_trec_qrels/read_trec_run) and calls its evaluator once for four
measures it computes natively: trec_eval's ndcg_cut_10, recip_rank (no cut-off: MRR
over the whole list), map_cut_1000 and recall_1000 (irbook and ranx: ndcg@10 mrr
map@1000 recall@1000; ir_measures: nDCG@10 RR AP@1000 R@1000). Nothing else is computed
in Python. irbook runs with --convention trec_eval, so its values equal trec_eval's;
ranx breaks ties its own way (a documented difference). The floor, `pyarrow`: a bare
`pyarrow.csv.read_csv` of the run in a fresh `python -c` (query as dictionary, doc id as
string, score as float64, the other fields not converted).

Timing: one untimed warm-up process per tool on a small file (ranx's numba cache, in
a folder of ours, is warm after it), then --rounds rounds; in each round every tool
runs once in a fresh process, the order turned by one place each round (so no tool is
always first after another), and the ratio tool / irbook (json) is taken within the
round. Reported: median and range of those ratios, median and best wall times, CPU
times (user + system: less disturbed by other loads on a shared machine), peak RSS per
process (the kernel's ru_maxrss of the child, as /usr/bin/time -v reports it), and the
machine's 1-minute load before each process. A process over --timeout seconds or
--max-rss-gb of RSS (or leaving the machine under 1 GB available) is stopped and
recorded as such. Targets (issues 12 and 37): trec_eval / irbook >= 5, pytrec_eval /
irbook >= 4, ranx (warm) / irbook >= 10, irbook (json and trec) / bare read <= 1.5,
irbook's peak RSS <= 0.5x pytrec_eval's.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

# trec_eval's names for the four measures, and each tool's names for them
MEASURES = ["ndcg_cut_10", "recip_rank", "map_cut_1000", "recall_1000"]
IRBOOK = ["ndcg@10", "mrr", "map@1000", "recall@1000"]
CHILD = {
    "irbook": r"""
import json, sys
from irbook.cli import main
M = ["ndcg@10", "mrr", "map@1000", "recall@1000"]
sys.exit(main(["eval", sys.argv[1], sys.argv[2], "-m", *M,
               "--convention", "trec_eval", "--format", "json", *sys.argv[3:]]))
""",
    "irbook_trec": r"""
import sys
from irbook.cli import main
M = ["ndcg@10", "mrr", "map@1000", "recall@1000"]
sys.exit(main(["eval", sys.argv[1], sys.argv[2], "-m", *M,
               "--convention", "trec_eval", "--format", "trec", *sys.argv[3:]]))
""",
    "pytrec_eval": r"""
import json, sys
import pytrec_eval
M = ["ndcg_cut_10", "recip_rank", "map_cut_1000", "recall_1000"]
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
ev = pytrec_eval.RelevanceEvaluator(
    qrels, {"ndcg_cut.10", "recip_rank", "map_cut.1000", "recall.1000"})
res = ev.evaluate(run)
print(json.dumps({m: pytrec_eval.compute_aggregated_measure(
    m, [r[m] for r in res.values()]) for m in M}))
""",
    "ranx": r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
from ranx import Qrels, Run, evaluate
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
out = evaluate(qrels, run, ["ndcg@10", "mrr", "map@1000", "recall@1000"])
print(json.dumps({k: float(v) for k, v in out.items()}))
""",
    "ir_measures": r"""
import json, sys
import ir_measures
from ir_measures import nDCG, RR, AP, R
M = [nDCG@10, RR, AP@1000, R@1000]
agg = ir_measures.calc_aggregate(
    M, ir_measures.read_trec_qrels(sys.argv[1]), ir_measures.read_trec_run(sys.argv[2]))
print(json.dumps({str(m): agg[m] for m in M}))
""",
    "pyarrow": r"""
import json, sys
import pyarrow as pa
import pyarrow.csv as pc
types = {"q": pa.dictionary(pa.int32(), pa.string()), "d": pa.string(),
         "s": pa.float64()}
t = pc.read_csv(sys.argv[2],
                read_options=pc.ReadOptions(column_names=list("qzdrst")),
                parse_options=pc.ParseOptions(delimiter=" "),
                convert_options=pc.ConvertOptions(column_types=types,
                                                  include_columns=list(types)))
print(json.dumps({"rows": t.num_rows}))
""",
}
TREC_EVAL = ["-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "map_cut.1000"]
TREC_EVAL += ["-m", "recall.1000"]  # trec_eval's command line for the four
# each tool's printed names -> trec_eval's
NAMES = {
    "irbook": dict(zip(IRBOOK, MEASURES)),
    "irbook_trec": dict(zip(MEASURES, MEASURES)),
    "trec_eval": dict(zip(MEASURES, MEASURES)),
    "ranx": dict(zip(IRBOOK, MEASURES)),
    "ir_measures": dict(zip(["nDCG@10", "RR", "AP@1000", "R@1000"], MEASURES)),
    "pytrec_eval": dict(zip(MEASURES, MEASURES)),
    "pyarrow": {},
}
TARGETS = {  # what: (bound, tool, its figure, inverted): irbook's figure against tool's
    "pytrec_eval time / irbook >= 4": (4, "pytrec_eval", "ratio_median", False),
    "ranx (warm) time / irbook >= 10": (10, "ranx", "ratio_median", False),
    "irbook time / bare pyarrow read <= 1.5": (1.5, "pyarrow", "ratio_median", True),
    "irbook peak RSS / pytrec_eval's <= 0.5": (
        0.5,
        "pytrec_eval",
        "rss_ratio_median",
        True,
    ),
    "trec_eval 10 (C) time / irbook >= 5": (5, "trec_eval", "ratio_median", False),
    "irbook --format trec time / bare pyarrow read <= 1.5": (
        1.5,
        "pyarrow",
        "trec_ratio_median",
        True,
    ),
}


def trec_lines(text: str) -> dict:
    "The summary values ('all' lines) of trec_eval's layout: {measure: value}."
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] == "all":
            try:
                out[f[0]] = float(f[2])
            except ValueError:
                pass
    return out


def build_trec_eval(src: Path, folder: Path) -> Path | None:
    "trec_eval built from its source `src` in a copy under `folder`; None if it can't."
    if not (src / "Makefile").exists() or not shutil.which("make"):
        return None
    build = folder / "trec_eval_src"
    if not (build / "trec_eval").exists():
        shutil.copytree(src, build, dirs_exist_ok=True)
        subprocess.run(["make", "-s"], cwd=build, check=True, capture_output=True)
    return build / "trec_eval"


def _table(q, d, rank, score):
    "A pyarrow table of TREC run (or qrels, if rank is None) lines."
    import pyarrow as pa

    n = len(q)
    const = lambda s: pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), [s])  # noqa: E731
    if rank is None:
        return pa.table({"q": q, "z": const("0"), "d": d, "r": score})
    return pa.table(
        {"q": q, "z": const("Q0"), "d": d, "i": rank, "s": score, "t": const("bench")}
    )


def generate(folder: Path, queries: int, depth: int, seed: int = 0) -> tuple:
    "Write a seeded MS MARCO-dev-shaped qrels and run as TREC files: paths, run lines."
    import pyarrow.csv as pc

    rng = np.random.default_rng(seed)
    qids = rng.choice(1_100_000, queries, replace=False)
    n_rel = 1 + (rng.random(queries) < 0.07)  # ~1.07 relevant passages per query
    qrel_q = np.repeat(qids, n_rel)
    qrel_d = rng.integers(0, 8_841_823, len(qrel_q))
    opts = pc.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    qrels = folder / "qrels.dev.tsv"
    pc.write_csv(
        _table(qrel_q, qrel_d, None, np.ones(len(qrel_q), np.int8)),
        qrels,
        pc.WriteOptions(include_header=False, delimiter="\t", quoting_style="none"),
    )
    run = folder / "run.dev.trec"
    docs = rng.integers(0, 8_841_823, (queries, depth))
    first = np.cumsum(n_rel) - n_rel
    hit = rng.random(queries) < 0.4  # the relevant passage is retrieved for 40%
    docs[hit, rng.integers(0, depth, hit.sum())] = qrel_d[first[hit]]
    scores = np.sort(rng.normal(10, 2, (queries, depth)).round(4), axis=1)[:, ::-1]
    # a passage retrieved twice for a query keeps its first (higher) rank only; the
    # ranks are the positions before that, as written by the first version's loop
    order = np.argsort(docs, axis=1, kind="stable")
    srt = np.take_along_axis(docs, order, axis=1)
    keep = np.ones(docs.shape, bool)
    rows, cols = np.nonzero(srt[:, 1:] == srt[:, :-1])
    keep[rows, order[rows, cols + 1]] = False
    del order, srt
    rank = np.broadcast_to(np.arange(1, depth + 1, dtype=np.int32), docs.shape)
    with pc.CSVWriter(
        run,
        _table(qids[:0], docs[0, :0], rank[0, :0], scores[0, :0]).schema,
        write_options=opts,
    ) as w:
        step = max(1, 2_000_000 // depth)  # about 2M lines at a time
        for a in range(0, queries, step):
            k = keep[a : a + step]
            q = np.broadcast_to(qids[a : a + step, None], k.shape)[k]
            w.write_table(
                _table(
                    q,
                    docs[a : a + step][k],
                    rank[a : a + step][k],
                    scores[a : a + step][k],
                )
            )
    return qrels, run, int(keep.sum())


def _available_mb() -> float:
    "The machine's MemAvailable, MB."
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def _rss_mb(pid: int) -> float:
    "A live process's resident memory, MB (0 if it is gone)."
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


COMMANDS = {}  # tool: a command instead of `python -c CHILD[tool]` (trec_eval)
EXTRA = []  # arguments given to irbook's command line too (--memory M)


def command(tool: str, qrels: Path, run: Path) -> list:
    "The command line of one fresh process of `tool`."
    if tool in COMMANDS:
        return [*COMMANDS[tool], str(qrels), str(run)]
    extra = EXTRA if tool.startswith("irbook") else []
    return [sys.executable, "-c", CHILD[tool], str(qrels), str(run), *extra]


def measure(tool: str, qrels: Path, run: Path, env: dict, limits: dict) -> dict:
    "One fresh process: wall time, its peak RSS (MB), its values, or why it stopped."
    stopped, load = [], os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(
            command(tool, qrels, run),
            stdout=out,
            stderr=err,
            env=env,
        )
        done = threading.Event()

        def watch():  # stop the child at the time or memory limit
            while not done.wait(0.1):
                why = None
                if time.perf_counter() - t > limits["timeout"]:
                    why = f"time limit: stopped after {limits['timeout']:.0f} s"
                elif _rss_mb(p.pid) > limits["max_rss_mb"]:
                    why = (
                        f"out of memory: RSS over {limits['max_rss_mb'] / 1024:.0f} GB"
                    )
                elif _available_mb() < limits["min_available_mb"]:
                    why = "out of memory: the machine had under 1 GB available"
                if why:
                    stopped.append(why)
                    p.kill()
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        usage = None
        try:  # exact end time and the child's own rusage
            _, status, usage = os.wait4(p.pid, 0)
        finally:  # stopped ourselves (Ctrl-C, SIGTERM): stop the child too
            if usage is None:
                done.set()
                p.kill()
        wall = time.perf_counter() - t
        done.set()
        watcher.join()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    cpu = usage.ru_utime + usage.ru_stime  # less sensitive to other loads than wall
    r = {"tool": tool, "wall": wall, "cpu": cpu, "rss_mb": usage.ru_maxrss / 1024}
    r["load"] = load  # the machine's 1-minute load average as the process started
    if stopped:
        return r | {"status": stopped[0]}
    if p.returncode:
        return r | {"status": f"failed ({p.returncode}): {stderr.strip()[-500:]}"}
    if tool in ("trec_eval", "irbook_trec"):  # trec_eval's layout: 4 decimals
        printed = trec_lines(stdout)
    else:
        printed = json.loads(stdout.strip().splitlines()[-1])
    values = {NAMES[tool][k]: v for k, v in printed.items() if k in NAMES[tool]}
    return r | {"status": "ok", "values": values}


def summarise(runs: list, tools: list) -> dict:
    "Per tool: median/best wall and RSS, values, per-round ratios to irbook."
    out = {}
    by = {(r["round"], r["tool"]): r for r in runs if r["status"] == "ok"}
    for tool in tools:
        mine = [r for r in runs if r["tool"] == tool]
        ok = [r for r in mine if r["status"] == "ok"]
        s = {"runs": len(mine), "ok": len(ok)}
        if not ok:  # where it was stopped (or failed)
            s |= {"wall": None, "rss_mb": None, "status": mine[0]["status"]}
            out[tool] = s | {
                "stopped_wall": mine[0]["wall"],
                "stopped_rss_mb": mine[0]["rss_mb"],
            }
            continue
        walls, rss = [r["wall"] for r in ok], [r["rss_mb"] for r in ok]
        s |= {
            "status": "ok" if len(ok) == len(mine) else "some runs stopped",
            "wall": statistics.median(walls),
            "wall_best": min(walls),
            "cpu": statistics.median(r["cpu"] for r in ok),
            "rss_mb": statistics.median(rss),
            "rss_mb_max": max(rss),
            "load": [min(r["load"] for r in ok), max(r["load"] for r in ok)],
            "values": ok[0].get("values", {}),
        }
        # within each round: this tool's run and irbook's (json)
        pairs = [(r, by.get((r["round"], "irbook"))) for r in ok if tool != "irbook"]
        pairs = [(r, i) for r, i in pairs if i is not None]
        if pairs:
            ratios = [r["wall"] / i["wall"] for r, i in pairs]
            s |= {
                "ratio_per_pair": ratios,
                "ratio_median": statistics.median(ratios),
                "ratio_range": [min(ratios), max(ratios)],
                "ratio_best": min(r["wall"] for r, _ in pairs)
                / min(i["wall"] for _, i in pairs),
                "cpu_ratio_median": statistics.median(
                    r["cpu"] / i["cpu"] for r, i in pairs
                ),
                "rss_ratio_median": statistics.median(
                    r["rss_mb"] / i["rss_mb"] for r, i in pairs
                ),
            }
        trec = [(r, by.get((r["round"], "irbook_trec"))) for r in ok]
        trec = [(r, i) for r, i in trec if i is not None and tool != "irbook_trec"]
        if trec:  # against irbook's trec layout too
            ratios = [r["wall"] / i["wall"] for r, i in trec]
            s |= {
                "trec_ratio_median": statistics.median(ratios),
                "trec_ratio_range": [min(ratios), max(ratios)],
            }
        out[tool] = s
    ref = out.get("irbook", {}).get("values")
    for s in out.values():
        if ref and s.get("values"):
            diffs = {m: abs(s["values"][m] - ref[m]) for m in MEASURES}
            s["abs_diff_vs_irbook"] = diffs
            s["max_abs_diff_vs_irbook"] = max(diffs.values())
    te, it = (out.get(t, {}).get("values") for t in ("trec_eval", "irbook_trec"))
    if te and it:  # the same printed lines: trec_eval's 4 decimals
        out["irbook_trec"]["equal_to_trec_eval"] = te == it
    return out


def targets(res: dict) -> dict:
    "Each target: the measured figure, whether it is met (None: not measured)."
    out = {}
    for what, (bound, tool, key, invert) in TARGETS.items():
        x = res.get(tool, {}).get(key)
        if x is None:  # the tool's own status, or (it ran, the other side not) not run
            note = res.get(tool, {}).get("status", "not run")
            note = "not run" if note == "ok" else note
            out[what] = {"value": None, "met": None, "note": note}
            continue
        x = 1 / x if invert else x  # irbook's figure over the peer's
        out[what] = {
            "value": x,
            "met": bool(x >= bound if ">=" in what else x <= bound),
        }
    return out


def _files(folder: Path, queries: int, depth: int, seed: int) -> tuple:
    "The qrels and run of this shape in `folder`: made once, reused while they last."
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "shape.json"
    want = {"queries": queries, "depth": depth, "seed": seed}
    qrels, run = folder / "qrels.dev.tsv", folder / "run.dev.trec"
    if stamp.exists() and run.exists():
        had = json.loads(stamp.read_text())
        if {k: had.get(k) for k in want} == want:
            return qrels, run, had["lines"]
    stamp.unlink(missing_ok=True)
    # made in a child process: Linux hands a process's peak RSS on to the programs it
    # starts (exec keeps the old memory's high-water mark in ru_maxrss), so files made
    # here raised every timed tool's peak to this process's (3.4 GB at 100 M lines)
    with ProcessPoolExecutor(1) as pool:
        qrels, run, lines = pool.submit(generate, folder, queries, depth, seed).result()
    stamp.write_text(json.dumps(want | {"lines": lines}))  # last: a cut one is remade
    return qrels, run, lines


def run_shape(tools, queries, depth, rounds, env, limits, folder, data=None) -> dict:
    "Generate one data set, warm every tool up, then rounds of every tool, turning."
    t = time.perf_counter()
    warm = _files(folder / "warmup", 100, depth, 1)
    home = Path(data) / f"{queries}x{depth}" if data else folder
    qrels, run, lines = _files(home, queries, depth, 0)
    size = run.stat().st_size
    print(
        f"{queries:,} queries x {depth:,} ({lines:,} lines, {size / 1e6:,.0f} MB) "
        f"ready in {time.perf_counter() - t:.0f} s; {rounds} rounds",
        flush=True,
    )
    for tool in tools:  # untimed: compiles .pyc files, fills ranx's numba cache
        w = measure(tool, *warm[:2], env, limits)
        assert w["status"] == "ok", w
    runs = []
    for i in range(rounds):
        turn = i % len(tools)
        for tool in tools[turn:] + tools[:turn]:
            r = measure(tool, qrels, run, env, limits) | {"round": i}
            runs.append(r)
            print(
                f"  round {i} {tool:12s} {r['wall']:8.2f} s (CPU {r['cpu']:7.2f}) "
                f"{r['rss_mb']:8.0f} MB  load {r['load']:.2f} "
                f"{r['status'] if r['status'] != 'ok' else ''}",
                flush=True,
            )
    res = summarise(runs, tools)
    return {
        "queries": queries,
        "depth": depth,
        "run_lines": lines,
        "run_mb": size / 1e6,
        "pairs": rounds,
        "results": res,
        "targets": targets(res),
        "runs": runs,
    }


def report(shape: dict):
    "Print each tool's medians, its pair ratios to irbook and the targets."
    print(f"{shape['queries']:,} x {shape['depth']:,}:")
    for tool, s in shape["results"].items():
        if s["wall"] is None:
            print(f"  {tool:12s} {s['status']}")
            continue
        ratio = (
            f"x{s['ratio_median']:.2f} [{s['ratio_range'][0]:.2f}, "
            f"{s['ratio_range'][1]:.2f}]"
            if "ratio_median" in s
            else ""
        )
        diff = s.get("max_abs_diff_vs_irbook")
        print(
            f"  {tool:12s} median {s['wall']:7.2f} s (best {s['wall_best']:.2f}, "
            f"CPU {s['cpu']:.2f})  "
            f"RSS {s['rss_mb']:6.0f} MB  load {s['load'][0]:.1f}-{s['load'][1]:.1f}  "
            f"{ratio}"
            + (
                f"  max|diff| {diff:.1e}"
                if diff is not None and tool != "irbook"
                else ""
            )
        )
    for what, t in shape["targets"].items():
        v = "n/a" if t["value"] is None else f"{t['value']:.2f}"
        met = {True: "met", False: "MISSED", None: t.get("note", "")}[t["met"]]
        print(f"  target {what}: {v} {met}")


def _stop(signum, frame):
    "SIGTERM: unwind (stop the running child, remove the temporary files)."
    raise SystemExit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _stop)
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--shapes", default="6980x1000", help="queries x depth, comma-separated"
    )
    ap.add_argument("--queries", type=int, default=6980, help="with --scales")
    ap.add_argument("--depth", type=int, default=1000, help="with --scales")
    ap.add_argument(
        "--scales",
        help="comma-separated multiples of --queries (e.g. 0.1,1,10) at --depth, "
        "instead of --shapes: how the cost grows",
    )
    ap.add_argument(
        "--rounds", "--pairs", type=int, default=5, help="rounds of every tool"
    )
    ap.add_argument(
        "--tools",
        default="irbook,irbook_trec,pyarrow,trec_eval",
        help="of irbook, irbook_trec, pyarrow, trec_eval, pytrec_eval, ranx, "
        "ir_measures",
    )
    ap.add_argument("--data", help="keep the generated files here and reuse them")
    ap.add_argument(
        "--trec-eval-src",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "trec_eval"),
        help="trec_eval 10's source, built in the temporary folder",
    )
    ap.add_argument("--memory", type=int, help="irbook eval --memory MB")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per process")
    ap.add_argument("--max-rss-gb", type=float, default=16, help="RSS per process")
    ap.add_argument("--json", help="write the record to this file")
    a = ap.parse_args()
    if a.scales:
        shapes = [(round(a.queries * float(f)), a.depth) for f in a.scales.split(",")]
    else:
        shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    tools = a.tools.split(",")
    if "irbook" not in tools:
        raise SystemExit("--tools: irbook (json) is the reference of every ratio")
    if a.memory is not None:
        EXTRA[:] = ["--memory", str(a.memory)]
    limits = {
        "timeout": a.timeout,
        "max_rss_mb": a.max_rss_gb * 1024,
        "min_available_mb": 1024,
    }
    import importlib.metadata as md

    versions = {}
    for p in [
        "irbook",
        "pytrec-eval-terrier",
        "ranx",
        "ir-measures",
        "numba",
        "pyarrow",
        "numpy",
    ]:
        try:
            versions[p] = md.version(p)
        except md.PackageNotFoundError:
            pass
    meta = {
        "what": "each tool end to end in a fresh process: start, read the TREC qrels "
        "and run with its own reader, compute ndcg_cut_10, recip_rank (no cut-off), "
        "map_cut_1000 and recall_1000 natively; pyarrow: a bare read_csv of the run",
        "timing": "medians of alternating fresh-process pairs (irbook, peer, ...), the "
        "ratio peer / irbook per pair; ranx with a warm numba cache; wall seconds, and "
        "CPU seconds (user + system of the child) which other loads disturb less",
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gb": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "python": platform.python_version(),
        "versions": versions,
        "load_before": os.getloadavg(),
        "limits": {"timeout_s": a.timeout, "max_rss_gb": a.max_rss_gb},
        "pairs": a.rounds,
        "irbook_args": EXTRA,
        "depth": shapes[0][1],
        "queries": shapes[0][0],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    out = []
    with tempfile.TemporaryDirectory(prefix="irbook-msmarco-") as tmp:
        env = dict(os.environ, PYTHONWARNINGS="ignore", NUMBA_CACHE_DIR=f"{tmp}/numba")
        # the warm-up writes each Python tool's .pyc files, as `pip install` does: a
        # machine that sets PYTHONDONTWRITEBYTECODE would compile irbook's modules
        # (an editable install) from source in every timed process
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if "trec_eval" in tools:
            binary = build_trec_eval(Path(a.trec_eval_src), Path(tmp))
            if binary is None:
                raise SystemExit(f"no trec_eval source (Makefile) at {a.trec_eval_src}")
            COMMANDS["trec_eval"] = [str(binary), *TREC_EVAL]
        for q, d in shapes:
            shape = run_shape(tools, q, d, a.rounds, env, limits, Path(tmp), a.data)
            report(shape)
            out.append(shape)
    meta["load_after"] = os.getloadavg()
    record = {"meta": meta} | (out[0] if len(out) == 1 else {"scaling": out})
    if a.json:
        Path(a.json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
