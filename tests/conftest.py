"""Without the offline copy and without a network, data-bound tests are skipped.

Tests that read the public data (fastbook chapters, the benchmark, JQaRA, JSQuAD) get it
from `IRBOOK_DATA` or download it. On a machine with neither, such a test stops on
`DataNotFound` from a failed download: it is reported as skipped, naming the file it
needed. Everything else still fails as usual: a checksum mismatch, a malformed file, or
any error while `IRBOOK_DATA` is set (CI always sets it).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Thread pools a worker's libraries start: OpenMP (torch, OpenBLAS), BLAS, numba (ranx),
# Rust's rayon (tokenizers), pyarrow (reads OMP_NUM_THREADS).
_POOLS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
          "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS")  # fmt: skip


def _share_the_cores():
    """Under pytest-xdist each worker gets its share of the cores for its thread pools:
    with `-n 2` on two cores, a worker whose numba or torch spread over both made the
    other wait (the suite took a fifth longer on the clock for the same CPU). Set before
    any test module imports those libraries; a variable already set is left as it is."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 0))
    if workers < 2:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    share = str(max(1, (cores or os.cpu_count() or 1) // workers))
    for var in _POOLS:
        os.environ.setdefault(var, share)


_share_the_cores()


def _cache_typed_containers():
    """ranx holds qrels and runs in numba's typed Dict and List. numba compiles their
    methods (get, set, iterate, ...) for each key and value type in every process and,
    unlike ranx's own functions (`cache=True`, warmed by tools/warm_numba.py), never
    caches them: each test worker spent 4-7 s of CPU compiling the same code again.
    With numba's on-disk cache turned on for them (numba's own mechanism: the compiled
    code is the same, and a cache is not used once numba's source changes) the first
    run writes it and later processes load it in well under a second."""
    try:
        import numba.typed.typeddict as td
        import numba.typed.typedlist as tl
        from numba.core.registry import CPUDispatcher
    except ImportError:  # no numba, no ranx: nothing to cache
        return
    for module in (td, tl):
        for f in vars(module).values():
            if isinstance(f, CPUDispatcher):
                try:
                    f.enable_caching()
                except RuntimeError:  # no writable cache folder: compile as before
                    return


_cache_typed_containers()
# trec_eval 10.0's source and test suite: the oracle of test_trec_eval.py and others
TREC_EVAL_SRC = Path(
    os.environ.get("IRBOOK_TREC_EVAL_SRC", ROOT.parent / "shared" / "trec_eval")
)


@pytest.fixture(scope="session")
def trec_eval(tmp_path_factory):
    """Path of a trec_eval binary built once per session in a copy of its source.

    Under pytest-xdist the workers share one build (about 3 s of compiling each): the
    first to need it builds it in the session's common temporary folder under a lock,
    the others wait for it and use it."""
    if not (TREC_EVAL_SRC / "Makefile").exists():
        pytest.skip(f"no trec_eval source at {TREC_EVAL_SRC}")
    if not (shutil.which("cc") or shutil.which("gcc")) or not shutil.which("make"):
        pytest.skip("no C compiler or make to build trec_eval")
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: its own folder
        return _build_trec_eval(tmp_path_factory.mktemp("trec_eval"))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # one per session, for all workers
    with FileLock(shared / "trec_eval.lock"):
        binary = shared / "trec_eval" / "src" / "trec_eval"
        return binary if binary.exists() else _build_trec_eval(binary.parents[1])


def _build_trec_eval(folder: Path) -> Path:
    "Build trec_eval in `folder`/src; the binary appears only once the build succeeded."
    build = folder / "src"
    shutil.rmtree(build, ignore_errors=True)  # a build a failed worker left half done
    shutil.copytree(TREC_EVAL_SRC, build)
    subprocess.run(["make", "-s"], cwd=build, check=True, capture_output=True)
    return build / "trec_eval"


_NO_NETWORK = re.compile(
    r"DataNotFound: (\S+): not in \$IRBOOK_DATA \(None\).*?downloading \S+ failed "
    r"\(<urlopen error"
)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("IRBOOK_DATA") or not rep.failed or call.excinfo is None:
        return
    # a notebook test prints the notebook's traceback: look in the captured output too
    text = "\n".join([str(rep.longrepr), *(body for _, body in rep.sections)])
    found = _NO_NETWORK.search(_ANSI.sub("", text))
    if found:
        rep.outcome = "skipped"
        rep.longrepr = (
            str(item.path),
            item.location[1] or 0,
            f"needs {found.group(1)}: no IRBOOK_DATA and no network to download it",
        )
