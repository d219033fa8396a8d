"""The library's models on the CPU and on a CUDA GPU, side by side (issue 35): speed and
how far the GPU's numbers are from the CPU's. Meant to take under 2 minutes on a GPU
machine (not run on one yet); needs no network (the bundled MiniLM; the fastbook
chapters if IRBOOK_DATA has them, else generated text of the same shape).

  1. encode N passages of 300 words with the course's MiniLM (irbook's Encoder, fp32,
     no cache) on each device: passages/s, and the largest difference of embeddings;
  2. the late-interaction stand-in (MiniLM-LI: the cached one if built, else an
     untrained seeded one, the same on every device) encodes 100 passages and 20
     queries on each device: largest difference of token vectors and MaxSim scores;
  3. one tiny fine-tuning run (irbook.course.finetune.train: 16 pairs, batch 8, 2
     steps) on each device: the losses side by side.

On a machine without a GPU the CUDA half is skipped, with a line saying so. Writes
$OUT/gpu_check.json when OUT is set (or --record PATH).

    python bench/gpu_check.py [--n 300] [--record PATH]
    python bench/gpu_check.py --n 40      # a short CPU-only proof that it runs
"""

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def passages(n: int, words: int = 300) -> tuple[list, str]:
    "`n` passages of `words` words: the fastbook chapters in windows, else made up."
    try:
        from irbook.course.chunking import notebook_blocks
        from irbook.data import FASTBOOK_CHAPTERS, load_fastbook_chapter

        text = []
        for ch in sorted(FASTBOOK_CHAPTERS):
            for b in notebook_blocks(load_fastbook_chapter(ch)):
                text += b.text.split()
        source = "fastbook chapters, 300-word windows"
    except Exception as e:  # no data here: text of the same shape, seeded
        rng = random.Random(0)
        vocab = (
            "the model learns weights from data a gradient step lowers the loss "
            "each batch of images goes through layers of a neural network and "
            "the learning rate sets the size of every step we train validate and "
            "test on separate sets so a metric measures what we did not fit"
        ).split()
        text = [rng.choice(vocab) for _ in range(n * words)]
        source = f"generated text (fastbook not available: {type(e).__name__})"
    out = [
        " ".join(text[(i * words) % max(1, len(text) - words) :][:words])
        for i in range(n)
    ]
    return out, source


def timed(fn):
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def dense(texts: list, device: str) -> tuple[np.ndarray, float]:
    "MiniLM embeddings of `texts` on `device` and passages per second (after warm-up)."
    from irbook.course.search.dense import MINILM, Encoder

    enc = Encoder(MINILM, cache=False, progress=False, device=device)
    enc.encode(texts[:8])  # loads the model, warms the device up
    emb, secs = timed(lambda: enc.encode(texts))
    return emb, len(texts) / secs


def standin_folder() -> tuple[Path, str]:
    "The cached stand-in if it is built here, else an untrained seeded one (no data)."
    from irbook.course.search.colbert import (
        STANDIN,
        ColBERTSettings,
        is_complete,
        new_colbert,
    )
    from irbook.data import cache_dir

    s = ColBERTSettings()
    f = cache_dir() / "models" / s.key()
    if is_complete(f, s):
        return f, f"{STANDIN} (cached, trained)"
    f = Path(tempfile.mkdtemp(prefix="gpu-check-")) / "untrained"
    new_colbert(seed=0, device="cpu").save(str(f))
    return f, f"{STANDIN} architecture, untrained projection (seed 0): none cached"


def late(folder: Path, docs: list, queries: list, device: str) -> dict:
    "Token vectors of `docs` and `queries`, and their MaxSim scores, on `device`."
    from irbook.course.search.colbert import load_colbert, maxsim

    m = load_colbert(str(folder), device=device)
    m.encode(docs[:4], is_query=False)  # warm-up
    (d, q), secs = timed(
        lambda: (m.encode(docs, is_query=False), m.encode(queries, is_query=True))
    )
    d = [np.asarray(x, np.float32) for x in d]
    q = [np.asarray(x, np.float32) for x in q]
    scores = np.array([[maxsim(a, b) for b in d] for a in q])
    return {"docs": d, "queries": q, "scores": scores, "per_s": len(docs) / secs}


