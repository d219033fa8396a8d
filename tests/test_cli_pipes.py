"""`irbook eval` reads a pipe once and keeps what it says (the run tag), and checks its
arguments before it reads any file, leaving them as they were (issue 27).

Run: python -m pytest tests/test_cli_pipes.py -q
"""

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from irbook.cli import parser, run_eval

ROOT = Path(__file__).resolve().parents[1]
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n"
RUN = "q1 Q0 d1 1 2.0 mytag\nq1 Q0 d2 2 1.0 mytag\nq2 Q0 d3 1 1.0 mytag\n"


def files(tmp_path):
    (tmp_path / "q").write_text(QRELS)
    (tmp_path / "run.trec").write_text(RUN)
    return tmp_path / "q", tmp_path / "run.trec"


def shell(script: str, tmp_path, *args) -> subprocess.CompletedProcess:
    exe = f"{sys.executable} -c 'import sys; from irbook.entry import command; "
    exe += "sys.exit(command())'"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    return subprocess.run(
        ["bash", "-c", script.replace("irbook", exe), "bash", *map(str, args)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("memory", ["0", "512"])
def test_trec_layout_keeps_a_pipes_tag(tmp_path, memory):
    q, r = files(tmp_path)
    fmt = f"-m runid map --format trec --convention trec_eval --memory {memory}"
    piped = shell(f'irbook eval "$1" <(cat "$2") {fmt}', tmp_path, q, r)
    plain = shell(f'irbook eval "$1" "$2" {fmt}', tmp_path, q, r)
    assert (piped.returncode, piped.stderr) == (0, ""), piped.stderr
    assert piped.stdout.splitlines()[0].split() == ["runid", "all", "mytag"]
    assert piped.stdout == plain.stdout


def test_stdin_keeps_its_tag_and_name(tmp_path):
    q, r = files(tmp_path)
    got = shell('irbook eval "$1" - -m map --format trec < "$2"', tmp_path, q, r)
    assert got.stdout.splitlines()[0].split() == ["runid", "all", "mytag"]
    got = shell('irbook eval "$1" - -m map < "$2"', tmp_path, q, r)
    assert "stdin" in got.stdout


def test_a_pipes_error_names_the_pipe(tmp_path):
    q, _ = files(tmp_path)
    got = shell('irbook eval "$1" <(echo "q1 Q0 d1 1 x mytag") -m map', tmp_path, q)
    assert got.returncode == 2
    assert "/dev/fd/" in got.stderr and "irbook-stdin" not in got.stderr, got.stderr


def args(*argv):
    return parser().parse_args(["eval", *map(str, argv)])


@pytest.mark.parametrize(
    "extra, words",
    [
        (["-m", "nosuch"], "unknown metric"),
        (["--memory", "-1"], "--memory takes MB"),
        (["--baseline", "other"], "--baseline 'other' is not a run"),
        (["--scheduler", "sync"], "--scheduler goes with --engine dask"),
        (["--bounds", "--format", "trec"], "--format trec has none"),
    ],
)
def test_arguments_checked_before_any_file_is_read(tmp_path, extra, words):
    "A missing qrels file is not what is reported: the bad argument is."
    a = args(tmp_path / "missing", tmp_path / "missing.trec", *extra)
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        run_eval(a)


def test_run_eval_leaves_its_arguments(tmp_path):
    q, r = files(tmp_path)
    for argv in (
        [q, r],
        [q, r, "-m", "official", "--convention", "trec_eval"],
        [q, "-", "-q"],
    ):
        a = args(*argv)
        before = dict(vars(a))
        with contextlib.redirect_stderr(io.StringIO()):
            if "-" in map(str, argv):  # stdin: a file in its place
                sys_stdin = sys.stdin
                sys.stdin = io.TextIOWrapper(io.BytesIO(RUN.encode()))
                try:
                    run_eval(a)
                finally:
                    sys.stdin = sys_stdin
            else:
                run_eval(a)
        assert vars(a) == before


def test_no_file_left(tmp_path):
    "The copies of pipes and standard input are removed."
    q, r = files(tmp_path)
    (tmp_path / "tmp").mkdir()
    script = 'TMPDIR="$3" irbook eval "$1" <(cat "$2") - -m map < "$2"'
    got = shell(script, tmp_path, q, r, tmp_path / "tmp")
    assert got.returncode == 0, got.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert shutil.which("bash")
