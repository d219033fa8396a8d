"""`irbook eval` on unjudged documents: `-m judged@k`, `-J/--judged-only`, `--bounds`,
`--holes K`; each equals the library (or trec_eval -J), bad combinations are one line
on stderr with exit status 2."""

import json

import pytest
from test_cli import RUNS, cli, files, write_run  # noqa: F401 (files is a fixture)
from test_trec_eval import SRC, run_trec_eval

import irbook.metrics as M
from irbook.unjudged import bounds, holes


def test_judged_at_k_through_the_registry(files, capsys):  # noqa: F811
    qrels, runs = files
    status, out, err = cli(
        capsys, "eval", qrels, runs[1], "-m", "judged@2", "P_2", "--format", "json"
    )
    assert status == 0 and err == ""
    want = M.evaluate(M.read_qrels(qrels), RUNS["dense"], ["judged@2", "P_2"])
    assert json.loads(out) == pytest.approx(want, abs=1e-12)
    assert want["judged@2"] < 1  # dense retrieved z for q2: unjudged


@pytest.mark.parametrize("flag", ["-J", "--judged-only"])
def test_judged_only_equals_evaluate(files, capsys, flag):  # noqa: F811
    qrels, runs = files
    ms = ["mrr", "P_1", "ndcg@2"]
    status, out, err = cli(
        capsys, "eval", qrels, runs[1], "-m", *ms, flag, "--format", "json"
    )
    assert status == 0 and err == ""
    q = M.read_qrels(qrels)
    want = M.evaluate(q, RUNS["dense"], ms, judged_only=True)
    assert json.loads(out) == pytest.approx(want, abs=1e-12)
    assert want != M.evaluate(q, RUNS["dense"], ms)  # -J changed something


def test_judged_only_equals_trec_eval_J(trec_eval, capsys):  # noqa: F811
    "On trec_eval's own test files, the command's -J output is trec_eval -J's."
    folder = SRC / "test"
    qp, rp = folder / "qrels.rel_level", folder / "results.test"
    ms = ["map", "P_10", "ndcg_cut_10", "recip_rank", "bpref", "num_ret"]
    args = ["-J", *[x for m in ms for x in ("-m", m.replace("_1", ".1"))]]
    exp = run_trec_eval(trec_eval, args, qp, rp)  # -m P.10 prints P_10
    args = ["--convention", "trec_eval", "-J", "--format", "json"]
    status, out, err = cli(capsys, "eval", qp, rp, "-m", *ms, *args)
    assert status == 0, err
    got = json.loads(out)
    for m in ms:
        assert got[m] == pytest.approx(float(exp[m]["all"]), abs=0.5e-4), m


def test_bounds_equal_the_library(files, capsys):  # noqa: F811
    qrels, runs = files
    ms = ["P_2", "mrr", "ndcg@2"]
    status, out, err = cli(
        capsys, "eval", qrels, *runs[:2], "--bounds", "-m", *ms, "--format", "json"
    )
    assert status == 0 and err == ""
    rows = json.loads(out)
    q = M.read_qrels(qrels)
    assert [(r["run"], r["metric"]) for r in rows] == [
        (n, m) for n in ("bm25", "dense") for m in ms
    ]
    for r in rows:
        b = bounds(q, RUNS[r["run"]], ms).loc[r["metric"]]
        assert (r["lower"], r["upper"]) == pytest.approx((b.lower, b.upper), abs=1e-6)
        assert r["bound"] == bool(b.bound)


def test_bounds_per_query_and_text(files, capsys):  # noqa: F811
    qrels, runs = files
    status, out, _ = cli(capsys, "eval", qrels, runs[0], "--bounds", "-m", "P_1", "-q")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == ["run", "query_id", "P_1", "lower", "P_1", "upper"]
    assert len(lines) == 1 + 3  # one row per query
    status, out, _ = cli(capsys, "eval", qrels, runs[0], "--bounds", "-m", "P_1")
    assert status == 0 and out.split()[:6] == [
        "run", "metric", "lower", "upper", "width", "bound",
    ]  # fmt: skip


def test_holes_report(files, capsys):  # noqa: F811
    qrels, runs = files
    status, out, err = cli(
        capsys, "eval", qrels, runs[0], "--holes", "3", "--format", "json"
    )
    assert status == 0 and err == ""
    rows = json.loads(out)
    want = holes(M.read_qrels(qrels), RUNS["bm25"], 3)
    assert [r["query_id"] for r in rows] == list(want.index)
    for r in rows:
        w = want.loc[r["query_id"]]
        assert r["to_judge"] == " ".join(w.to_judge)
        assert (r["judged"], r["unjudged"], r["first_hole"]) == (
            w.judged, w.unjudged, w.first_hole,
        )  # fmt: skip
    assert rows[-1]["to_judge"] == "x"  # bm25's q3: x, never judged


def test_holes_of_a_ranx_file(files, capsys, tmp_path):  # noqa: F811
    "Runs in ranx's .json format go through the same report."
    qrels, _ = files
    p = tmp_path / "dense.json"
    p.write_text(json.dumps(RUNS["dense"]))
    status, out, err = cli(capsys, "eval", qrels, p, "--holes", "2", "--format", "csv")
    assert status == 0, err
    assert out.splitlines()[0].startswith("run,query_id,retrieved,judged,unjudged")
    assert "dense,q2,2,1,1,1,0.5,1,z" in out


@pytest.mark.parametrize(
    "flags,words",
    [
        (["--holes", "0"], "positive integer"),
        (["--holes", "x"], "positive integer"),
        (["--bounds", "--holes", "3"], "use one of"),
        (["--bounds", "-J"], "use one of"),
        (["--holes", "3", "-J"], "use one of"),
        (["--bounds", "-m", "judged@10"], "no bounds"),
        (["--bounds", "--format", "trec"], "--format trec"),
    ],
    ids=str,
)
def test_bad_combinations_are_one_line(files, capsys, flags, words):  # noqa: F811
    qrels, runs = files
    status, out, err = cli(capsys, "eval", qrels, runs[0], *flags)
    assert status == 2 and out == ""
    assert words in err and err.count("\n") == 1, err


def test_duplicate_run_names_refused(files, capsys, tmp_path):  # noqa: F811
    qrels, runs = files
    other = tmp_path / "again"
    other.mkdir()
    twin = write_run(other / "bm25.trec", RUNS["bm25"])
    status, _, err = cli(capsys, "eval", qrels, runs[0], twin, "--holes", "2")
    assert status == 2 and "two runs are named 'bm25'" in err