def finetune(texts: list, device: str) -> dict:
    "One tiny seeded fine-tuning run on `device`: its losses and a probe's embedding."
    import pandas as pd
    from sentence_transformers import SentenceTransformer

    from irbook.course.finetune import FinetuneSettings, train

    s = FinetuneSettings(max_pairs=16, batch_size=8, max_seq_length=32)
    pairs = pd.DataFrame(
        {
            "anchor": [
                " ".join(t.split()[i : i + 12]) for i, t in enumerate(texts[:16])
            ],
            "positive": texts[:16],
        }
    )
    out = Path(tempfile.mkdtemp(prefix="gpu-check-ft-"))
    log = train(s, pairs, out, progress=False, device=device)
    probe = SentenceTransformer(str(out), device="cpu").encode(["a learning rate"])
    return {"losses": log["losses"], "steps": log["steps"], "probe": probe}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="passages to encode")
    ap.add_argument("--record", help="JSON to write (default: $OUT/gpu_check.json)")
    a = ap.parse_args(argv)

    import torch

    from irbook.course.search.dense import pick_device

    gpu = torch.cuda.is_available()
    devices = ["cpu"] + (["cuda"] if gpu else [])
    rec = {
        "machine": platform.node(),
        "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if gpu else None,
        "pick_device": pick_device(),
        "precision": "fp32",
    }
    if not gpu:
        print(
            f"no CUDA GPU here (pick_device(): {rec['pick_device']}): GPU half skipped"
        )
    else:
        print(f"GPU: {rec['gpu']}; CPU threads: {rec['cpu_threads']}")

    texts, rec["passages"] = passages(a.n)
    print(f"{len(texts)} passages of 300 words: {rec['passages']}")

    emb = {}
    for d in devices:
        emb[d], rate = dense(texts, d)
        rec[f"minilm_passages_per_s_{d}"] = round(rate, 1)
        print(f"MiniLM on {d}: {rate:,.1f} passages/s")
    if gpu:
        diff = float(np.abs(emb["cpu"] - emb["cuda"]).max())
        rec["minilm_max_abs_diff"] = diff
        print(f"MiniLM embeddings, largest |cpu - cuda|: {diff:.2g}")

    folder, rec["late_interaction_model"] = standin_folder()
    print(f"late interaction: {rec['late_interaction_model']}")
    docs = texts[:100]
    queries = [" ".join(t.split()[5:15]) for t in texts[:20]]
    li = {d: late(folder, docs, queries, d) for d in devices}
    for d in devices:
        rec[f"late_docs_per_s_{d}"] = round(li[d]["per_s"], 1)
        what = f"({len(docs)} passages, {len(queries)} queries)"
        print(f"MiniLM-LI on {d}: {li[d]['per_s']:,.1f} passages/s {what}")
    if gpu:
        tok = max(
            float(np.abs(x - y).max())
            for k in ("docs", "queries")
            for x, y in zip(li["cpu"][k], li["cuda"][k])
        )
        sc = float(np.abs(li["cpu"]["scores"] - li["cuda"]["scores"]).max())
        same = bool(
            (li["cpu"]["scores"].argmax(1) == li["cuda"]["scores"].argmax(1)).all()
        )
        rec.update(
            late_token_max_abs_diff=tok,
            late_maxsim_max_abs_diff=sc,
            late_same_top1=same,
        )
        print(f"token vectors, largest |cpu - cuda|: {tok:.2g}")
        print(f"MaxSim scores, largest |cpu - cuda|: {sc:.2g}; same top 1: {same}")

    ft = {}
    for d in devices:
        ft[d], secs = timed(lambda: finetune(texts, d))
        rec[f"finetune_losses_{d}"] = ft[d]["losses"]
        rec[f"finetune_seconds_{d}"] = round(secs, 1)
        print(f"fine-tuning on {d}: losses {ft[d]['losses']}, {secs:.1f} s")
    if gpu:
        loss = float(
            np.abs(np.subtract(ft["cpu"]["losses"], ft["cuda"]["losses"])).max()
        )
        probe = float(np.abs(ft["cpu"]["probe"] - ft["cuda"]["probe"]).max())
        rec.update(finetune_loss_max_abs_diff=loss, finetune_probe_max_abs_diff=probe)
        print(f"fine-tuning, largest |cpu - cuda|: loss {loss:.2g}, probe {probe:.2g}")
    else:
        rec["skipped"] = "no CUDA GPU: only the CPU half ran"

    path = a.record or (
        str(Path(os.environ["OUT"]) / "gpu_check.json")
        if os.environ.get("OUT")
        else None
    )
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(rec, indent=1) + "\n")
        print(f"record: {path}")
    return rec


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
