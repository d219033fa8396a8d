"""Execute every notebook of the book into jupyter-book's cache, then `jupyter-book
build` renders from it (book/_config.yml: execute_notebooks: cache).

Three steps, each using both cores:

1. the front page, Part I and the reference pages that read only the offline data,
   two at a time on one core each: mostly single-threaded Python and kernel start-up;
2. the chapters of Parts II-IV one after another, in the table of contents' order:
   each may reuse what an earlier one built (models, embeddings, runs in the irbook
   cache), and their encoding and training use both cores. Nothing runs beside them:
   a second kernel on the other core slows torch's two threads by more than it saves
   (measured: the ColBERT chapter took 115-134 s beside Part I instead of 59 s alone);
3. the reference pages that read what the chapters built (`AFTER_CHAPTERS`), two at a
   time on one core each.

A notebook that fails stops the build with its error, as `-W` would.

    python tools/execute_book.py book   # then: jupyter-book build -W book
    python tools/execute_book.py book --record=bench/results/book.json

`--record` writes what the landing page's "What you need" box reads: seconds per
notebook, the machine's cores and memory, and the disk the course used (installed
packages, offline data read, irbook's cache before and after).
"""

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import yaml

TIMEOUT = 1800  # seconds a cell may take (book/_config.yml's execute.timeout)

# reference pages that read what a chapter builds: models, embeddings, the trained
# ColBERT, mined negatives. On an empty cache each builds those itself (up to a minute
# more, measured); every other reference page reads only the offline data.
AFTER_CHAPTERS = {
    "search_dense",  # MiniLM (chapter 14)
    "search_colbert",  # the trained offline ColBERT (15)
    "search_fusion",  # 16
    "part2",  # 17
    "japanese",  # 19
    "noise",  # 21
    "negatives",  # 22
    "finetune",  # 23
    "synthetic_eval",  # 24
    "training_filters",  # 25
    "judges",  # 26
}


def toc_notebooks(book: Path, part_one: bool | None = None) -> list:
    "`book`'s notebooks in reading order; `part_one`: only (or all but) Part I, index."
    toc = yaml.safe_load((book / "_toc.yml").read_text())
    files = [(toc["root"], True)]
    for part in toc.get("parts", []):
        one = part.get("caption", "").startswith("Part I:")
        files += [(c["file"], one) for c in part.get("chapters", [])]
    return [
        book / f"{f}.ipynb"
        for f, one in files
        if (book / f"{f}.ipynb").exists() and part_one in (None, one)
    ]


def execute(path: Path, one_core: bool = False) -> tuple:
    "(path, executed notebook, error text or None, seconds) of one notebook."
    from jupyter_cache.executors.utils import single_nb_execution

    if one_core:  # the kernel inherits these: one thread for torch, BLAS, numba
        for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
            os.environ[v] = "1"
    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    r = single_nb_execution(
        nb, cwd=str(path.parent), allow_errors=False, timeout=TIMEOUT,
        meta_override=True,
    )  # fmt: skip
    err = None if r.err is None else (r.exc_string or repr(r.err))
    return path, nb, err, time.perf_counter() - t


def steps(book: Path) -> list:
    "The three steps in order: (two at a time on one core each?, their notebooks)."
    nbs = toc_notebooks(book)
    reference = [p for p in nbs if p.parent.name == "api"]
    if unknown := AFTER_CHAPTERS - {p.stem for p in reference}:
        raise ValueError(f"AFTER_CHAPTERS names pages not in the toc: {unknown}")
    first = [p for p in toc_notebooks(book, part_one=True) if p not in reference]
    first += [p for p in reference if p.stem not in AFTER_CHAPTERS]
    chapters = [p for p in nbs if p not in reference and p not in first]
    last = [p for p in reference if p.stem in AFTER_CHAPTERS]
    return [(True, first), (False, chapters), (True, last)]


def _mb(path) -> float:
    "Disk use of a file or folder in MB (0 when it does not exist)."
    p = Path(path)
    if not p.exists():
        return 0.0
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    return round(sum(f.lstat().st_size for f in files) / 1e6, 1)


def machine() -> dict:
    "What the record says of the machine and the disk the course uses."
    from irbook.data import SOURCES, cache_dir, data_dir

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    data = data_dir()
    return {
        "cores": len(os.sched_getaffinity(0)),
        "memory_gb": round(mem, 1),
        "gpu": False,  # the book builds on CPUs; irbook uses a GPU where there is one
        "packages_mb": _mb(Path(sys.prefix) / "lib"),
        "data_mb": round(sum(_mb(data / n) for n in SOURCES) if data else 0.0, 1),
        "cache_mb": _mb(cache_dir()),
    }


def main(book: Path, workers: int = 2, record: Path | None = None) -> int:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(book / "_build" / ".jupyter_cache"))

    def keep(path, nb, err, secs) -> bool:
        rel = path.relative_to(book)
        if err:
            print(f"{rel}: failed after {secs:.0f} s\n{err}", file=sys.stderr)
            return False
        data = {"execution_seconds": secs}
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, str(path), data=data), check_validity=False,
            overwrite=True,
        )  # fmt: skip
        print(f"{rel}: executed in {secs:.1f} s", flush=True)
        secs_of[str(rel)] = round(secs, 1)
        return True

    t0, n, secs_of = time.perf_counter(), 0, {}
    before = machine() if record else None
    for one_core, nbs in steps(book):
        n += len(nbs)
        if not one_core:
            for p in nbs:
                if not keep(*execute(p)):
                    return 1
            continue
        with ProcessPoolExecutor(max_workers=workers) as pool:
            done = [keep(*r) for r in pool.map(execute, nbs, [True] * len(nbs))]
        if not all(done):
            return 1
    total = time.perf_counter() - t0
    print(f"{n} notebooks in {total:.0f} s")
    if record:
        after = machine()
        rec = {
            "what": "tools/execute_book.py: every notebook of the book executed once",
            **{k: v for k, v in after.items() if k != "cache_mb"},
            "cache_mb_before": before["cache_mb"],
            "cache_mb_after": after["cache_mb"],
            "total_s": round(total, 1),
            "seconds": secs_of,
        }
        Path(record).write_text(json.dumps(rec, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--record")]
    rec = next(
        (a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--record=")), None
    )
    sys.exit(main(Path(args[0] if args else "book"), record=rec))
