"""`--format trec --convention trec_eval`: the summary ("all") lines as trec_eval 10
prints them, digit for digit (issue 27). trec_eval adds the per-query values up in its
order (the qrels' query ids, sorted by strcmp) in a C double, then divides; `np.mean`
adds pairwise, and on some files the two round to different 4th decimals.

Run: python -m pytest tests/test_cli_trec_sum.py -q
"""

import contextlib
import io
import subprocess

import numpy as np

from irbook.cli import _trec_eval_total, main

# P_10 hits of 32 queries: 130 / 320 = 0.40625 exactly, a rounding boundary; added in
# query order the double lies above it (0.4063), added pairwise below it (0.4062)
HITS = [8, 0, 1, 2, 0, 8, 10, 0, 0, 9, 1, 10, 7, 7, 6, 5,
        6, 0, 3, 2, 0, 2, 9, 1, 3, 3, 3, 0, 7, 5, 3, 9]  # fmt: skip


def files(tmp_path):
    "Qrels and a run in which query i has HITS[i] relevant documents in its top 10."
    q, r = [], []
    for i, h in enumerate(HITS):
        qid = f"q{i:02d}"
        q.append(f"{qid} 0 unretrieved 1\n")  # every query judged, 0 hits or not
        q += [f"{qid} 0 d{k} {int(k < h)}\n" for k in range(10)]
        r += [f"{qid} Q0 d{k} {k + 1} {10 - k}.0 tagged\n" for k in range(10)]
    (tmp_path / "qrels").write_text("".join(q))
    (tmp_path / "run").write_text("".join(r))
    return tmp_path / "qrels", tmp_path / "run"


def irbook(*args) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in args])
    assert status == 0, err.getvalue()
    return out.getvalue()


def test_the_case_rounds_apart():
    "The file is a real test: the two ways of adding up print different digits."
    v = [h / 10 for h in HITS]
    assert sum(HITS) == 130
    assert f"{np.mean(v):.4f}" == "0.4062"
    assert f"{_trec_eval_total('P_10', v):.4f}" == "0.4063"


def test_summary_as_trec_eval(tmp_path, trec_eval):
    q, r = files(tmp_path)
    ref = subprocess.run(
        [trec_eval, "-m", "P.10", q, r], capture_output=True, text=True, check=True
    ).stdout
    assert ref.split() == ["P_10", "all", "0.4063"]
    for extra in ([], ["-q"]):
        out = irbook("eval", q, r, "-m", "P_10", *extra, "--format", "trec",
                     "--convention", "trec_eval")  # fmt: skip
        assert "P_10                  \tall\t0.4063" in out.splitlines(), out
    ref = subprocess.run(
        [trec_eval, "-q", "-m", "P.10", q, r], capture_output=True, text=True
    ).stdout
    lines = [x for x in out.splitlines() if not x.startswith(("runid", "num_q"))]
    assert lines == ref.splitlines()


def test_other_outputs_keep_their_means(tmp_path):
    "A table or JSON keeps the mean it always printed (only trec_eval's layout sums)."
    q, r = files(tmp_path)
    assert '"P_10": 0.40625' in irbook("eval", q, r, "-m", "P_10", "--format", "json")
