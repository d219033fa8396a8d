"""`irbook eval`: values equal the library's, comparisons, formats, and bad input as one
line on stderr with exit status 2."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import irbook.metrics as M
from irbook.cli import main, score_runs
from irbook.compare import compare, render
from irbook.stats import holm

QRELS = "q1 0 a 1\nq1 0 b 0\nq1 0 c 2\nq2 0 d 1\nq3 0 e 1\nq3 0 f 1\n"
RUNS = {
    "bm25": {"q1": {"b": 3.0, "a": 2.0, "c": 1.0}, "q2": {"d": 1.0}, "q3": {"x": 1.0}},
    "dense": {"q1": {"c": 3.0, "a": 2.0}, "q2": {"z": 2.0, "d": 1.0}, "q3": {"e": 2.0}},
    "hybrid": {
        "q1": {"a": 1.0, "c": 1.0},
        "q2": {"d": 5.0},
        "q3": {"f": 1.0, "e": 1.0},
    },
}


def write_run(path, run, tag="sys"):
    lines = [
        f"{q} Q0 {d} {i} {s} {tag}"
        for q, docs in run.items()
        for i, (d, s) in enumerate(docs.items(), 1)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels.trec").write_text(QRELS)
    runs = [write_run(tmp_path / f"{n}.trec", r, n) for n, r in RUNS.items()]
    return tmp_path / "qrels.trec", runs


def cli(capsys, *args):
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_one_run_json_equals_evaluate(files, capsys):
    qrels, runs = files
    ms = ["ndcg@10", "mrr", "map", "recall@2", "precision@1"]
    status, out, err = cli(
        capsys, "eval", qrels, runs[0], "-m", *ms, "--format", "json"
    )
    assert status == 0 and err == ""
    want = M.evaluate(M.read_qrels(qrels), RUNS["bm25"], ms)
    assert json.loads(out) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("convention", ["trec_eval", "pytrec_eval"])
def test_convention_flag(files, capsys, convention):
    "--convention scores as evaluate(convention=...) does; ranx by default."
    qrels, runs = files
    args = ("eval", qrels, runs[2], "-m", "mrr", "P_1", "--format", "json")
    _, ranx_out, _ = cli(capsys, *args)
    _, conv_out, _ = cli(capsys, *args, "--convention", convention)
    q = M.read_qrels(qrels)
    want = M.evaluate(q, RUNS["hybrid"], ["mrr", "P_1"], convention=convention)
    assert json.loads(conv_out) == pytest.approx(want)
    assert json.loads(ranx_out) == pytest.approx(
        M.evaluate(q, RUNS["hybrid"], ["mrr", "P_1"])
    )


def test_no_ties_flag(files, capsys):
    "--ties is not an option: --convention names the rules."
    qrels, runs = files
    status, out, err = cli(capsys, "eval", qrels, runs[2], "--ties", "trec_eval")
    assert status == 2 and out == "" and "--ties" in err, err


def test_official_expands_to_trec_evals_default_set(files, capsys):
    qrels, runs = files
    status, out, _ = cli(
        capsys, "eval", qrels, runs[0], "-m", "official", "--format", "json"
    )
    assert status == 0 and list(json.loads(out)) == list(M.OFFICIAL)


def test_per_query_csv(files, capsys):
    qrels, runs = files
    status, out, _ = cli(
        capsys, "eval", qrels, runs[1], "-m", "mrr", "-q", "--format", "csv"
    )
    rows = dict(line.split(",") for line in out.strip().splitlines()[1:])
    per_q = M.evaluate(M.read_qrels(qrels), RUNS["dense"], "mrr", per_query=True)
    assert status == 0 and {q: float(v) for q, v in rows.items()} == pytest.approx(
        per_q["mrr"].to_dict()
    )


@pytest.mark.parametrize("test", ["t", "fisher", "bootstrap"])
def test_comparison_holm_over_all_comparisons(files, test):
    qrels, runs = files
    ms = ["mrr", "ndcg@3"]
    # compare returns a Comparison: its long `table` has run and metric as columns
    table = compare(score_runs(M.read_qrels(qrels), runs, ms), test=test).table
    tested = table.dropna(subset=["p"])
    assert len(tested) == 2 * len(ms)  # (runs - 1) x metrics, one Holm family
    assert np.allclose(tested.p_holm, holm(tested.p.to_numpy()))
    means = table.drop_duplicates(["run", "metric"]).set_index(["run", "metric"])
    for _, row in tested.iterrows():
        run, m = row["run"], row["metric"]
        assert row["diff"] == pytest.approx(
            means.loc[(run, m), "mean"] - means.loc[("bm25", m), "mean"]
        )
        assert row["low"] <= row["diff"] <= row["high"]


def test_baseline_and_markdown_letters(files, capsys):
    qrels, runs = files
    status, out, _ = cli(
        capsys,
        "eval",
        qrels,
        *runs,
        "-m",
        "mrr",
        "--baseline",
        "dense",
        "--format",
        "md",
    )
    assert status == 0
    assert "(a) bm25" in out and "(b) dense" in out and "(c) hybrid" in out
    table = compare(
        score_runs(M.read_qrels(qrels), runs, ["mrr"]), baseline="dense"
    ).table.set_index(["run", "metric"])
    assert np.isnan(table.loc[("dense", "mrr"), "p"])  # the baseline is not tested


def test_superscripts_mark_significant_wins():
    import pandas as pd

    n = 40
    good = pd.DataFrame({"mrr": np.ones(n)}, index=[f"q{i}" for i in range(n)])
    bad = pd.DataFrame({"mrr": np.zeros(n)}, index=good.index)
    md = render(compare({"base": bad, "new": good}), "md")
    assert "1.0000<sup>a</sup>" in md  # the run beats the baseline (a)
    md = render(compare({"base": good, "new": bad}), "md")
    assert "1.0000<sup>b</sup>" in md  # the baseline beats run b
    latex = render(compare({"base": bad, "new": good}), "latex")
    assert "1.0000$^{a}$" in latex


@pytest.mark.parametrize(
    "args, message",
    [
        (["{q}", "{d}/missing.trec"], "No such file or directory"),
        (["{q}", "{d}/broken.trec"], "broken.trec, line 2"),
        (["{q}", "{r}", "-m", "ndcg@x"], "ndcg@x': k"),
        (["{q}", "{r}", "-m", "nope@10"], "unknown metric 'nope'"),
        (["{q}", "{d}/extra.trec"], "do not match"),
        (["{q}", "{r}", "{r}"], "two runs are named"),
        (["{q}", "{r}", "{r2}", "-q"], "one run"),
        (["{q}", "{r}", "--alpha", "0"], "strictly between 0 and 1"),
        (["{q}", "{r}", "--alpha", "1"], "strictly between 0 and 1"),
        (["{q}", "{r}", "--alpha", "1.5"], "strictly between 0 and 1"),
        (["{q}", "{r}", "--alpha", "nan"], "strictly between 0 and 1"),
        (["{q}", "{r}", "--alpha", "x"], "not a number"),
        (["{q}", "{r}", "--format", "xml"], "invalid choice"),
        (["{q}"], "required"),
        (["{q}", "{r}", "{r2}", "--baseline", "nope"], "'nope' is not a run"),
        (["{d}/missing.qrels", "{r}"], "missing.qrels"),
        (["{q}", "{d}/bad.trec.gz"], "bad.trec.gz: not a gzip file, or cut short"),
        (["{q}", "{d}/latin.trec"], "latin.trec, line 1: doc id b'\\xe9' is not UTF-8"),
    ],
)
def test_bad_input_one_line_exit_2(files, tmp_path, capsys, args, message):
    qrels, runs = files
    (tmp_path / "broken.trec").write_text("q1 Q0 a 1 0.9 x\nq2 Q0 c 1\n")
    (tmp_path / "bad.trec.gz").write_bytes(b"not gzip at all")
    (tmp_path / "latin.trec").write_bytes(b"q1 Q0 \xe9 1 1.0 x\n")
    write_run(tmp_path / "extra.trec", {**RUNS["bm25"], "q9": {"a": 1.0}})
    subs = dict(q=qrels, d=tmp_path, r=runs[0], r2=runs[1])
    status, out, err = cli(capsys, "eval", *[a.format(**subs) for a in args])
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("irbook eval: error: "), err
    assert message in err, err


def test_make_comparable_scores_missing_queries_as_zero(files, tmp_path, capsys):
    qrels, _ = files
    partial = write_run(tmp_path / "partial.trec", {"q1": RUNS["bm25"]["q1"]})
    args = ("eval", qrels, partial, "-m", "mrr", "--format", "json")
    assert cli(capsys, *args)[0] == 2
    status, out, _ = cli(capsys, *args, "--make-comparable")
    assert status == 0 and json.loads(out)["mrr"] == pytest.approx((1 / 2) / 3)


def test_console_script(files):
    "The installed `irbook` command (pyproject [project.scripts]) runs `irbook eval`."
    exe = shutil.which(
        "irbook", path=str(__import__("pathlib").Path(sys.executable).parent)
    )
    if exe is None:
        pytest.skip("the irbook console script is installed by `pip install -e .`")
    qrels, runs = files
    p = subprocess.run(
        [exe, "eval", str(qrels), str(runs[0]), "-m", "mrr", "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["mrr"] == pytest.approx(
        M.evaluate(M.read_qrels(qrels), RUNS["bm25"], "mrr")
    )


def test_console_script_exit_status(files, tmp_path):
    "`command` exits with main's status (2 on an error) and quietly when a pipe closes."
    exe = shutil.which(
        "irbook", path=str(__import__("pathlib").Path(sys.executable).parent)
    )
    if exe is None:
        pytest.skip("the irbook console script is installed by `pip install -e .`")
    qrels, runs = files
    bad = tmp_path / "bad.json"
    bad.write_text('{"q1": {"d1": "high"}}')
    p = subprocess.run([exe, "eval", str(qrels), str(bad)], capture_output=True)
    assert p.returncode == 2 and p.stderr.decode().count("\n") == 1, p.stderr
    # a reader that leaves after one line (`| head -1`) of an output larger than the
    # pipe's buffer: no BrokenPipeError traceback
    big_q, big_r = tmp_path / "big.qrels", tmp_path / "big.trec"
    big_q.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(5000)))
    big_r.write_text("".join(f"q{i} Q0 d{i} 1 1.0 r\n" for i in range(5000)))
    args = [exe, "eval", str(big_q), str(big_r), "-q", "-m", "mrr", "precision@1"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
    assert p.returncode == 0 and "Traceback" not in err, err


def test_parquet_files_score_like_trec_files(files, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    qrels, runs = files
    ms = ["ndcg@10", "mrr", "map"]
    cols = ["q_id", "doc_id", "score"]
    qrows = [line.split() for line in QRELS.splitlines()]
    qp, rp = tmp_path / "qrels.parquet", tmp_path / "bm25.parquet"
    pd.DataFrame([(q, d, int(v)) for q, _, d, v in qrows], columns=cols).to_parquet(qp)
    rows = [(q, d, s) for q, x in RUNS["bm25"].items() for d, s in x.items()]
    pd.DataFrame(rows, columns=cols).to_parquet(rp)
    _, want, _ = cli(capsys, "eval", qrels, runs[0], "-m", *ms, "--format", "json")
    status, got, err = cli(capsys, "eval", qp, rp, "-m", *ms, "--format", "json")
    assert status == 0 and err == "" and json.loads(got) == json.loads(want)


def test_mismatch_message_speaks_the_command_line(files, tmp_path, capsys):
    "No numpy reprs, and the option the user can pass, not the library's keyword."
    qrels, _ = files
    extra = write_run(tmp_path / "extra.trec", {**RUNS["bm25"], "q9": {"a": 1.0}})
    status, out, err = cli(capsys, "eval", qrels, extra, "-m", "mrr")
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "'q9'" in err and "np.str_" not in err
    assert "--make-comparable" in err and "make_comparable=True" not in err
    assert "extra.trec" in err  # the file is named


def test_unforeseen_errors_are_one_line_naming_the_file(files, capsys, monkeypatch):
    import irbook.cli

    def broken(*a, **k):
        raise RuntimeError("kaput")

    qrels, runs = files
    monkeypatch.setattr(irbook.cli, "evaluate", broken)
    monkeypatch.setitem(irbook.metrics.ENGINES, "stream", broken)  # the streaming path
    status, out, err = cli(capsys, "eval", qrels, runs[1], "-m", "mrr")
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("irbook eval: error: ") and "dense.trec" in err
    assert "RuntimeError: kaput" in err and "Traceback" not in err


def test_keyboard_interrupt_goes_through(files, monkeypatch):
    import irbook.cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    qrels, runs = files
    monkeypatch.setattr(irbook.cli, "evaluate", interrupted)
    monkeypatch.setitem(irbook.metrics.ENGINES, "stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["eval", str(qrels), str(runs[0]), "-m", "mrr"])


def test_help_exits_0(capsys):
    assert main(["eval", "--help"]) == 0
    assert "--alpha" in capsys.readouterr().out


# trec_eval's own output (test/out.test of trec_eval 10.0), printed `%-22s\t%s\t%6.4f`
TREC_EVAL_LINE = "map                   \tall\t0.1785"
TREC_EVAL_OUT = "/work/shared/trec_eval/test/out.test"


def test_trec_eval_line_is_the_reference():
    import os

    if not os.path.exists(TREC_EVAL_OUT):
        pytest.skip("trec_eval's test outputs are not on this machine")
    with open(TREC_EVAL_OUT) as f:
        assert TREC_EVAL_LINE + "\n" in f.readlines()


def _trec_layout(line):
    "The three fields of a trec line, checked against trec_eval's layout."
    measure, qid, value = line.split("\t")
    assert len(measure) >= 22 and measure == f"{measure.strip():<22}", line
    return measure.strip(), qid, value


def test_trec_format_is_trec_evals_layout(files, capsys):
    qrels, runs = files
    ms = ["map", "mrr", "ndcg@3", "precision@2", "mrr@2"]
    status, out, err = cli(
        capsys, "eval", qrels, runs[1], "-m", *ms, "--format", "trec"
    )
    # trec_eval's names with ranx's numbers: one line on stderr says so (issue 27)
    assert status == 0 and err.splitlines() == [
        "irbook eval: trec_eval's layout with ranx's numbers: add --convention "
        "trec_eval for trec_eval's"
    ]
    rows = [_trec_layout(line) for line in out.strip().splitlines()]
    ref = _trec_layout(TREC_EVAL_LINE)
    assert ref == ("map", "all", "0.1785")
    want = M.evaluate(M.read_qrels(qrels), RUNS["dense"], ms)
    names = {"map": "map", "mrr": "recip_rank", "ndcg@3": "ndcg_cut_3"}
    names |= {"precision@2": "P_2", "mrr@2": "mrr@2"}  # no trec_eval cut-off for RR
    assert rows[:2] == [("runid", "all", "dense"), ("num_q", "all", "3")]
    assert rows[2:] == [(names[m], "all", f"{want[m]:6.4f}") for m in ms]
    # the same layout, character for character, as trec_eval's line
    line = next(x for x in out.splitlines() if x.startswith("map "))
    assert line == f"{'map':<22}\tall\t{want['map']:6.4f}"


def test_trec_format_names_runs_by_their_tag(files, tmp_path, capsys):
    "trec_eval's runid is the run's tag; two runs sharing one keep their file names."
    qrels, _ = files
    a = write_run(tmp_path / "a.trec", RUNS["bm25"], tag="bm25-v2")
    b = write_run(tmp_path / "b.trec", RUNS["dense"], tag="bm25-v2")
    out = cli(capsys, "eval", qrels, a, "-m", "mrr", "--format", "trec")[1]
    assert out.splitlines()[0] == f"{'runid':<22}\tall\tbm25-v2"
    out = cli(capsys, "eval", qrels, a, b, "-m", "mrr", "--format", "trec")[1]
    assert [x.split("\t")[2] for x in out.splitlines() if x.startswith("runid")] == [
        "a",
        "b",
    ]


def test_trec_per_query_rows_then_all(files, capsys):
    qrels, runs = files
    args = ("eval", qrels, runs[0], "-m", "mrr", "-q", "--format", "trec")
    status, out, _ = cli(capsys, *args)
    rows = [_trec_layout(line) for line in out.strip().splitlines()]
    per_q = M.evaluate(M.read_qrels(qrels), RUNS["bm25"], "mrr", per_query=True)["mrr"]
    want = [("recip_rank", q, f"{per_q[q]:6.4f}") for q in sorted(per_q.index)]
    assert status == 0 and rows[:3] == want
    assert rows[3:5] == [("runid", "all", "bm25"), ("num_q", "all", "3")]
    assert rows[5] == ("recip_rank", "all", f"{per_q.mean():6.4f}")


def test_json_comparison_has_null_never_nan(files, capsys):
    qrels, runs = files
    status, out, _ = cli(capsys, "eval", qrels, *runs, "-m", "mrr", "--format", "json")
    assert status == 0 and "NaN" not in out
    rows = json.loads(out)
    base = [r for r in rows if r["run"] == "bm25"]
    assert base and all(r["p"] is None and r["baseline"] is None for r in base)
    tested = [r for r in rows if r["run"] != "bm25"]
    assert all(r["baseline"] == "bm25" and 0 <= r["p_holm"] <= 1 for r in tested)


def test_alpha_decides_significance(files, capsys):
    "The same comparison, significant or not by --alpha alone (p_holm in between)."
    qrels, runs = files
    args = ("eval", qrels, runs[0], runs[2], "-m", "mrr", "--format", "json")
    _, out, _ = cli(capsys, *args)
    p = json.loads(out)[1]["p_holm"]
    above, below = min(0.999, p * 1.5), max(0.001, p / 1.5)
    _, hi, _ = cli(capsys, *args, "--alpha", str(above))
    _, lo, _ = cli(capsys, *args, "--alpha", str(below))
    assert json.loads(hi)[1]["significant"] is True
    assert json.loads(lo)[1]["significant"] is False


def test_table_of_several_runs_shows_the_comparison(files, capsys):
    qrels, runs = files
    status, out, _ = cli(capsys, "eval", qrels, *runs, "-m", "mrr", "ndcg@3")
    header = out.splitlines()[0].split()
    assert status == 0
    assert header == ["mean", "diff", "low", "high", "effect", "p", "p_holm"] + [
        "significant"
    ]
    assert all(name in out for name in RUNS)


def test_progress_bar_follows_the_terminal_and_tqdm_disable(tmp_path, monkeypatch):
    # a bar when stderr is a terminal and there are several runs; TQDM_DISABLE (the
    # book's build sets it) turns it off, as it does for tqdm everywhere
    import io

    from irbook.cli import score_runs

    (tmp_path / "q").write_text("q1 0 d1 1\n")
    for name in ("a", "b"):
        (tmp_path / name).write_text(f"q1 Q0 d1 1 1.0 {name}\n")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    def bar(env):
        err = Tty()
        monkeypatch.setattr("sys.stderr", err)
        if env:
            monkeypatch.setenv("TQDM_DISABLE", "1")
        else:
            monkeypatch.delenv("TQDM_DISABLE", raising=False)
        runs = [str(tmp_path / "a"), str(tmp_path / "b")]
        score_runs({"q1": {"d1": 1}}, runs, ["mrr"])
        return "evaluating" in err.getvalue()

    assert bar(env=False)
    assert not bar(env=True)


# ------------------------------------------------- issue 36's smaller faults
def test_err_label_out_of_range_names_the_qrels(tmp_path, capsys):
    # a grade above ERR's 4 is the qrels' fault: the message names the qrels file,
    # whichever report scores it
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("q1 0 a 9\nq1 0 b 1\nq2 0 c 1\n")
    runs = [
        write_run(
            tmp_path / f"{n}.trec", {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0}}
        )
        for n in ("one", "two")
    ]
    for args in (
        ["eval", qrels, runs[0], "-m", "err@10"],
        ["eval", qrels, runs[0], "-m", "err@10", "-q", "--memory", "0"],
        ["eval", qrels, *runs, "-m", "err@10", "--bounds"],
        ["plan", qrels, *runs, "-m", "err@10"],
    ):
        status, out, err = cli(capsys, *args)
        assert status == 2 and out == "", args
        assert err.startswith(f"irbook {args[0]}: error: {qrels}: err: grades go"), err
        assert "one.trec" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "option, module, extra",
    [
        ("--engine=dask", "dask", "dask"),
        ("--engine=dask", "distributed", "dask"),
        ("--format=latex", "jinja2", "latex"),
    ],
)
def test_missing_extra_is_one_hint(files, capsys, monkeypatch, option, module, extra):
    # without the extra an option needs: one line that says how to install it
    qrels, runs = files
    monkeypatch.setitem(sys.modules, module, None)  # its import fails, as if missing
    status, out, err = cli(capsys, "eval", qrels, *runs[:2], "-m", "map", option)
    assert status == 2 and out == ""
    name = option.replace("=", " ")
    want = f'{name} needs the {extra} extra: pip install "irbook[{extra}]"'
    assert err == f"irbook eval: error: {want}\n"


def test_measures_before_the_files_as_trec_eval(files, capsys):
    # trec_eval's order, -m before the files: the files end the measure list
    qrels, runs = files
    run = runs[0]
    status, want, _ = cli(capsys, "eval", qrels, run, "-m", "map", "P.10", "-c")
    assert status == 0
    for args in (
        ["-m", "map", "P.10", qrels, run, "-c"],
        ["-m", "map", "-m", "P.10", qrels, run, "-c"],
        ["-c", "-m", "map", "P.10", qrels, run],
        [qrels, "-m", "map", "P.10", run, "-c"],
        ["-m", "map", "P.10", "-c", "--", qrels, run],
    ):
        assert cli(capsys, "eval", *args) == (0, want, ""), args
    status, want, _ = cli(capsys, "plan", qrels, *runs, "-m", "map")
    assert status == 0 and cli(capsys, "plan", "-m", "map", qrels, *runs)[1] == want
    # a file that does not exist, or a measure mistyped, is named as such
    gone = qrels.parent / "gone.trec"
    status, _, err = cli(capsys, "eval", "-m", "map", gone, run)
    assert status == 2 and "No such file or directory" in err and str(gone) in err
    status, _, err = cli(capsys, "eval", "-m", "mapp", qrels, run)
    assert status == 2 and "unknown metric 'mapp'" in err
    status, _, err = cli(capsys, "eval", "-m", "map")  # no files at all: argparse's
    assert status == 2 and "required: qrels, runs" in err


def test_memory_with_a_whole_run_option_is_refused(tmp_path, capsys):
    "-J and -M read the run whole: a --memory bound beside them is refused."
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text("q1 0 d1 1\n")
    r.write_text("q1 Q0 d1 1 1.0 t\n")
    for flag in (["-J"], ["-M", "5"]):
        assert main(["eval", str(q), str(r), *flag, "--memory", "64"]) == 2
        assert "cannot bound it" in capsys.readouterr().err
        assert main(["eval", str(q), str(r), *flag, "--memory", "0"]) == 0
        capsys.readouterr()
