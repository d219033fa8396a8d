"""Faults of the process end cleanly (issue 27, item 3): each case runs the installed
`irbook` command in a fresh process and checks its exit status, its stderr (one line, no
traceback) and that nothing is left in TMPDIR.

Run: python -m pytest tests/test_faults.py -q
"""

import bz2
import gzip
import lzma
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IRBOOK = shutil.which("irbook") or str(Path(sys.executable).parent / "irbook")
QRELS = b"q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n"
RUN = b"q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n"


def env(tmp: Path, **kw) -> dict:
    "The command's environment: this worktree's code, TMPDIR in `tmp`."
    (tmp / "tmp").mkdir(exist_ok=True)
    e = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp / "tmp")}
    return {**e, "TQDM_DISABLE": "1", **kw}


def small(tmp: Path) -> tuple:
    (tmp / "q").write_bytes(QRELS)
    (tmp / "r").write_bytes(RUN)
    return tmp / "q", tmp / "r"


def big(tmp: Path, nq: int = 2000, nd: int = 100) -> tuple:
    "A qrels file and a shuffled run of `nq` x `nd` lines (spilled when streamed)."
    rng = random.Random(0)
    q = [f"q{i} 0 d{rng.randrange(nd)} {rng.randrange(3)}\n" for i in range(nq)]
    r = [f"q{i} Q0 d{j} {j + 1} {nd - j}.5 r\n" for i in range(nq) for j in range(nd)]
    rng.shuffle(r)
    (tmp / "bq").write_text("".join(q))
    (tmp / "br").write_text("".join(r))
    return tmp / "bq", tmp / "br"


def shell(script: str, tmp: Path, *args, **kw):
    "bash -c `script` with `$1...` = `args`: (exit status, stdout, stderr)."
    r = subprocess.run(
        ["bash", "-c", script, "bash", *map(str, args)],
        capture_output=True,
        env=env(tmp, PATH=f"{Path(IRBOOK).parent}:{os.environ['PATH']}"),
        cwd=tmp,
        **kw,
    )
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def one_line(err: str, part: str = ""):
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert part in err, err


