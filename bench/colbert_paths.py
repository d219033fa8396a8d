"""ColBERT on this machine: the same trained offline model through PyLate and through
RAGatouille (colbert-ai PLAID). (Not named colbert.py: run as a script, that file would
shadow the colbert-ai package RAGatouille imports.)

Each path runs in its own fresh process (path_stats_isolated, below) on
one chapter's chunks (3 paragraphs + header) and that chapter's benchmark questions,
restricted to the chapter, top 10:
  index  = load the saved model and build a searchable index (RAGatouille: convert-check
           is cached beforehand; PLAID build, reload, full-precision encoding for exact
           re-scoring)
  search = ms per question after one warm-up query; peak = the process's VmHWM (peak
           resident memory).
Also checks that both paths give the same top 10 up to ties. Needs ragatouille installed
(see the Makefile).

    IRBOOK_DATA=/path/to/data TORCH_EXTENSIONS_DIR=.cache/torch_extensions \
        nice python bench/colbert_paths.py [--chapter 8] \
        [--record bench/results/colbert_paths.json]
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from irbook.course.chunking import chunk_book
from irbook.course.common import as_queries
from irbook.course.fastbook import load_questions
from irbook.course.search.colbert import (
    ColBERTRetriever,
    RAGatouilleRetriever,
    agree_up_to_ties,
    offline_colbert,
    to_colbert_ai,
)


def peak_memory_mb() -> float:
    "This process's peak resident memory in MB (`VmHWM`)."
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def path_stats(path: str = "pylate", chapter: int = 8, k: int = 10) -> dict:
    "Index one chapter and search its questions with one ColBERT path: time, memory."
    if path not in ("pylate", "ragatouille"):
        raise ValueError(f"path must be 'pylate' or 'ragatouille', got {path!r}")
    chunks = {
        c: x.text for c, x in chunk_book("group", n=3).items() if x.chapter == chapter
    }
    queries = as_queries(q for q in load_questions() if q.chapter == chapter)
    flt = {q: set(chunks) for q in queries}
    model_dir = offline_colbert(progress=False)
    ckpt = to_colbert_ai(model_dir) if path == "ragatouille" else None
    out = {"path": path, "chunks": len(chunks), "questions": len(queries)}
    t0 = time.perf_counter()  # index = from the saved model to a searchable index
    r = (
        ColBERTRetriever(str(model_dir), progress=False, cache=False)
        if path == "pylate"
        else RAGatouilleRetriever(ckpt)
    ).index(chunks)
    out["index_s"] = time.perf_counter() - t0
    # warm-up: RAGatouille loads its searcher on the first query
    r.search(dict(list(queries.items())[:1]), k=k, filter=flt)
    t0 = time.perf_counter()
    out["run"] = r.search(queries, k=k, filter=flt)
    out["search_ms"] = 1000 * (time.perf_counter() - t0) / len(queries)
    if path == "ragatouille":  # the same index, RAGatouille's own (compressed) scores
        r.exact = False
        t0 = time.perf_counter()
        out["run_plaid"] = r.search(queries, k=k, filter=flt)
        out["search_plaid_ms"] = 1000 * (time.perf_counter() - t0) / len(queries)
    out["peak_mb"] = peak_memory_mb()
    return out


def path_stats_isolated(path: str = "pylate", chapter: int = 8) -> dict:
    "`path_stats` in a fresh process (this script, --one): its peak memory is its own."
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "stats.json"
        cmd = [
            sys.executable,
            __file__,
            "--one",
            path,
            "--chapter",
            str(chapter),
            "--json",
            str(out),
        ]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(
                f"path_stats({path!r}) failed in its process:\n{p.stderr[-3000:]}"
            )
        return json.loads(out.read_text())


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--chapter", type=int, default=8, help="fastbook chapter (8 is the smallest)"
    )
    ap.add_argument(
        "--one", choices=("pylate", "ragatouille"), help="measure one path here"
    )
    ap.add_argument("--json", help="with --one: write the measurement to this file")
    ap.add_argument(
        "--record",
        help="write both paths' measurements (runs included) to this file, as "
        "bench/results/colbert_paths.json, which chapter 14 reads",
    )
    a = ap.parse_args(argv)
    if a.one:
        Path(a.json).write_text(json.dumps(path_stats(a.one, chapter=a.chapter)))
        return 0
    to_colbert_ai(
        offline_colbert(progress=False)
    )  # build/check once, outside the timed runs
    pl = path_stats_isolated("pylate", chapter=a.chapter)
    rg = path_stats_isolated("ragatouille", chapter=a.chapter)
    qids = list(pl["run"])
    agree = sum(agree_up_to_ties(pl["run"][q], rg["run"][q]) for q in qids)
    top1 = sum(next(iter(pl["run"][q])) == next(iter(rg["run_plaid"][q])) for q in qids)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus; chapter "
        f"{a.chapter}: {pl['chunks']} chunks, "
        f"{pl['questions']} questions, k=10, filter = own chapter"
    )
    print(f"{'path':<38}{'index s':>9}{'search ms/q':>13}{'peak MB':>9}")
    rows = [
        (
            "PyLate (Voyager + exact MaxSim)",
            pl["index_s"],
            pl["search_ms"],
            pl["peak_mb"],
        ),
        (
            "RAGatouille (PLAID + exact MaxSim)",
            rg["index_s"],
            rg["search_ms"],
            rg["peak_mb"],
        ),
        (
            "RAGatouille (PLAID scores)",
            rg["index_s"],
            rg["search_plaid_ms"],
            rg["peak_mb"],
        ),
    ]
    for name, i, s, m in rows:
        print(f"{name:<38}{i:>9.1f}{s:>13.0f}{m:>9.0f}")
    print("ratios RAGatouille / PyLate (>1: RAGatouille slower or bigger):")
    print(
        f"  index time {rg['index_s'] / pl['index_s']:.2f}x, search latency "
        f"{rg['search_ms'] / pl['search_ms']:.2f}x exact, "
        f"{rg['search_plaid_ms'] / pl['search_ms']:.2f}x PLAID scores, peak memory "
        f"{rg['peak_mb'] / pl['peak_mb']:.2f}x"
    )
    print(
        f"same top 10 up to ties (exact): {agree}/{len(qids)}; same best passage "
        f"(PLAID scores): {top1}/{len(qids)}"
    )
    if a.record:
        meta = {
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load": os.getloadavg()[0],
            "chapter": a.chapter,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        record = {"meta": meta, "pylate": pl, "ragatouille": rg}
        Path(a.record).write_text(json.dumps(record, indent=1))
    return 0 if agree == len(qids) else 1


if __name__ == "__main__":
    sys.exit(main())
