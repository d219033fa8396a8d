"""Which training-set filter helps fine-tuning? Chapter 35's experiment at a size that
can separate the filters, run outside the book: 18 fine-tunings, hours on two cores.

The pool is every offline pseudo-query of the training chapters (chapter 34's inverse
cloze and header queries of chapters 1, 2, 4, 8); a seeded tenth of it is held out as
the validation split that early stopping reads. Each filter of chapter 35
(`irbook.course.training_filters.TRAIN_FILTERS`) keeps its share of the other nine
tenths; MiniLM is fine-tuned on each filter's pairs with sentence-transformers'
CachedMultipleNegativesRankingLoss, one epoch at a time, and the epoch with the best
validation MRR@10 is kept (`early_stopped_model`); three seeds per filter. Every model,
and the base MiniLM, is scored on the human questions of the held-out chapters (9, 10,
13), Part II's chunking (3 paragraphs with their header), each question searched in its
own chapter. Each filter is compared with no filtering by the comparison engine
(`irbook.compare`, paired bootstrap, B = 10,000, Holm), seed-averaged and seed by seed;
the unfiltered models with the base model; and both with the benchmark author's
published bge-small-en-v1.5 figures (`irbook.compare.vs_published`).

    IRBOOK_DATA=/path/to/data nice python bench/training_filters.py \
        [--record bench/results/training_filters.json] [--reduced | --smoke]

Beside the experiment, the record carries a sweep (the unfiltered seed-0 model
trained on regardless for six epochs at the study's learning rate and at four times it,
every epoch scored on the held-out questions: does training move the model at all?) and
one small configuration, described in full, that chapter 35 re-runs and checks against
the record. The full run took an hour here with two cores to itself (some epochs were
already cached).

`--reduced` runs a smaller configuration (a sample of 160 queries, shorter training
texts, smaller batches): 15 minutes here with one torch thread on two cores shared with
other work. On a busy machine use `--threads 1`: two threads competing for busy cores
were several times slower here. `--smoke` runs a tiny configuration (60 queries, two
filters, one seed, two epochs of a few steps, one held-out chapter) in a few minutes, to
check the script end to end.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from importlib.metadata import version
from pathlib import Path

import pandas as pd

from irbook.compare import compare, verdict, vs_published
from irbook.course.chunking import chunk_book
from irbook.course.common import as_docs, as_queries, digest
from irbook.course.fastbook import load_questions
from irbook.course.finetune import (
    FinetuneSettings,
    model_run,
    score_questions,
    split_questions,
)
from irbook.course.noise import answerability_judge
from irbook.course.part2 import cached_run
from irbook.course.search.dense import MINILM
from irbook.course.training_filters import (
    TRAIN_FILTERS,
    epoch_curve,
    filter_effects,
    filter_pairs_by,
    filter_scores,
    filter_table,
    record_scores,
    training_queries,
    unfiltered_scores,
    validation_split,
)

HELD_OUT = (9, 10, 13)
METRICS = ["HitRate@1", "HitRate@5", "Modified MRR@10", "Modified Recall@10"]
# the benchmark author's single-vector model on 3-paragraph chunks with headers, all 191
# questions (https://vishalbakshi.github.io/blog/posts/2024-11-26-fastbook-benchmark-results/)
AUTHOR = {
    "model": "BAAI/bge-small-en-v1.5",
    "Modified MRR@10": 0.50,
    "Modified Recall@10": 0.85,
    "questions": 191,
    "source": "https://vishalbakshi.github.io/blog/posts/"
    "2024-11-26-fastbook-benchmark-results/",
}
FULL = dict(
    pool=None,  # every offline pseudo-query of the training chapters
    val_share=0.1,
    filters=list(TRAIN_FILTERS),
    seeds=[0, 1, 2],
    max_epochs=4,
    patience=1,
    batch_size=32,
    mini_batch=16,
    max_seq_length=48,
    lr=5e-5,
    eval_seq=64,
    eval_chapters=list(HELD_OUT),
    B=10_000,
    smoke=False,
    size="full",
    # how far training moves the unfiltered model (seed 0): epochs 1..6 at each
    # learning rate, held-out scores of every epoch; its models go to the irbook cache
    sweep={"epochs": 6, "lrs": [5e-5, 2e-4]},
    # the small configuration chapter 35 re-runs: a sample of the pool, shorter texts,
    # smaller batches; recorded here, its models in the irbook cache the chapter reads
    live={
        "pool": 160,
        "val_share": 0.1,
        "seed": 0,
        "batch_size": 16,
        "mini_batch": 8,
        "max_seq_length": 32,
        "max_epochs": 2,
        "patience": 1,
    },
)
# what fits in a quarter of an hour when the two cores are shared with other jobs:
# a seeded sample of the pool, shorter texts in training, smaller batches (more steps)
REDUCED = {
    **FULL,
    "pool": 160,
    "batch_size": 16,
    "mini_batch": 8,
    "max_seq_length": 32,
    "size": "reduced",
}
SMOKE = {
    **FULL,
    "pool": 60,
    "filters": ["none", "top-1"],
    "seeds": [0],
    "max_epochs": 2,
    "batch_size": 8,
    "mini_batch": 4,
    "max_seq_length": 32,
    "eval_seq": 32,
    "eval_chapters": [10],
    "B": 1000,
    "sweep": {"epochs": 2, "lrs": [5e-5]},
    "live": {**FULL["live"], "pool": 40, "batch_size": 8, "mini_batch": 4},
    "smoke": True,
    "size": "smoke",
}
SWEPT = ("none", 0)  # the sweep continues this model's epochs: both in the irbook cache


def frame_dict(df: pd.DataFrame, columns) -> dict:
    "{column: {qid: value}} of a per-question table."
    return {c: {str(q): float(v) for q, v in df[c].items()} for c in columns}


def rows(t: pd.DataFrame) -> list:
    "A table's rows as JSON-ready records (NA as None)."
    t = t.astype(object).where(t.notna(), None)
    return [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
        for r in t.to_dict("records")
    ]


def with_verdicts(t: pd.DataFrame) -> list:
    "The engine's tested rows with each one's verdict sentence (Holm over the family)."
    family = len(t)
    out = rows(t)
    for r, raw in zip(out, t.to_dict("records")):
        r["verdict"] = verdict({**raw, "family": family})
    return out


def cached_loss_settings(c: dict, lr: float) -> FinetuneSettings:
    "Fine-tuning settings (CachedMNRL) with `c`'s batch, mini-batch and text length."
    return FinetuneSettings(
        held_out=HELD_OUT,
        loss="cached",
        batch_size=c["batch_size"],
        mini_batch=c["mini_batch"],
        max_seq_length=c["max_seq_length"],
        lr=lr,
    )


def run(cfg: dict, models: Path, log=print, partial=None) -> dict:
    "The whole experiment for settings `cfg`; the record as a dict."
    t_all = time.perf_counter()
    timings = {}
    questions = load_questions()
    chunks = chunk_book("group", n=3)
    _, test_qs = split_questions(questions, HELD_OUT)
    test_qs = [q for q in test_qs if q.chapter in set(cfg["eval_chapters"])]
    train_chunks = {c: x for c, x in chunks.items() if x.chapter not in HELD_OUT}

    t0 = time.perf_counter()
    pool, summary = training_queries(train_chunks, n=cfg["pool"])
    table, summary = filter_table(
        pool, train_chunks, answerability_judge(), summary=summary
    )
    timings["pool and filters s"] = time.perf_counter() - t0
    train_q, val_q = validation_split(pool, cfg["val_share"], seed=0)
    train_ids = [q.qid for q in train_q]
    pairs = filter_pairs_by(table.loc[train_ids, cfg["filters"]], train_q, chunks)
    log(
        f"pool {len(pool)} queries: {len(train_q)} to train, {len(val_q)} validation; "
        + ", ".join(f"{f} {len(p)} pairs" for f, p in pairs.items())
    )

    settings = cached_loss_settings(cfg, cfg["lr"])
    held = {c: x for c, x in chunks.items() if x.chapter in set(cfg["eval_chapters"])}
    t0 = time.perf_counter()
    base_run = cached_run(
        "fine-tuned dense",
        lambda: model_run(MINILM, test_qs, held, 10, False, cfg["eval_seq"]),
        MINILM,
        as_docs(held),
        as_queries(test_qs),
        cfg["eval_seq"],
    )
    base = score_questions(base_run, test_qs, held)
    timings["base model s"] = time.perf_counter() - t0

    import torch

    record = {
        "complete": False,
        "meta": {
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "torch threads": torch.get_num_threads(),
            "load at start": os.getloadavg()[0],
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "versions": {
                p: version(p)
                for p in ("torch", "sentence-transformers", "transformers")
            },
        },
        "settings": {
            **cfg,
            "held_out": list(HELD_OUT),
            "finetune": settings.fields(),
            "judge": answerability_judge().name,
            "metrics": METRICS,
            "swept": list(SWEPT),
            "validation": "MRR@10 of the validation queries among their gold chunks "
            "(own chapter), 64 word pieces; epoch 0 is the base model",
        },
        "data": {
            "questions": len(test_qs),
            "questions sha256": digest(as_queries(test_qs)),
            "held-out chunks": len(held),
            "held-out chunks sha256": digest(as_docs(held)),
            "pool": len(pool),
            "pool sha256": digest([(q.qid, q.text, q.positives) for q in pool]),
            "validation qids": [q.qid for q in val_q],
            "pairs": {f: len(p) for f, p in pairs.items()},
            "pairs sha256": {f: digest(p.to_dict("list")) for f, p in pairs.items()},
            "queries kept": {f: int(table.loc[train_ids, f].sum()) for f in pairs},
        },
        "timings": timings,
        "jobs": [],
        "scores": {"base": frame_dict(base, METRICS)},
    }
    for seed in cfg["seeds"]:  # seed by seed: a partial record holds whole seeds
        for f in cfg["filters"]:
            t0 = time.perf_counter()
            cached = (f, seed) == SWEPT and not cfg["smoke"]
            sc, lg = filter_scores(
                {f: pairs[f]},
                test_qs,
                chunks,
                settings,
                (seed,),
                cfg["eval_seq"],
                progress=False,
                val_queries=val_q,
                max_epochs=cfg["max_epochs"],
                patience=cfg["patience"],
                root=None if cached else models,
            )
            r = lg.iloc[0].to_dict()
            curve = r.pop("curve")
            r["validation MRR@10 by epoch"] = [
                float(x) for x in curve["validation MRR@10"]
            ]
            r["seconds by epoch"] = [float(x) for x in curve.seconds.fillna(0)]
            r["wall s"] = time.perf_counter() - t0
            r["load"] = os.getloadavg()[0]
            record["jobs"].append({"filter": f, "seed": seed, **r})
            record["scores"][f"{f}|{seed}"] = frame_dict(sc[f, seed], METRICS)
            if partial:
                partial(record)
            log(
                f"{f:16} seed {seed}: {r['pairs']} pairs, kept epoch "
                f"{r['epoch kept']}/{r['epochs trained']}, val "
                f"{[round(x, 3) for x in r['validation MRR@10 by epoch']]}, held-out "
                f"MRR@10 {sc[f, seed]['Modified MRR@10'].mean():.3f}, "
                f"{r['wall s']:.0f} s (load {r['load']:.1f})"
            )
    timings["training and scoring s"] = sum(j["wall s"] for j in record["jobs"])
    t0 = time.perf_counter()
    none = pairs["none"]
    record["sweep"] = sweep(cfg, settings, none, test_qs, chunks, val_q, models)
    timings["sweep s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    record["live"] = live_configuration(cfg, test_qs, chunks, models)
    timings["live configuration s"] = time.perf_counter() - t0
    record = summarize(record)
    timings["total s"] = time.perf_counter() - t_all
    record["meta"]["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return record


def sweep(cfg, settings, pairs, test_qs, chunks, val_q, models) -> dict:
    "The unfiltered model (seed SWEPT) trained on regardless: every epoch, every lr."
    out = {"epochs": cfg["sweep"]["epochs"], "lrs": {}}
    for lr in cfg["sweep"]["lrs"]:
        s = replace(settings, seed=SWEPT[1], lr=lr)
        scores, val = epoch_curve(
            s,
            pairs,
            test_qs,
            chunks,
            val_q,
            cfg["sweep"]["epochs"],
            cfg["eval_seq"],
            root=models if cfg["smoke"] else None,
        )
        out["lrs"][str(lr)] = {
            "validation MRR@10": [float(v) for v in val],
            "scores": {str(e): frame_dict(sc, METRICS) for e, sc in scores.items()},
        }
        print(
            f"sweep lr {lr}: held-out MRR@10 by epoch "
            + " ".join(f"{sc['Modified MRR@10'].mean():.3f}" for sc in scores.values()),
            flush=True,
        )
    return out


def live_configuration(cfg, test_qs, chunks, models) -> dict:
    "The small configuration chapter 35 re-runs: its description, scores and log."
    live = cfg["live"]
    settings = cached_loss_settings(live, cfg["lr"])
    spec = {
        "pool": live["pool"],
        "val_share": live["val_share"],
        "held_out": list(HELD_OUT),
        "finetune": settings.fields(),
        "seed": live["seed"],
        "eval_seq": cfg["eval_seq"],
        "max_epochs": live["max_epochs"],
        "patience": live["patience"],
    }
    t0 = time.perf_counter()
    sc, log, pairs = unfiltered_scores(
        spec, test_qs, chunks, root=models if cfg["smoke"] else None
    )
    return {
        "spec": spec,
        "pairs": len(pairs),
        "pairs sha256": digest(pairs.to_dict("list")),
        "epoch kept": int(log["epoch kept"]),
        "wall s": time.perf_counter() - t0,
        "scores": frame_dict(sc, METRICS),
    }


def summarize(record: dict) -> dict:
    "The record with its comparisons, from its per-question scores (whole seeds only)."
    t0 = time.perf_counter()
    B, filters = record["settings"]["B"], record["settings"]["filters"]
    base, scores, seeds = record_scores(record)
    if not seeds:
        raise ValueError("no seed has a model for every filter yet")
    effects = filter_effects(scores, metrics=METRICS, B=B).reset_index()
    per_seed = []
    for seed in seeds:
        c = compare(
            {f: scores[f, seed][METRICS] for f in filters},
            baseline="none",
            test="bootstrap",
            B=B,
            seed=0,
        )
        per_seed += [{"seed": seed, **r} for r in with_verdicts(c.tested)]
    avg_none = sum(scores["none", s][METRICS] for s in seeds) / len(seeds)
    ft = compare(
        {"fine-tuned, no filter": avg_none, "base MiniLM": base[METRICS]},
        baseline="base MiniLM",
        test="bootstrap",
        B=B,
        seed=0,
    )
    ft_seed = []
    for seed in seeds:
        c = compare(
            {
                f"fine-tuned, seed {seed}": scores["none", seed][METRICS],
                "base MiniLM": base[METRICS],
            },
            baseline="base MiniLM",
            test="bootstrap",
            B=B,
            seed=0,
        )
        ft_seed += [{"seed": seed, **r} for r in with_verdicts(c.tested)]
    author = []
    for name, sc in (("fine-tuned, no filter", avg_none), ("base MiniLM", base)):
        for m in ("Modified MRR@10", "Modified Recall@10"):
            v = vs_published(
                sc[m], AUTHOR[m], n_published=AUTHOR["questions"], B=B, seed=0
            )
            author.append(
                {"system": name, "metric": m, **asdict(v), "verdict": v.sentence()}
            )
    swept = []  # every epoch of the sweep against the base model, per learning rate
    for lr, v in record.get("sweep", {}).get("lrs", {}).items():
        runs = {f"epoch {e}": pd.DataFrame(x)[METRICS] for e, x in v["scores"].items()}
        c = compare(
            {**runs, "base MiniLM": base[METRICS]},
            baseline="base MiniLM",
            test="bootstrap",
            B=B,
            seed=0,
        )
        swept += [{"lr": float(lr), **r} for r in with_verdicts(c.tested)]
    # complete: every seed of every filter; a run cut short is summarized on whole seeds
    record["complete"] = seeds == record["settings"]["seeds"]
    record["comparisons"] = {
        "seeds": seeds,
        "filters vs none, seed-averaged": with_verdicts(effects),
        "filters vs none, per seed": per_seed,
        "fine-tuned vs base, seed-averaged": with_verdicts(ft.tested),
        "fine-tuned vs base, per seed": ft_seed,
        "vs the author's published model": {"author": AUTHOR, "rows": author},
        "sweep vs base": swept,
    }
    record["timings"]["comparisons s"] = time.perf_counter() - t0
    return record


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--smoke", action="store_true", help="a tiny configuration")
    ap.add_argument(
        "--reduced",
        action="store_true",
        help="a smaller configuration for a shared machine (see REDUCED)",
    )
    ap.add_argument("--record", help="write the record (JSON) to this file")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (max 2)")
    ap.add_argument(
        "--models",
        help="where the fine-tuned models go (default: a temporary folder, removed at "
        "the end; the configuration chapter 35 re-runs goes to the irbook cache)",
    )
    ap.add_argument(
        "--summarize",
        help="add the comparisons to this record (one cut short: its whole seeds), "
        "in place",
    )
    a = ap.parse_args(argv)
    if a.summarize:  # e.g. a record cut short: its whole seeds, the time it ran
        record = json.loads(Path(a.summarize).read_text())
        t = record["timings"]
        t.setdefault("training and scoring s", sum(j["wall s"] for j in record["jobs"]))
        t["total s"] = t.get("total s") or sum(
            t[k]
            for k in ("pool and filters s", "base model s", "training and scoring s")
        )
        record["meta"].setdefault(
            "finished", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        )
        record = summarize(record)
        Path(a.summarize).write_text(json.dumps(record, indent=1) + "\n")
        return report(record)
    import torch

    torch.set_num_threads(max(1, min(2, a.threads)))
    cfg = SMOKE if a.smoke else REDUCED if a.reduced else FULL
    models = Path(a.models or tempfile.mkdtemp(prefix="irbook-training-filters-"))
    try:

        def partial(r):  # every finished job on disk: a crash loses no model's scores
            if a.record:
                Path(a.record).write_text(json.dumps(r, indent=1) + "\n")

        record = run(cfg, models, log=lambda s: print(s, flush=True), partial=partial)
    finally:
        if not a.models:
            shutil.rmtree(models, ignore_errors=True)
    if a.record:
        Path(a.record).write_text(json.dumps(record, indent=1) + "\n")
    return report(record)


def report(record: dict) -> int:
    "The comparisons in words."
    c = record["comparisons"]
    print(f"seeds with every filter: {c['seeds']}")
    for r in c["filters vs none, seed-averaged"]:
        print(f"{r['filter']} vs none, {r['metric']}: {r['verdict']}")
    for r in c["fine-tuned vs base, seed-averaged"]:
        print(f"fine-tuned vs base, {r['metric']}: {r['verdict']}")
    for r in c["vs the author's published model"]["rows"]:
        print(f"{r['system']}, {r['metric']} vs the author's: {r['verdict']}")
    print(f"total {record['timings'].get('total s', float('nan')):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
