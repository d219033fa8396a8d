"""Lexical and dense retrieval speed on this machine: bm25s vs rank-bm25 vs SQLite FTS5,
and MiniLM encoding.

All lexical retrievers index every chunk of the 7 fastbook chapters (no chapter filter)
with the same tokenisation (irbook.course.search.fulltext.tokenize) and answer the 191
benchmark questions (top 10). Times are the best of --repeat runs; results are printed
as queries/second and as ratios.

    IRBOOK_DATA=/path/to/data nice python bench/bm25.py \
        [--strategy group|paragraph|tokens] [--encode 64]
"""

import argparse
import os
import platform
import time

import numpy as np


def best_time(fn, repeat):
    "Best wall-clock time of `repeat` calls of fn() (and the last result)."
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--strategy",
        default="group",
        choices=["group", "paragraph", "tokens"],
        help="irbook.course.chunking strategy",
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="timing repeats (best is kept)"
    )
    ap.add_argument(
        "--encode",
        type=int,
        default=64,
        help="chunks to encode with MiniLM (0 skips the dense part)",
    )
    a = ap.parse_args(argv)

    from irbook.course.chunking import chunk_book
    from irbook.course.fastbook import load_questions
    from irbook.course.search.fulltext import (
        BM25sRetriever,
        FTS5Retriever,
        RankBM25Retriever,
        query_terms,
    )

    opts = {"group": {"n": 3}, "paragraph": {}, "tokens": {"size": 500}}[a.strategy]
    chunks = chunk_book(a.strategy, **opts)
    docs = {cid: c.text for cid, c in chunks.items()}
    queries = {q.qid: q.text for q in load_questions()}
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
        f"{len(docs)} chunks ({a.strategy}), "
        f"{len(queries)} queries, k=10, best of {a.repeat}"
    )

    rows = {}
    for name, make in [
        ("FTS5", FTS5Retriever),
        ("bm25s", BM25sRetriever),
        ("rank-bm25", RankBM25Retriever),
    ]:
        t_index, r = best_time(lambda: make().index(docs), a.repeat)
        t_search, run = best_time(lambda: r.search(queries, k=10), a.repeat)
        rows[name] = (t_index, len(queries) / t_search, run)
        print(
            f"  {name:10s} index {t_index:7.3f} s   search "
            f"{len(queries) / t_search:9.1f} queries/s"
        )

    # bm25s's own batched top-k (numpy backend), no per-query filter: what the library
    # does at its best
    r = BM25sRetriever().index(docs)
    qtok = [query_terms(t) or [""] for t in queries.values()]
    t_native, _ = best_time(
        lambda: r.model.retrieve(qtok, k=10, show_progress=False, n_threads=1), a.repeat
    )
    print(
        f"  {'bm25s.retrieve (batched, native)':34s} {len(queries) / t_native:9.1f} "
        "queries/s"
    )

    # the three rankers agree on most of the top 10 (same tokens, different IDF / k1)
    def overlap(x, y):
        return np.mean([len(set(x[q]) & set(y[q])) / max(1, len(x[q])) for q in x])

    qps = {n: v[1] for n, v in rows.items()}
    print("ratios (queries/s):")
    print(
        f"  bm25s / rank-bm25 = {qps['bm25s'] / qps['rank-bm25']:.1f}x   bm25s / FTS5 "
        f"= {qps['bm25s'] / qps['FTS5']:.1f}x   "
        f"FTS5 / rank-bm25 = {qps['FTS5'] / qps['rank-bm25']:.1f}x   bm25s native "
        "batch / bm25s wrapper = "
        f"{(len(queries) / t_native) / qps['bm25s']:.1f}x"
    )
    print(
        "  top-10 overlap: bm25s vs rank-bm25 "
        f"{overlap(rows['bm25s'][2], rows['rank-bm25'][2]):.2f}, "
        f"bm25s vs FTS5 {overlap(rows['bm25s'][2], rows['FTS5'][2]):.2f}"
    )

    if a.encode:
        from irbook.course.search.dense import MINILM, Encoder

        enc = Encoder(MINILM, cache=False, progress=False)
        enc.model()  # load outside the timing
        sample = list(docs.values())[: a.encode]
        enc.encode(sample[:4])  # warm-up
        t_enc, _ = best_time(lambda: enc.encode(sample), 1)
        cps = len(sample) / t_enc
        t_q, _ = best_time(lambda: enc.encode(list(queries.values())), 1)
        print(
            f"MiniLM (all-MiniLM-L6-v2, CPU, batch 32): {cps:.1f} chunks/s "
            f"({len(sample)} chunks), "
            f"{len(queries) / t_q:.1f} questions/s"
        )
        print(
            f"  whole corpus: ~{len(docs) / cps:.0f} s to encode vs "
            f"{rows['bm25s'][0]:.2f} s to index with bm25s "
            f"({len(docs) / cps / rows['bm25s'][0]:.0f}x); bm25s answers "
            f"{qps['bm25s'] / (len(queries) / t_q):.0f}x "
            f"more questions/s than MiniLM can embed them"
        )


if __name__ == "__main__":
    main()
