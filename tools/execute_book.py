"""Execute every notebook of the book into jupyter-book's cache, then `jupyter-book
build` renders from it (book/_config.yml: execute_notebooks: cache).

The course chapters run one after another, in the table of contents' order: each may
reuse what an earlier one built (models, embeddings, runs in the irbook cache) and uses
both cores itself. The reference pages run two at a time, one core each: they are small
kernels whose time is mostly start-up and imports, and they only read what the chapters
built. A notebook that fails stops the build with its error, as `-W` would.

    python tools/execute_book.py book   # then: jupyter-book build -W book
"""

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import yaml

TIMEOUT = 1800  # seconds a cell may take (book/_config.yml's execute.timeout)


def toc_notebooks(book: Path) -> list:
    "The notebooks of `book`'s table of contents, in reading order."
    toc = yaml.safe_load((book / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return [book / f"{f}.ipynb" for f in files if (book / f"{f}.ipynb").exists()]


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


def main(book: Path, workers: int = 2) -> int:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(book / "_build" / ".jupyter_cache"))
    nbs = toc_notebooks(book)
    reference = [p for p in nbs if p.parent.name == "api"]
    course = [p for p in nbs if p not in reference]

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
        return True

    t0 = time.perf_counter()
    for p in course:
        if not keep(*execute(p)):
            return 1
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = [keep(*r) for r in pool.map(execute, reference, [True] * len(reference))]
    print(f"{len(nbs)} notebooks in {time.perf_counter() - t0:.0f} s")
    return 0 if all(done) else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "book")))
