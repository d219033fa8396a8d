"""Bad or unusual inputs to `irbook eval`: each case writes a qrels and a run file, runs
the command in a fresh process and checks its exit status (0, or 2 with exactly one
line on stderr naming the problem), never a traceback or a NumPy repr.

Run: python -m pytest tests/test_bad_inputs.py -q
Print the table (input, exit, message): python tests/test_bad_inputs.py
"""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

QRELS = b"q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\n"
RUN = b"q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n"


def parquet(rows, columns=("q_id", "doc_id", "score")):
    "A writer of a parquet file with these rows and columns."

    def write(path):
        import pandas as pd

        pd.DataFrame(rows, columns=list(columns)).to_parquet(path)

    return write


def chmod000(data):
    def write(path):
        path.write_bytes(data)
        path.chmod(0)

    return write


def folder(path):
    path.mkdir()


def missing(path):
    pass


# name: (qrels file name, its content, run file name, its content, exit, message part)
# content: bytes, or a function writing the file at a path
CASES = {
    # ---------------------------------------------------------------- runs
    "run: fine": ("q", QRELS, "r.trec", RUN, 0, ""),
    "run: empty file": ("q", QRELS, "r.trec", b"", 2, "holds no results"),
    "run: only comments": ("q", QRELS, "r.trec", b"# a\n  # b\n", 2, "no results"),
    "run: UTF-8 BOM": ("q", QRELS, "r.trec", b"\xef\xbb\xbf" + RUN, 0, ""),
    "run: CRLF": ("q", QRELS, "r.trec", RUN.replace(b"\n", b"\r\n"), 0, ""),
    "run: tabs": ("q", QRELS, "r.trec", RUN.replace(b" ", b"\t"), 0, ""),
    "run: tab then two spaces (the issue)": (
        "q",
        QRELS,
        "r.trec",
        b"q1 Q0\td1 1  2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n",
        0,
        "",
    ),
    "run: \\v and \\f separators": (
        "q",
        QRELS,
        "r.trec",
        RUN.replace(b" Q0 ", b"\x0bQ0\x0c"),
        0,
        "",
    ),
    "run: comments and blank lines": (
        "q",
        QRELS,
        "r.trec",
        b"# header\n\n" + RUN + b"   \n\t# trailer\n",
        0,
        "",
    ),
    "run: fields after the tag": (
        "q",
        QRELS,
        "r.trec",
        RUN.replace(b" r\n", b" r 7 extra\n"),
        0,
        "",
    ),
    "run: trailing spaces": ("q", QRELS, "r.trec", RUN.replace(b"\n", b"  \n"), 0, ""),
    "run: lone CR inside a line (a space, as trec_eval)": (
        "q",
        QRELS,
        "r.trec",
        b"q1 Q0 d1 1 2.0 r\rq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n",
        0,
        "",
    ),
    "run: unicode ids": (
        "q",
        "q1 0 文書 1\nq2 0 é 1\n".encode(),
        "r.trec",
        "q1 Q0 文書 1 2.0 r\nq2 Q0 é 1 1.0 r\n".encode(),
        0,
        "",
    ),
    "run: 5-field line": ("q", QRELS, "r.trec", b"q1 Q0 d1 1 2.0\n", 2, "6 fields"),
    "run: non-numeric score": (
        "q",
        QRELS,
        "r.trec",
        b"q1 Q0 d1 1 high r\n",
        2,
        "not a number",
    ),
    "run: hex score": (
        "q",
        QRELS,
        "r.trec",
        b"q1 Q0 d1 1 0x1p3 r\n",
        2,
        "not a number",
    ),
    "run: nan score": ("q", QRELS, "r.trec", b"q1 Q0 d1 1 nan r\n", 2, "not finite"),
    "run: inf score": ("q", QRELS, "r.trec", b"q1 Q0 d1 1 -inf r\n", 2, "not finite"),
    "run: 1e999 score": (
        "q",
        QRELS,
        "r.trec",
        b"q1 Q0 d1 1 1e999 r\n",
        2,
        "not finite",
    ),
    "run: duplicate doc": (
        "q",
        QRELS,
        "r.trec",
        RUN + b"q1 Q0 d1 9 0.5 r\n",
        2,
        "line 4: duplicate doc id 'd1' in query 'q1'",
    ),
    "run: non-UTF-8 doc id": (
        "q",
        QRELS,
        "r.trec",
        b"q1 Q0 d\xff 1 2.0 r\n",
        2,
        "line 1: doc id b'd\\xff' is not UTF-8",
    ),
    "run: non-UTF-8 tag (ignored)": (
        "q",
        QRELS,
        "r.trec",
        RUN.replace(b" r\n", b" r\xff\n"),
        0,
        "",
    ),
    "run: NUL byte in an id (a byte like any other)": (
        "q",
        QRELS,
        "r.trec",
        RUN.replace(b" d2 ", b" d\x002 "),
        0,
        "",
    ),
    "run: queries disjoint from the qrels": (
        "q",
        QRELS,
        "r.trec",
        b"q9 Q0 d1 1 2.0 r\n",
        2,
        "do not match",
    ),
    "run: good .gz": ("q", QRELS, "r.trec.gz", gzip.compress(RUN), 0, ""),
    "run: truncated .gz": (
        "q",
        QRELS,
        "r.trec.gz",
        gzip.compress(RUN * 50)[:-30],
        2,
        "cut short (Compressed file ended",
    ),
    "run: garbage .gz": ("q", QRELS, "r.trec.gz", b"not gzip at all", 2, "gzip"),
    "run: garbage .lz4": ("q", QRELS, "r.lz4", b"\x04\x22\x4d\x18garbage", 2, ".lz4"),
    "run: garbage .json": ("q", QRELS, "r.json", b"{not json", 2, "not a ranx .json"),
    "run: .json of the wrong shape": ("q", QRELS, "r.json", b"[1, 2]", 2, "maps query"),
    "run: .json with a word as score": (
        "q",
        QRELS,
        "r.json",
        json.dumps({"q1": {"d1": "high"}}).encode(),
        2,
        "r.json",
    ),
    "run: .json with NaN score": (
        "q",
        QRELS,
        "r.json",
        b'{"q1": {"d1": NaN}, "q2": {"d3": 1.0}}',
        2,
        "not a finite score",
    ),
    "run: good .json": (
        "q",
        QRELS,
        "r.json",
        json.dumps({"q1": {"d1": 2.0}, "q2": {"d3": 1.0}}).encode(),
        0,
        "",
    ),
    "run: good parquet": (
        "q",
        QRELS,
        "r.parquet",
        parquet([("q1", "d1", 2.0), ("q2", "d3", 1.0)]),
        0,
        "",
    ),
    "run: parquet missing a column": (
        "q",
        QRELS,
        "r.parquet",
        parquet([("q1", "d1")], ("q_id", "doc_id")),
        2,
        "no column ['score']",
    ),
    "run: parquet with nulls": (
        "q",
        QRELS,
        "r.parquet",
        parquet([("q1", None, 2.0)]),
        2,
        "missing values",
    ),
    "run: not parquet": ("q", QRELS, "r.parquet", b"PAR1 nope", 2, "r.parquet"),
    "run: a folder": ("q", QRELS, "r.trec", folder, 2, "Is a directory"),
    "run: missing file": ("q", QRELS, "r.trec", missing, 2, "No such file"),
    "run: unreadable file": ("q", QRELS, "r.trec", chmod000(RUN), 2, "Permission"),
    # ---------------------------------------------------------------- qrels
    "qrels: empty file": ("q", b"", "r.trec", RUN, 2, "holds no judgements"),
    "qrels: BOM and CRLF": (
        "q",
        b"\xef\xbb\xbf" + QRELS.replace(b"\n", b"\r\n"),
        "r.trec",
        RUN,
        0,
        "",
    ),
    "qrels: comments and blank lines": (
        "q",
        b"# judged by hand\n\n" + QRELS,
        "r.trec",
        RUN,
        0,
        "",
    ),
    "qrels: 3 fields": ("q", b"q1 0 d1\n", "r.trec", RUN, 2, "4 fields"),
    "qrels: 5 fields (trec_eval refuses them too)": (
        "q",
        b"q1 0 d1 1 x\n",
        "r.trec",
        RUN,
        2,
        "4 fields",
    ),
    "qrels: float label 1.5": (
        "q",
        b"q1 0 d1 1.5\n",
        "r.trec",
        RUN,
        2,
        "not an integer",
    ),
    "qrels: float label 1.0": (
        "q",
        b"q1 0 d1 1.0\n",
        "r.trec",
        RUN,
        2,
        "not an integer",
    ),
    "qrels: word label": ("q", b"q1 0 d1 rel\n", "r.trec", RUN, 2, "not an integer"),
    "qrels: huge label": (
        "q",
        b"q1 0 d1 99999999999999999999\n",
        "r.trec",
        RUN,
        2,
        "too large",
    ),
    "qrels: negative label": (
        "q",
        QRELS + b"q2 0 d9 -1\n",
        "r.trec",
        RUN,
        0,
        "",
    ),
    "qrels: duplicate doc": (
        "q",
        QRELS + b"q1 0 d1 0\n",
        "r.trec",
        RUN,
        2,
        "line 4: duplicate doc id",
    ),
    "qrels: truncated .gz": (
        "q.gz",
        gzip.compress(QRELS * 50)[:-30],
        "r.trec",
        RUN,
        2,
        "gzip",
    ),
    "qrels: parquet with nulls": (
        "q.parquet",
        parquet([("q1", "d1", None)]),
        "r.trec",
        RUN,
        2,
        "missing values",
    ),
    "qrels: missing file": ("q", missing, "r.trec", RUN, 2, "No such file"),
    "qrels: a folder": ("q", folder, "r.trec", RUN, 2, "Is a directory"),
}


