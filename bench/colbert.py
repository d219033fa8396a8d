"""ColBERT on this machine: the same trained offline model through PyLate and through
RAGatouille (colbert-ai PLAID).

Each path runs in its own fresh process (irbook.search.colbert.path_stats_isolated) on
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
        nice python bench/colbert.py [--chapter 8]
"""

import argparse
import os
import platform
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--chapter", type=int, default=8, help="fastbook chapter (8 is the smallest)"
    )
    a = ap.parse_args(argv)

    from irbook.search.colbert import (
        agree_up_to_ties,
        offline_colbert,
        path_stats_isolated,
        to_colbert_ai,
    )

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
    return 0 if agree == len(qids) else 1


if __name__ == "__main__":
    sys.exit(main())
