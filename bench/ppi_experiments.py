"""How many human-judged questions is a judge worth? Issue 28's experiments with real
judgments: prediction-powered intervals (`irbook.ppi`) for a retrieval metric when only
n questions carry human labels and a judge labels the rest.

Two datasets whose human labels cover every question, so the truth is known: the mean
metric under human labels over ALL questions.

- JQaRA (1,667 questions, human labels on all 100 candidates of each). Systems: five
  published leaderboard runs. Judges: a published re-ranker run's scores
  (ruri-reranker-large) and an embedding model's run scores (ruri-small), each turned
  into labels by a score threshold calibrated on the human-judged questions of the draw.
  Metrics: nDCG@10 (the leaderboard's) and MRR@10.
- The fastbook benchmark (191 questions; Part II's 3-paragraph chunks with headers, the
  chapter's cached retrieval runs). Judge: answer-aware MiniLM, the cosine between a
  part of the gold answer and a chunk, thresholded likewise. Metrics: the chapter's
  Modified MRR@10 and Recall@10, with the judge deciding which chunk supports which part
  of the answer.

For each n, `draws` times: n questions drawn at random WITHOUT replacement get their
human labels; the judge's threshold is calibrated on them (best label F1); the
human-only, classic PPI and PPI++ 95% intervals are built for each system's mean and
for paired differences. Recorded: coverage of the all-questions human mean, mean width,
PPI++'s lambda, how often a pair's order is recovered, and the human-only sample size
that gives PPI++'s width ("what the judge is worth": n x (human width / PPI++ width)^2).
The population is finite and sampled without replacement, so the intervals (which
assume independent draws from an infinite population) are conservative, the more so as
n nears N.

    IRBOOK_DATA=/path/to/data python bench/ppi_experiments.py [--draws 1000]
        [--only jqara|fastbook] [--out bench/results]

Reads the published runs and the cached Part II runs; encodes the fastbook chunks and
answer parts with MiniLM (cached). About five minutes here on two cores shared
with other jobs (load 12): half loading the published runs, half the draws (numpy).
"""

import argparse
import json
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

ALPHA = 0.05
JQARA = dict(
    systems=[
        "bm25",
        "bge-m3+dense",
        "multilingual-e5-large",
        "JaColBERTv2.5",
        "japanese-splade-base-v1",
    ],
    pairs=[
        ("multilingual-e5-large", "bm25"),
        ("multilingual-e5-large", "bge-m3+dense"),
        ("japanese-splade-base-v1", "JaColBERTv2.5"),
    ],
    judges={"re-ranker": "ruri-reranker-large", "embedding": "ruri-small"},
    metrics=["ndcg@10", "mrr@10"],
    ns=[25, 50, 100, 200, 400, 800],
)
FASTBOOK = dict(
    systems=["bm25s, stemmed", "FTS5, question terms", "MiniLM", "ColBERT"],
    pairs=[
        ("bm25s, stemmed", "MiniLM"),
        ("bm25s, stemmed", "FTS5, question terms"),
        ("MiniLM", "ColBERT"),
    ],
    judges={"answer-aware MiniLM": "sentence-transformers/all-MiniLM-L6-v2"},
    metrics=["modified_mrr", "modified_recall"],
    ns=[25, 50, 100, 150],
)
METHODS = ("human", "ppi", "ppi++", "judge only")


# ---------------------------------------------------------------- the judge step
def calibrated_threshold(counts: np.ndarray, labeled: np.ndarray) -> int:
    """The judge step: the threshold (index into the grid) whose labels agree best with
    the human labels of the `labeled` questions (F1 of the relevant class, ties to the
    lowest threshold): `irbook.course.judges.threshold_judge`'s rule, from counts so
    that thousands of draws take seconds. `threshold_check` holds every batch's first
    draw to `threshold_judge` itself.

    `counts[:, t, q]` = (agreeing positives, judge-only positives, human-only positives)
    of question q at threshold t."""
    tp, fp, fn = counts[:, :, labeled].sum(axis=2)
    f1 = 2 * tp / np.maximum(2 * tp + fp + fn, 1)
    return int(np.argmax(f1))