# rows whose message is made outside the reading layer: for that layer's owner to fix
NOT_OURS: dict = {}  # cases whose message another layer words (none left)


def write(path: Path, content):
    if callable(content):
        content(path)
    else:
        path.write_bytes(content)


def run_case(tmp: Path, name: str):
    "(exit status, stderr) of `irbook eval` on the case's files."
    qname, qcontent, rname, rcontent, *_ = CASES[name]
    qp, rp = tmp / qname, tmp / rname
    write(qp, qcontent)
    write(rp, rcontent)
    code = "import sys; from irbook.cli import command; command()"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(
        [sys.executable, "-c", code, "eval", qp, rp, "-m", "map", "ndcg@10"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
    )
    return r.returncode, r.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(tmp_path, name):
    if "unreadable" in name and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    status, err = run_case(tmp_path, name)
    want, part = CASES[name][4:]
    if name in NOT_OURS and ("Traceback" in err or "np.str_" in err):
        pytest.xfail(NOT_OURS[name])  # passes, and is seen to, once it is fixed
    assert "Traceback" not in err and "np.str_" not in err, err
    assert status == want, err
    if status == 2:
        assert len(err.splitlines()) == 1 and err.startswith("irbook eval: error: "), (
            err
        )
        assert part in err, err


if __name__ == "__main__":  # the table of the issue note
    import tempfile

    print("| input | exit | message |\n|---|---|---|")
    for name in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            status, err = run_case(Path(tmp), name)
        msg = err.strip().replace(tmp, "tmp").replace("|", "\\|").replace("\n", " ⏎ ")
        print(f"| {name} | {status} | {msg[:200]} |")


@pytest.mark.parametrize("content", [b"", b"\n", b"\r\n\n"])
def test_no_rows_never_reach_pyarrow(tmp_path, monkeypatch, content):
    "A file without rows never reaches pyarrow's threaded CSV reader."
    # on an empty input it can abort the process at exit (apache/arrow#38676): before
    # this check, `irbook eval` on an empty qrels file exited 134 in 19 runs of 20
    import pyarrow.csv

    from irbook.metrics.io import read_columns

    def refuse(*a, **k):
        raise AssertionError("pyarrow.csv.read_csv called on a file without rows")

    monkeypatch.setattr(pyarrow.csv, "read_csv", refuse)
    (tmp_path / "q").write_bytes(content)
    with pytest.raises(ValueError, match="holds no judgements"):
        read_columns(tmp_path / "q", "qrels")


@pytest.mark.slow
def test_empty_qrels_never_aborts(tmp_path):
    "irbook eval on an empty qrels file, 30 times: exit 2 every time (was 134 in most)."
    codes = [run_case(tmp_path, "qrels: empty file")[0] for _ in range(30)]
    assert set(codes) == {2}, codes