# ------------------------------------------------------------------ signals
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_run(tmp_path, sig):
    "SIGINT or SIGTERM while a shuffled run spills: one line, its status, no folder."
    # a run of about 10 s (it is stopped long before; 5,000 queries took 3 s on a
    # faster machine and finished first twice under load): a loaded machine that
    # starves this test for a few seconds must not let the run finish before the signal
    q, r = big(tmp_path, nq=15000)
    p = subprocess.Popen(
        [IRBOOK, "eval", q, r, "-m", "map", "--memory", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(tmp_path),
        # as from a terminal: pytest-xdist's workers ignore SIGINT, and a child keeps
        # an ignored signal ignored (irbook respects that, as nohup expects)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    t0 = time.monotonic()  # mid-run: once its spill folder exists
    while not any((tmp_path / "tmp").iterdir()) and time.monotonic() - t0 < 20:
        time.sleep(0.02)
    time.sleep(0.3)
    assert p.poll() is None, "the run ended before the signal: make it bigger"
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -sig, err  # by the signal: the shell shows 128 + sig
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert err.decode() == f"irbook eval: {word}\n"
    assert out == b""
    assert list((tmp_path / "tmp").iterdir()) == []


# ------------------------------------------------------------------ streams
def test_stdout_closed(tmp_path):
    status, out, err = shell(
        'irbook eval "$1" "$2" -m map >&-', tmp_path, *small(tmp_path)
    )
    assert status == 2
    one_line(err, "standard output is closed")


def test_stdout_full(tmp_path):
    q, r = small(tmp_path)
    status, out, err = shell('irbook eval "$1" "$2" -m map >/dev/full', tmp_path, q, r)
    assert status == 2
    one_line(err, "cannot write the output: No space left on device")


def test_reader_leaves_early(tmp_path):
    "`| head`: silent, status 0, as before."
    q, r = big(tmp_path, 400, 20)
    script = 'irbook eval "$1" "$2" -m map -q | head -1; exit ${PIPESTATUS[0]}'
    status, out, err = shell(script, tmp_path, q, r)
    assert (status, err, len(out.splitlines())) == (0, "", 1)


def test_stderr_closed(tmp_path):
    "An error with stderr closed: status 2, and nothing on stdout."
    q, _ = small(tmp_path)
    status, out, err = shell('irbook eval "$1" missing -m map 2>&-', tmp_path, q)
    assert (status, out) == (2, "")


# ------------------------------------------------------------ own words
def test_file_growing_while_read(tmp_path):
    q, r = big(tmp_path, 500, 100)
    # appends valid lines (a new doc id each), so the change is the file's only fault;
    # a line a millisecond: a writer that sleeps is woken at once on a busy machine (one
    # that never slept was held back for whole reads, and grew the file by megabytes)
    code = "import sys, itertools, time\nwith open(sys.argv[1], 'a') as f:\n"
    code += "    for i in itertools.count():\n"
    code += "        f.write(f'q1 Q0 x{i} 1 0.5 r\\n'); f.flush(); time.sleep(0.001)\n"
    for memory in ("0", "1"):
        size = r.stat().st_size
        w = subprocess.Popen([sys.executable, "-c", code, r])
        try:
            # the read starts once the writer is appending (a fixed wait was not enough
            # under load: the writer's start-up took longer)
            deadline = time.monotonic() + 60
            while r.stat().st_size == size:
                assert w.poll() is None and time.monotonic() < deadline, "no writer"
                time.sleep(0.01)
            for _ in range(5):
                p = subprocess.run(
                    [IRBOOK, "eval", q, r, "-m", "map", "--memory", memory],
                    capture_output=True,
                    text=True,
                    env=env(tmp_path),
                    timeout=60,
                )
                if p.returncode != 0:
                    break
                # 0: the file did not change during this read (on a loaded machine the
                # writer can wait out a read of a few ms); read it again
                assert "changed" not in p.stderr, p.stderr
        finally:
            w.kill()
            w.wait()
        assert p.returncode == 2, p.stderr
        one_line(p.stderr, "the file changed while it was read")
        assert "StopIteration" not in p.stderr


@pytest.mark.parametrize("mb", ["99999999999999999999", "-1"])
def test_memory_out_of_range(tmp_path, mb):
    q, r = small(tmp_path)
    status, _, err = shell(
        f'irbook eval "$1" "$2" -m map --memory {mb}', tmp_path, q, r
    )
    assert status == 2
    one_line(err, "--memory takes MB, from 0 (no limit) to")
    assert "Overflow" not in err


def test_memory_huge_but_in_range(tmp_path):
    "A budget far above the machine's memory reads the file (no MemoryError)."
    status, out, err = shell(
        'irbook eval "$1" "$2" -m map --memory 1000000000', tmp_path, *small(tmp_path)
    )
    assert (status, err) == (0, ""), err


@pytest.mark.parametrize("memory", ["0", "1", "512"])
def test_pipe(tmp_path, memory):
    "A run through a pipe, whole or streamed: read once, never sought."
    q, r = small(tmp_path)
    script = f'irbook eval "$1" <(cat "$2") -m map --memory {memory}'
    status, out, err = shell(script, tmp_path, q, r)
    assert (status, err) == (0, ""), err
    assert "1.0000" in out


# ------------------------------------------------------------ compression
COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


@pytest.mark.parametrize("ext", list(COMPRESS))
def test_compressed(tmp_path, ext):
    "By suffix, by first bytes (no suffix), through a pipe; qrels too; cut short named."
    pack = COMPRESS[ext]
    (tmp_path / f"q{ext}").write_bytes(pack(QRELS))
    (tmp_path / f"r{ext}").write_bytes(pack(RUN))
    (tmp_path / "nosuffix").write_bytes(pack(RUN))
    (tmp_path / "plain").write_bytes(RUN)
    (tmp_path / f"cut{ext}").write_bytes(pack(RUN * 50)[:-30])
    for script in (
        f'irbook eval "$1" "$2" r{ext} nosuffix -m map',
        f'irbook eval "$1" "$2" <(cat r{ext}) -m map --memory 0',
        f'irbook eval "$1" "$2" <(cat r{ext}) -m map',
    ):
        status, out, err = shell(script, tmp_path, f"q{ext}", "plain")
        # two queries: only the statistics' note that intervals need three
        note = "irbook eval: note: the intervals hold their level from 3 queries"
        assert status == 0 and err in ("", f"{note} (2 here)\n"), (script, err)
        assert out.count("1.0000") >= 2, out
    status, _, err = shell(f'irbook eval "$1" cut{ext} -m map', tmp_path, f"q{ext}")
    assert status == 2
    one_line(err, "or cut short")


def test_zst(tmp_path):
    pytest.importorskip("zstandard")
    import zstandard

    q, r = small(tmp_path)
    (tmp_path / "r.zst").write_bytes(zstandard.ZstdCompressor().compress(RUN))
    status, out, err = shell('irbook eval "$1" r.zst -m map', tmp_path, q)
    assert (status, err) == (0, ""), err


def test_zst_without_zstandard(tmp_path):
    "Without zstandard a .zst file is refused by name, with the extra to install."
    hide = tmp_path / "hide" / "zstandard"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('hidden for the test')\n")
    q, _ = small(tmp_path)
    (tmp_path / "r.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 20)
    r = subprocess.run(
        [IRBOOK, "eval", q, tmp_path / "r.zst", "-m", "map"],
        capture_output=True,
        text=True,
        env=env(tmp_path, PYTHONPATH=f"{tmp_path / 'hide'}:{ROOT}"),
    )
    assert r.returncode == 2
    one_line(r.stderr, "install irbook[zstd]")


# ------------------------------------------------------------ start-up
# the console script as pip writes it, with a mark once `irbook.entry` is imported: a
# signal during Python's own start-up (site, .pth files) is Python's, not the command's
SCRIPT = (
    "import sys\nfrom irbook.entry import command\nopen(sys.argv.pop(1), 'w').close()\n"
    "sys.exit(command())\n"
)


def started(mark: Path, timeout: float = 20):
    "Wait until the command has begun (its mark exists)."
    t0 = time.monotonic()
    while not mark.exists() and time.monotonic() - t0 < timeout:
        time.sleep(0.005)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_import(tmp_path, sig):
    "A signal while the console script imports the command line: one line, its status."
    q, r = small(tmp_path)
    mark = tmp_path / "started"
    p = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mark, "eval", q, r, "-m", "map"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(tmp_path),
    )
    started(mark)
    time.sleep(0.02)  # inside the imports (numpy, pyarrow: a tenth of a second or more)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    if p.returncode != 0:  # 0: the machine was fast, the command ended before it
        assert p.returncode == -sig, err  # by the signal: the shell shows 128 + sig
        word = "interrupted" if sig == signal.SIGINT else "terminated"
        assert err.decode() == f"irbook eval: {word}\n"
        assert out == b""
    assert list((tmp_path / "tmp").iterdir()) == []


def test_sigint_during_import_in_shell(tmp_path):
    "In the shell: status 130 and one line."
    q, r = small(tmp_path)
    # set -m: a job started with & does not ignore SIGINT, as in an interactive shell
    script = f'set -m; {sys.executable} -c "$3" "$4" eval "$1" "$2" -m map & '
    script += 'while [ ! -e "$4" ]; do sleep 0.005; done; kill -INT $!; wait $!'
    status, out, err = shell(script, tmp_path, q, r, SCRIPT, tmp_path / "started")
    assert status in (0, 130), err
    if status == 130:
        assert out == "" and err.startswith("irbook eval: interrupted\n"), err
        assert "Traceback" not in err  # the rest is the shell's own job report


def test_version_without_imports(tmp_path):
    "--version imports nothing of the command line."
    code = SCRIPT.replace("sys.exit(command())", "command(); print(list(sys.modules))")
    r = subprocess.run(
        [sys.executable, "-c", code, tmp_path / "m", "--version"],
        capture_output=True,
        text=True,
        env=env(tmp_path),
    )
    assert r.returncode == 0 and r.stdout.startswith("irbook "), r.stderr
    assert "numpy" not in r.stdout.splitlines()[1]
