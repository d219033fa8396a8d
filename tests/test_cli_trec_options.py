"""`irbook eval` as a drop-in for trec_eval 10's command line: `-l N`, `-M N`, `-n`,
`-q`, `-c`, `-m` before the files, trec_eval's default measure set under its convention
and layout. Each output is compared line for line with trec_eval 10 itself (built from
../shared/trec_eval by the `trec_eval` fixture), on its own test files and on random
graded files with ties."""

import random
import subprocess
from pathlib import Path

import pytest

from irbook.cli import main

TEST = Path(__file__).resolve().parents[2] / "shared" / "trec_eval" / "test"
TREC = ["--convention", "trec_eval", "--format", "trec"]


def graded(tmp: Path, seed: int = 3, results: int = 15) -> tuple:
    """A graded qrels (labels 0-3, 15 queries) and a run with tied scores for the
    first `results` of them (trec_eval 10 refuses a judged query without results
    unless -c)."""
    rnd = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(40)]
    q = [
        f"q{i} 0 {d} {rnd.choice([0, 0, 1, 2, 3])}"
        for i in range(15)
        for d in rnd.sample(docs, 20)
    ]
    r = [
        f"q{i} Q0 {d} {k} {rnd.randint(1, 8)} tag"
        for i in range(results)
        for k, d in enumerate(rnd.sample(docs, 30), 1)
    ]
    (tmp / "g.qrels").write_text("\n".join(q) + "\n")
    (tmp / "g.run").write_text("\n".join(r) + "\n")
    return tmp / "g.qrels", tmp / "g.run"


def ours(capsys, *args) -> list:
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    assert status == 0, out.err
    return out.out.splitlines()


def theirs(trec_eval, *args) -> list:
    p = subprocess.run(
        [str(trec_eval), *map(str, args)], capture_output=True, text=True, check=True
    )
    return p.stdout.splitlines()


OPTIONS = [
    ["-l", "2", "-m", "P.5,10", "-m", "map", "-m", "recall.10"],
    ["-l2", "-m", "bpref", "-m", "Rprec", "-m", "num_rel_ret", "-m", "recip_rank"],
    ["-l", "3", "-m", "ndcg_cut.10", "-m", "map"],  # ndcg ignores -l in trec_eval
    ["-M", "5", "-m", "map", "-m", "P.10", "-m", "num_ret", "-m", "recall.20"],
    ["-M", "1", "-m", "num_ret", "-m", "recip_rank", "-m", "bpref"],
    ["-q", "-m", "map", "-m", "P.5"],
    ["-q", "-n", "-m", "map", "-m", "P.5"],
    ["-n", "-m", "map"],  # no summary and no per-query rows: nothing at all
    ["-c", "-m", "map", "-m", "num_q"],
    ["-c", "-q", "-l", "2", "-M", "10", "-m", "map", "-m", "P.5"],
]


@pytest.mark.parametrize("options", OPTIONS, ids=" ".join)
def test_options_equal_trec_eval_on_graded_files(trec_eval, tmp_path, capsys, options):
    q, r = graded(tmp_path, results=14 if "-c" in options else 15)
    want = theirs(trec_eval, *options, q, r)
    assert ours(capsys, "eval", *options, q, r, *TREC) == want


def test_options_after_the_files(trec_eval, tmp_path, capsys):
    "irbook's own order, options after the files, prints the same lines."
    q, r = graded(tmp_path)
    want = theirs(trec_eval, "-q", "-l2", "-M", "7", "-m", "map", q, r)
    got = ours(capsys, "eval", q, r, "-m", "map", "-q", "-l2", "-M", "7", *TREC)
    assert got == want


def test_default_is_official(trec_eval, tmp_path, capsys):
    "No -m under trec_eval's convention and layout: its 'official' set, its lines."
    q, r = graded(tmp_path)
    assert ours(capsys, "eval", q, r, *TREC) == theirs(trec_eval, q, r)
    assert ours(capsys, "eval", "-q", q, r, *TREC) == theirs(trec_eval, "-q", q, r)


def test_default_elsewhere_is_irbooks(tmp_path, capsys):
    "The defaults stay irbook's in every other layout or convention."
    q, r = graded(tmp_path)
    got = ours(capsys, "eval", q, r, "--convention", "trec_eval", "--format", "csv")
    assert [line.split(",")[2] for line in got[1:] if line] == [
        "ndcg@10",
        "mrr@10",
        "recall@100",
    ]


@pytest.mark.skipif(not (TEST / "qrels.test").exists(), reason="no trec_eval tests")
@pytest.mark.parametrize(
    "options",
    [["-l2", "-m", "map", "-m", "P.10"], ["-M", "20", "-m", "map", "-m", "num_ret"]],
    ids=" ".join,
)
def test_options_on_trec_evals_test_suite(trec_eval, capsys, options):
    q, r = TEST / "qrels.test", TEST / "results.test"
    want = theirs(trec_eval, *options, q, r)
    assert ours(capsys, "eval", *options, q, r, *TREC) == want


def test_level_keeps_the_names(tmp_path, capsys):
    "-l scores every measure at that level, each printed under the name it was given."
    q, r = graded(tmp_path)
    got = ours(capsys, "eval", q, r, "-m", "P_5", "map", "-l", "2", "--format", "csv")
    plain = ours(capsys, "eval", q, r, "-m", "P_5-l2", "map-l2", "--format", "csv")
    assert [x.split(",")[2] for x in got[1:] if x] == ["P_5", "map"]
    assert [x.split(",")[4:] for x in got[1:] if x] == [
        x.split(",")[4:] for x in plain[1:] if x
    ]


def test_bad_values_one_line(tmp_path, capsys):
    q, r = graded(tmp_path)
    for args, words in [
        (["-l", "x"], "must be a non-negative integer"),
        (["-M", "0"], "must be a positive integer"),
        (["-n"], "-n/--nosummary leaves the per-query rows only"),
    ]:
        status = main(["eval", str(q), str(r), "-m", "map", *args])
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize(
    "given", [["set_F.0.5"], ["set_F.2", "-q"], ["set_F.1.0"], ["set_F.1e-1", "-l2"]]
)
def test_weighted_set_f_equals_trec_eval(trec_eval, tmp_path, capsys, given):
    "set_F.x (recall weighted x against precision): trec_eval's lines and names."
    q, r = graded(tmp_path)
    m, *options = given
    want = theirs(trec_eval, *options, "-m", m, q, r)
    assert len(want) > 1 or "-q" not in options
    assert ours(capsys, "eval", *options, "-m", m, q, r, *TREC) == want