FOLDS = 5  # the judge's threshold for a human-judged question: fitted on the others


def crossfit_thresholds(counts: np.ndarray, labeled: np.ndarray) -> tuple:
    """`(t_all, fold_of, t_fold)`: the threshold fitted on every human-judged question
    (for the judge-only ones) and, for each of `FOLDS` folds of the human-judged
    questions (in order, i % FOLDS), the one fitted on the other folds, so that the
    same human labels never both fit the judge and measure its bias (cross-fitting,
    as `irbook.course.judges.threshold_judge(folds=...)` does)."""
    idx = np.flatnonzero(labeled)
    k = max(2, min(FOLDS, len(idx) // 2))
    fold_of = np.full(len(labeled), -1)
    fold_of[idx] = np.arange(len(idx)) % k
    t_fold = []
    for j in range(k):
        others = labeled & (fold_of != j)
        t_fold.append(calibrated_threshold(counts, others))
    return calibrated_threshold(counts, labeled), fold_of, t_fold


def judge_values_of(F: np.ndarray, fits: list) -> np.ndarray:
    "(D, Q, S) judge values: each question's from its fold's threshold (`fits`)."
    out = np.stack([F[t_all] for t_all, _, _ in fits])
    for d, (_, fold_of, t_fold) in enumerate(fits):
        for j, t in enumerate(t_fold):
            q = fold_of == j
            out[d, q] = F[t][q]
    return out


def threshold_check(score: np.ndarray, human: np.ndarray, grid):
    """A check `(labeled, t)` that `irbook.course.judges.threshold_judge`, given the
    judge's scores and the human labels of the `labeled` questions and the same grid,
    cuts at `grid[t]`. `score` and `human`: (Q, C) or (Q, K, C), -inf for no
    candidate."""

    def check(labeled: np.ndarray, t: int) -> None:
        from irbook.course.judges import threshold_judge

        scores, qrels = {}, {}
        for i in np.flatnonzero(labeled):
            rows = score[i].reshape(-1, score.shape[-1])
            hum = human[i].reshape(-1, human.shape[-1])
            for k, (sc, hu) in enumerate(zip(rows, hum)):
                ok = np.flatnonzero(np.isfinite(sc))
                scores[f"{i}.{k}"] = {str(j): float(sc[j]) for j in ok}
                qrels[f"{i}.{k}"] = {str(j): int(hu[j]) for j in ok}
        got = threshold_judge(scores, qrels, grid=grid).threshold
        if got != grid[t]:
            raise AssertionError(f"threshold {grid[t]} != irbook.course.judges' {got}")

    return check


def label_counts(judge: np.ndarray, human: np.ndarray, grid) -> np.ndarray:
    "(3, T, Q): agreeing, judge-only and human-only positives per threshold, question."
    axes = tuple(range(1, human.ndim))
    out = np.empty((3, len(grid), len(human)))
    for t, thr in enumerate(grid):
        lab = judge >= thr
        out[0, t] = (lab & human).sum(axes)
        out[1, t] = (lab & ~human).sum(axes)
        out[2, t] = (~lab & human).sum(axes)
    return out


# ---------------------------------------------------------------- metrics, vectorized
DISCOUNT = 1 / np.log2(np.arange(2, 12))


def gather(labels: np.ndarray, top: np.ndarray) -> np.ndarray:
    "labels[q, ..., top[q, r]]: the labels of each question's top 10 (-1: no document)."
    idx, valid = np.maximum(top, 0), top >= 0
    if labels.ndim == 3:  # (Q, K, C): one row of labels per answer part
        idx = np.broadcast_to(idx[:, None, :], labels.shape[:2] + (top.shape[1],))
        valid = valid[:, None, :]
    return np.take_along_axis(labels, idx, -1) & valid


def ndcg_mrr(labels: np.ndarray, top: np.ndarray) -> dict:
    "Binary nDCG@10 and MRR@10 per question; labels (Q, C) bool, top (Q, 10) indices."
    g = gather(labels, top)
    dcg = (g * DISCOUNT).sum(1)
    ideal = np.concatenate([[0], np.cumsum(DISCOUNT)])[np.minimum(labels.sum(1), 10)]
    first = np.where(g.any(1), g.argmax(1) + 1, 0)
    return {
        "ndcg@10": np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0.0),
        "mrr@10": np.where(first > 0, 1 / np.maximum(first, 1), 0.0),
    }


def modified(labels: np.ndarray, parts: np.ndarray, top: np.ndarray) -> dict:
    """The fastbook benchmark's Modified MRR@10 and Recall@10 per question: labels
    (Q, K, C) says which candidate supports which answer part, `parts` (Q, K) which
    parts exist."""
    g = gather(labels, top)  # (Q, K, 10)
    rank = np.where(g.any(2), g.argmax(2) + 1, 0)
    found = (rank > 0) & parts
    missed = ((rank == 0) & parts).any(1)
    worst = np.where(parts, rank, 0).max(1)
    return {
        "modified_mrr": np.where(missed, 0.0, 1 / np.maximum(worst, 1)),
        "modified_recall": found.sum(1) / parts.sum(1),
    }


# ---------------------------------------------------------------- the experiment
def batch_intervals(
    y: np.ndarray,
    f: np.ndarray,
    lab: np.ndarray,
    alpha: float = ALPHA,
    systems: int | None = None,
):
    """`irbook.ppi`'s four intervals for many draws (the library's own functions, one
    implementation). y (Q, U) human values, f (D, Q, U) the judge's values in each
    draw, lab (D, Q) the draw's human-judged questions; the first `systems` units
    (default: all) are means in [0, 1], the others paired differences in [-1, 1].
    Returns {method: (estimate, low, high, lambda)}, each (D, U)."""
    from irbook.ppi import human_interval, judge_intervals

    D, _, U = f.shape
    S = U if systems is None else systems
    out = {k: np.zeros((4, D, U)) for k in METHODS}
    for d in range(D):
        for j in range(U):
            bounds = (0.0, 1.0) if j < S else (-1.0, 1.0)
            ivs = judge_intervals(
                y[lab[d], j], f[d, lab[d], j], f[d, ~lab[d], j], alpha, bounds=bounds
            )
            ivs["judge only"] = human_interval(f[d, :, j], alpha, bounds=bounds)
            for k, iv in ivs.items():
                lam = 1.0 if k == "judge only" else iv.lam
                out[k][:, d, j] = (iv.estimate, iv.low, iv.high, lam)
    return {k: tuple(v) for k, v in out.items()}


def check_against_irbook(y, f, lab, ivs, alpha=ALPHA, systems=None) -> None:
    "The batch's first draw equals irbook.ppi's intervals (every unit, every method)."
    from irbook.ppi import human_interval, judge_intervals

    S = y.shape[1] if systems is None else systems
    for j in range(y.shape[1]):
        b = (0.0, 1.0) if j < S else (-1.0, 1.0)
        ref = judge_intervals(y[lab, j], f[lab, j], f[~lab, j], alpha, bounds=b)
        ref["judge only"] = human_interval(f[:, j], alpha, bounds=b)
        for k, iv in ref.items():
            got = [v[0, j] for v in ivs[k]]
            want = [iv.estimate, iv.low, iv.high, 1.0 if k == "judge only" else iv.lam]
            if not np.allclose(got, want, rtol=1e-7, atol=1e-9):
                raise AssertionError(f"{k}, unit {j}: {got} != irbook.ppi's {want}")


def units_of(systems: list, pairs: list) -> tuple:
    "Unit names and the (S, U) weights: each system, then each pair's difference."
    W = np.zeros((len(systems), len(systems) + len(pairs)))
    col = {s: i for i, s in enumerate(systems)}
    for i in range(len(systems)):
        W[i, i] = 1
    for j, (a, b) in enumerate(pairs):
        W[col[a], len(systems) + j], W[col[b], len(systems) + j] = 1, -1
    return list(systems) + [f"{a} - {b}" for a, b in pairs], W


def run_draws(
    Y: dict,
    F: dict,
    counts: np.ndarray,
    systems: list,
    pairs: list,
    ns,
    draws: int,
    seed: int = 0,
    alpha: float = ALPHA,
    chunk: int = 200,
    check=None,
) -> dict:
    """The draws of one judge. `Y[metric]`: (Q, S) per-question values under human
    labels; `F[metric]`: (T, Q, S) under the judge's labels at each threshold of the
    grid; `counts`: `label_counts` for the calibration. Per n, unit (system or pair),
    metric and method: coverage, mean width, ... (see `summarize`)."""
    Q = next(iter(Y.values())).shape[0]
    names, W = units_of(systems, pairs)
    truth = {m: dict(zip(names, map(float, (y @ W).mean(0)))) for m, y in Y.items()}
    rng = np.random.default_rng(seed)
    out = {}
    for n in ns:
        if n >= Q:
            continue
        rec = {(m, k): [] for m in Y for k in METHODS}
        thresholds = []
        for start in range(0, draws, chunk):
            d = min(chunk, draws - start)
            lab = np.zeros((d, Q), bool)
            for i in range(d):
                lab[i, rng.choice(Q, n, replace=False)] = True
            fits = [crossfit_thresholds(counts, row) for row in lab]
            t = [f[0] for f in fits]
            if check is not None:  # the judge step, checked against course.judges
                check(lab[0], t[0])
            thresholds += t
            for m in Y:
                S = len(systems)
                Fd = judge_values_of(F[m], fits) @ W
                ivs = batch_intervals(Y[m] @ W, Fd, lab, alpha, S)
                check_against_irbook(Y[m] @ W, Fd[0], lab[0], ivs, alpha, S)
                for k in METHODS:
                    rec[m, k].append(np.stack(ivs[k]))  # (4, d, U)
        rec = {mk: np.concatenate(v, axis=1) for mk, v in rec.items()}
        out[n] = summarize(rec, truth, names, thresholds)
    return {"truth": truth, "by n": out}


def summarize(rec: dict, truth: dict, names: list, thresholds: list) -> dict:
    "Coverage, width, lambda, order recovery per (metric, unit, method) of one n."
    res = {"threshold index": np.bincount(thresholds).tolist()}
    for (m, k), (est, low, high, lam) in rec.items():
        for j, u in enumerate(names):
            th = truth[m][u]
            e, lo, hi = est[:, j], low[:, j], high[:, j]
            row = {
                "coverage": float(np.mean((lo <= th) & (th <= hi))),
                "mean width": float(np.mean(hi - lo)),
                "mean lambda": float(np.mean(lam[:, j])),
                "bias": float(np.mean(e) - th),
                "rmse": float(np.sqrt(np.mean((e - th) ** 2))),
            }
            if " - " in u:  # a pair: is the order recovered?
                s = np.sign(th)
                row["separated, right order"] = float(
                    np.mean(np.minimum(s * lo, s * hi) > 0)
                )
                row["separated, wrong order"] = float(
                    np.mean(np.maximum(s * lo, s * hi) < 0)
                )
                row["point estimate, right order"] = float(np.mean(np.sign(e) == s))
            res.setdefault(m, {}).setdefault(u, {})[k] = row
    for m in truth:  # what the judge is worth: human-only questions for PPI++'s width
        for u in truth[m]:
            r = res[m][u]
            r["width ratio ppi++/human"] = (
                r["ppi++"]["mean width"] / r["human"]["mean width"]
            )
    return res


def worth(record: dict) -> dict:
    "{judge: {metric: {unit: {n: human-only questions worth PPI++ at n}}}}."
    out = {}
    for j, res in record["judges"].items():
        for n, byn in res["by n"].items():
            for m, units in byn.items():
                if m == "threshold index":
                    continue
                for u, r in units.items():
                    ratio = r["width ratio ppi++/human"]
                    out.setdefault(j, {}).setdefault(m, {}).setdefault(u, {})[n] = (
                        int(n) / ratio**2
                    )
    return out


# ---------------------------------------------------------------- the datasets
def jqara_inputs(cfg: dict, T: int = 120) -> dict:
    "Per-question human and judge metrics of the JQaRA systems, per judge."
    from irbook.core import ranking
    from irbook.course.jqara import load_runs
    from irbook.data import fetch
    from irbook.metrics import read_qrels

    qrels = read_qrels(fetch("jqara/qrels.trec"))
    runs = {
        k: v.to_dict()
        for k, v in load_runs(cfg["systems"] + list(cfg["judges"].values())).items()
    }
    qids = sorted(qrels)
    cands = {q: sorted(runs[cfg["systems"][0]][q]) for q in qids}
    C = max(len(c) for c in cands.values())
    human = np.zeros((len(qids), C), bool)
    pos = {}
    for i, q in enumerate(qids):
        pos[q] = {d: j for j, d in enumerate(cands[q])}
        for d, rel in qrels[q].items():
            if rel > 0 and d in pos[q]:
                human[i, pos[q][d]] = True
    tops = np.full((len(cfg["systems"]), len(qids), 10), -1)
    for s, name in enumerate(cfg["systems"]):
        for i, q in enumerate(qids):
            ids = ranking(runs[name].get(q, {}))[:10]
            tops[s, i, : len(ids)] = [pos[q][d] for d in ids]
    Y = {
        m: np.stack([ndcg_mrr(human, tops[s])[m] for s in range(len(tops))], 1)
        for m in cfg["metrics"]
    }
    judges = {}
    for jname, run in cfg["judges"].items():
        score = np.full((len(qids), C), -np.inf)
        for i, q in enumerate(qids):
            for d, v in runs[run].get(q, {}).items():
                if d in pos[q]:
                    score[i, pos[q][d]] = v
        grid = np.unique(
            np.quantile(score[np.isfinite(score)], np.linspace(0.5, 0.995, T))
        )
        F = {m: np.empty((len(grid), len(qids), len(tops))) for m in cfg["metrics"]}
        for t, thr in enumerate(grid):
            lab = score >= thr
            for s in range(len(tops)):
                v = ndcg_mrr(lab, tops[s])
                for m in cfg["metrics"]:
                    F[m][t, :, s] = v[m]
        judges[jname] = {
            "run": run,
            "F": F,
            "counts": label_counts(score, human, grid),
            "grid": grid,
            "check": threshold_check(score, human, grid),
        }
    data = {
        "questions": len(qids),
        "candidates per question": C,
        "relevant per question (human)": float(human.sum(1).mean()),
        "source": "hotchpotch/JQaRA @ e2fa20e, evaluator/data/eval_results "
        "(qrels.trec and the published runs)",
    }
    return {"Y": Y, "judges": judges, "data": data, "qids": qids}


def fastbook_inputs(cfg: dict, T: int = 120) -> dict:
    "Per-question human and judge Modified MRR/Recall@10 of the Part II systems."
    from irbook.core import ranking
    from irbook.course.chunking import chunk_book
    from irbook.course.common import as_docs, digest, text_of
    from irbook.course.fastbook import load_questions, matching_chunks, score_run
    from irbook.course.part2 import part2_runs
    from irbook.course.search.dense import Encoder

    questions = load_questions()
    chunks = chunk_book("group", n=3)
    runs = part2_runs(chunks, questions)
    tops_ids = {
        s: {q.qid: ranking(runs[s].get(q.qid, {}))[:10] for q in questions}
        for s in cfg["systems"]
    }
    cands = {
        q.qid: sorted({d for s in cfg["systems"] for d in tops_ids[s][q.qid]})
        for q in questions
    }
    Q, K = len(questions), max(len(q.components) for q in questions)
    C = max(len(c) for c in cands.values())
    parts = np.zeros((Q, K), bool)
    human = np.zeros((Q, K, C), bool)
    tops = np.full((len(cfg["systems"]), Q, 10), -1)
    for i, q in enumerate(questions):
        pos = {d: j for j, d in enumerate(cands[q.qid])}
        parts[i, : len(q.components)] = True
        for k, ids in enumerate(matching_chunks(q, chunks)):
            for d in ids & set(pos):
                human[i, k, pos[d]] = True
        for s, name in enumerate(cfg["systems"]):
            ids = tops_ids[name][q.qid]
            tops[s, i, : len(ids)] = [pos[d] for d in ids]
    Y = {
        m: np.stack([modified(human, parts, tops[s])[m] for s in range(len(tops))], 1)
        for m in cfg["metrics"]
    }
    for s, name in enumerate(cfg["systems"]):  # the same numbers as the chapter's
        ref = score_run(runs[name], chunks, questions)
        for m in cfg["metrics"]:
            assert np.allclose(ref[m].to_numpy(), Y[m][:, s]), (name, m)
    # the judge: cosine of each answer part with each candidate chunk (MiniLM, cached)
    enc = Encoder(next(iter(cfg["judges"].values())), progress=False)
    docs = as_docs(chunks)
    part_text = [c.text for q in questions for c in q.components]
    a = enc.encode(part_text)
    ids = sorted({d for c in cands.values() for d in c})
    e = dict(zip(ids, enc.encode([text_of(docs[d]) for d in ids])))
    score = np.full((Q, K, C), -np.inf)
    row = 0
    for i, q in enumerate(questions):
        E = np.stack([e[d] for d in cands[q.qid]])
        for k in range(len(q.components)):
            score[i, k, : len(E)] = E @ a[row]
            row += 1
    grid = np.unique(np.quantile(score[np.isfinite(score)], np.linspace(0.3, 0.995, T)))
    F = {m: np.empty((len(grid), Q, len(tops))) for m in cfg["metrics"]}
    for t, thr in enumerate(grid):
        lab = score >= thr
        for s in range(len(tops)):
            v = modified(lab, parts, tops[s])
            for m in cfg["metrics"]:
                F[m][t, :, s] = v[m]
    judge = {
        "run": "cosine(answer part, chunk), " + enc.name,
        "F": F,
        "counts": label_counts(score, human, grid),
        "grid": grid,
        "check": threshold_check(score, human, grid),
    }
    data = {
        "questions": Q,
        "answer parts": int(parts.sum()),
        "chunking": "3 paragraphs + header (chunk_book('group', n=3))",
        "chunks": len(chunks),
        "chunks sha256": digest(docs),
        "candidates": "the union of the systems' top 10 per question",
        "source": "vishalbakshi/fastbook-benchmark @ e812ad0 (questions); fastbook "
        "chapters 1, 2, 4, 8, 9, 10, 13",
    }
    return {
        "Y": Y,
        "judges": {next(iter(cfg["judges"])): judge},
        "data": data,
        "qids": [q.qid for q in questions],
    }


def experiment(name: str, cfg: dict, inputs: dict, draws: int, seed: int = 0) -> dict:
    "The record of one dataset: settings, data, per-judge results, worth, timings."
    t0 = time.perf_counter()
    Y, systems = inputs["Y"], cfg["systems"]
    record = {
        "dataset": name,
        "meta": {
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load at start": os.getloadavg()[0],
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "versions": {p: version(p) for p in ("numpy", "scipy")},
        },
        "settings": {
            "systems": cfg["systems"],
            "pairs": [list(p) for p in cfg["pairs"]],
            "judges": cfg["judges"],
            "metrics": cfg["metrics"],
            "ns": [n for n in cfg["ns"] if n < len(next(iter(Y.values())))],
            "draws": draws,
            "seed": seed,
            "alpha": ALPHA,
            "methods": list(METHODS),
            "sampling": "n questions drawn uniformly without replacement from the "
            "finite population of all questions; the truth is the all-questions mean "
            "under human labels. The intervals assume independent draws from an "
            "infinite population, so they are conservative (more so as n nears N).",
            "calibration": "per draw, the judge's score threshold with the best F1 "
            "against the "
            "human labels of the n human-judged questions (a grid of score "
            "quantiles; irbook.course.judges.threshold_judge's rule, checked against it"
            " on the first draw of every batch) labels the judge-only questions; each "
            "human-judged question is labelled at the threshold fitted on the other"
            " folds (5, by order) of the human-judged questions (cross-fitting), so"
            " the same labels never both fit the judge and give PPI's rectifier. "
            "Intervals: irbook.ppi (Student t, n - 1 df; PPI++'s lambda cross-"
            "fitted; the metric's range)",
            "judge only": "the classical interval of the judge's metric over all "
            "questions, with no human correction",
        },
        "data": inputs["data"],
        "human means": {
            m: dict(zip(cfg["systems"], map(float, Y[m].mean(0)))) for m in Y
        },
        "judges": {},
    }
    for j, (jname, judge) in enumerate(inputs["judges"].items()):
        t1 = time.perf_counter()
        res = run_draws(
            Y,
            judge["F"],
            judge["counts"],
            cfg["systems"],
            cfg["pairs"],
            record["settings"]["ns"],
            draws,
            seed + j,
            check=judge.get("check"),
        )
        tp, fp, fn = judge["counts"].sum(2)
        best = int(np.argmax(2 * tp / np.maximum(2 * tp + fp + fn, 1)))
        res["run"] = judge["run"]
        res["grid"] = [float(g) for g in judge["grid"]]
        res["all-questions calibration"] = {
            "threshold": float(judge["grid"][best]),
            "label F1": float(
                2 * tp[best] / max(2 * tp[best] + fp[best] + fn[best], 1)
            ),
            "judge means": {
                m: dict(zip(cfg["systems"], map(float, judge["F"][m][best].mean(0))))
                for m in Y
            },
            "correlation with human, per question": {
                m: dict(
                    zip(
                        cfg["systems"],
                        (
                            float(
                                np.corrcoef(Y[m][:, s], judge["F"][m][best][:, s])[0, 1]
                            )
                            for s in range(Y[m].shape[1])
                        ),
                    )
                )
                for m in Y
            },
        }
        res["per question at that threshold"] = {
            m: {s: rounded(judge["F"][m][best][:, i]) for i, s in enumerate(systems)}
            for m in Y
        }
        res["seconds"] = time.perf_counter() - t1
        res["by n"] = {str(n): v for n, v in res["by n"].items()}
        record["judges"][jname] = res
    record["per question"] = {  # the human values, for a live demo on one draw
        "qids": list(inputs.get("qids", [])),
        **{m: {s: rounded(Y[m][:, i]) for i, s in enumerate(systems)} for m in Y},
    }
    record["worth"] = worth(record)
    record["meta"]["seconds"] = time.perf_counter() - t0
    record["meta"]["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return record


def rounded(x) -> list:
    "Per-question values for the record, to 6 decimals."
    return [round(float(v), 6) for v in x]


def report(record: dict) -> None:
    "Coverage and width per n, in a few lines."
    m = record["settings"]["metrics"][0]
    for j, res in record["judges"].items():
        print(f"{record['dataset']}, judge {j} ({res['run']}), {m}:")
        for n, byn in res["by n"].items():
            cov = {
                k: np.mean([byn[m][u][k]["coverage"] for u in byn[m]]) for k in METHODS
            }
            wid = {
                k: np.mean([byn[m][u][k]["mean width"] for u in byn[m]])
                for k in METHODS
            }
            w = np.median([record["worth"][j][m][u][n] for u in byn[m]])
            print(
                f"  n={n:>4}: coverage "
                + " ".join(f"{k} {cov[k]:.3f}" for k in METHODS)
                + " | width "
                + " ".join(f"{k} {wid[k]:.4f}" for k in METHODS[:3])
                + f" | worth ~{w:.0f} human questions"
            )


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=["jqara", "fastbook"])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = ap.parse_args(argv)
    for name, cfg, inputs in (
        ("jqara", JQARA, jqara_inputs),
        ("fastbook", FASTBOOK, fastbook_inputs),
    ):
        if a.only and a.only != name:
            continue
        t0 = time.perf_counter()
        data = inputs(cfg)
        record = experiment(name, cfg, data, a.draws, a.seed)
        record["meta"]["inputs seconds"] = (
            time.perf_counter() - t0 - record["meta"]["seconds"]
        )
        path = Path(a.out) / f"ppi_{name}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        report(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
