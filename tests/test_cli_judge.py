"""`irbook eval HUMAN_QRELS RUN... --judge JUDGE_QRELS`, end to end on small files:
PPI++ intervals equal `irbook.ppi.judged_eval`'s, the human-judged questions are named,
and bad combinations are one line on stderr with exit status 2.

The command runs in this process (`irbook.cli.main`, what the console script calls),
except where reading standard input needs a process of its own: start-up, signals,
pipes and exit codes of the process are tests/test_faults.py's and test_cli_pipes.py's.
A Python warning counts as a line on stderr, as it would be in a process of its own."""

import contextlib
import io
import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from irbook.cli import main
from irbook.ppi import judged_eval

CMD = [sys.executable, "-c", "from irbook.cli import command; command()"]
# ignored by Python's default filters outside __main__ (`python -W` unset)
_QUIET = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def irbook(*args):
    "(exit status, stdout, stderr) of `irbook ARGS`, run by `irbook.cli.main`."
    out, err = io.StringIO(), io.StringIO()
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        warnings.simplefilter("default")
        for kind in _QUIET:
            warnings.simplefilter("ignore", kind)
        status = main([str(a) for a in args])
    for w in caught:  # what a process of its own would have printed on stderr
        err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    return status, out.getvalue(), err.getvalue()


def _qrels_file(path, qrels):
    path.write_text(
        "".join(f"{q} 0 {d} {v}\n" for q, ds in qrels.items() for d, v in ds.items())
    )
    return path


def _run_file(path, run, tag):
    lines = []
    for q, ds in run.items():
        ranked = sorted(ds.items(), key=lambda x: -x[1])
        lines += [
            f"{q} Q0 {d} {i + 1} {s:.6f} {tag}\n" for i, (d, s) in enumerate(ranked)
        ]
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("judge")
    rng = np.random.default_rng(0)
    qids, docs = [f"q{i:02d}" for i in range(40)], [f"d{j}" for j in range(8)]
    truth = {q: {d: int(rng.random() < 0.35) for d in docs} for q in qids}
    judge = {
        q: {d: int(v ^ (rng.random() < 0.1)) for d, v in lab.items()}
        for q, lab in truth.items()
    }
    human = {q: truth[q] for q in qids[:12]}
    runs = {
        name: {
            q: {d: round(float(rng.random() + w * truth[q][d]), 6) for d in docs}
            for q in qids
        }
        for name, w in (("bm25", 0.3), ("dense", 0.7))
    }
    files = dict(
        human=_qrels_file(tmp / "human.qrels", human),
        judge=_qrels_file(tmp / "judge.qrels", judge),
        runs=[_run_file(tmp / f"{n}.trec", r, n) for n, r in runs.items()],
    )
    return files, human, judge, runs


def test_judge_prints_ppi_intervals_and_the_human_questions(world):
    files, human, judge, runs = world
    args = (files["human"], *files["runs"], "--judge", files["judge"])
    status, out, err = irbook("eval", *args, "-m", "ndcg@5")
    assert status == 0 and err == "", err
    assert "PPI++ intervals (95%); judge labels on all 40 questions" in out
    assert "human labels on 12 of them: q00, q01" in out and "q11" in out
    assert "q12" not in out
    t = judged_eval(human, judge, runs, "ndcg@5")
    for r in t.itertuples():
        assert f"{r.mean:.4f} [{r.mean_low:.4f}, {r.mean_high:.4f}]" in out
        assert f"{r.human_mean:.4f} [{r.human_low:.4f}, {r.human_high:.4f}]" in out
    assert "dense vs bm25, ndcg@5: " in out  # the comparison engine's verdict


def test_judge_json_equals_the_library(world):
    files, human, judge, runs = world
    args = (files["human"], *files["runs"], "--judge", files["judge"])
    status, out, err = irbook(
        "eval", *args, "-m", "ndcg@5", "recall@3", "--alpha", "0.1",
        "--baseline", "dense", "--format", "json",
    )  # fmt: skip
    assert status == 0, err
    got = json.loads(out)
    t = judged_eval(human, judge, runs, ["ndcg@5", "recall@3"], 0.1, baseline="dense")
    assert len(got) == len(t) == 4
    for g, r in zip(got, t.to_dict("records")):
        assert (g["run"], g["metric"], g["n"], g["N"]) == (
            r["run"], r["metric"], 12, 40,
        )  # fmt: skip
        for k in ("mean", "mean_low", "mean_high", "human_low", "human_high"):
            assert g[k] == pytest.approx(r[k], abs=1e-6), k
        if g["baseline"] is not None:
            assert g["baseline"] == "dense"
            assert [g["low"], g["high"]] == pytest.approx(
                [r["low"], r["high"]], abs=1e-6
            )


def test_judge_errors_are_one_line(world, tmp_path):
    files, human, judge, runs = world
    args = (files["human"], *files["runs"], "--judge", files["judge"])
    one = (files["human"], files["runs"][0], "--judge", files["judge"])
    status, out, err = irbook("eval", *one, "-q")
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "-q/--per-query: " in err and "-q does not apply with --judge" in err
    short = _qrels_file(
        tmp_path / "short.qrels", {q: judge[q] for q in list(judge)[5:]}
    )
    status, out, err = irbook("eval", *args[:-1], short)
    assert status == 2 and err.count("\n") == 1
    assert "5 of the 40 questions the runs answer have no judge labels (q00," in err
    status, out, err = irbook("eval", *args[:-1], tmp_path / "missing.qrels")
    assert status == 2 and "missing.qrels" in err


# --- every option with --judge: taken, or refused in its own words ------------------


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--test", "bootstrap"], "--test: judge-assisted comparisons use the PPI"),
        (["--format", "trec"], "--format trec prints trec_eval's layout, which has"),
        (["-q"], "-q/--per-query: judge-assisted intervals are of means"),
        (["--bounds"], "--bounds: "),
        (["--holes", "3"], "--holes: "),
        (["-J"], "-J/--judged-only: "),
        (["--power"], "--power: "),
        (["--memory", "100"], "--memory: "),
        (["--engine", "dask"], "--engine dask: "),
        (["--scheduler", "sync"], "--scheduler goes with --engine dask"),
        (["--chunks", "layout.jsonl"], "--chunks: "),
        (["--texts", "texts.jsonl"], "--texts goes with --chunks"),
        (["--budget", "100"], "--budget goes with --chunks"),
    ],
)
def test_judge_refuses_each_option_in_its_own_words(world, flags, words):
    files, *_ = world
    args = (files["human"], *files["runs"], "--judge", files["judge"])
    status, out, err = irbook("eval", *args, *flags)
    assert (status, out, err.count("\n")) == (2, "", 1), err
    assert err.startswith("irbook eval: error: ") and words in err, err
    assert "with --judge" in err, err
    if flags[:2] == ["--format", "trec"]:
        assert "--bounds" not in err and "pick table, md, csv, json or latex" in err
    # without --judge the same option is no error of this kind
    status, out, err = irbook("eval", *args[:-2], *flags)
    assert "--judge" not in err


def test_judge_refusals_differ_and_come_before_reading(tmp_path):
    "Each refusal has its own line, and none waits for a file to be read."
    lines = set()
    for flags in (["--test", "t"], ["--format", "trec"], ["-J"], ["--memory", "0"]):
        a = (tmp_path / "none.qrels", tmp_path / "none.trec", "--judge", "nope")
        status, out, err = irbook("eval", *a, *flags)
        assert status == 2 and "none" not in err and "nope" not in err, err
        lines.add(err)
    assert len(lines) == 4


def test_judge_cut_needs_judge_and_a_number(world):
    files, *_ = world
    status, out, err = irbook(
        "eval", files["human"], *files["runs"], "--judge-cut", "2"
    )
    assert status == 2 and "--judge-cut" in err and "give --judge" in err
    for bad in ("nan", "inf", "two"):
        args = (files["human"], *files["runs"], "--judge", files["judge"])
        status, out, err = irbook("eval", *args, "--judge-cut", bad)
        assert status == 2 and "argument --judge-cut" in err, err


def test_judge_takes_alpha_baseline_convention_c_and_formats(world):
    "Options that work with --judge change the output as the library says they do."
    files, human, judge, runs = world
    args = (files["human"], *files["runs"], "--judge", files["judge"], "-m", "P_5")
    extra = ["--alpha", "0.2", "--baseline", "dense", "--convention", "trec_eval", "-c"]
    status, out, err = irbook("eval", *args, *extra, "--format", "json")
    assert status == 0, err
    t = judged_eval(
        human, judge, runs, "P_5", 0.2, baseline="dense", convention="trec_eval",
        make_comparable=True,
    )  # fmt: skip
    got = json.loads(out)
    assert [g["baseline"] for g in got] == [None if b != b else b for b in t.baseline]
    for g, r in zip(got, t.to_dict("records")):
        assert [g["mean_low"], g["mean_high"]] == pytest.approx(
            [r["mean_low"], r["mean_high"]], abs=1e-6
        )
    for fmt, mark in (("md", "|"), ("csv", "run,baseline,metric"), ("latex", "\\\\")):
        status, out, err = irbook("eval", *args, "--format", fmt)
        assert status == 0 and mark in out, (fmt, err)


def test_judge_reads_standard_input(world):
    "`-` for the judge's file (or for the human qrels), as for any input."
    files, *_ = world
    args = (files["human"], *files["runs"], "-m", "ndcg@5", "--format", "json")
    want = irbook("eval", *args, "--judge", files["judge"])[1]
    p = subprocess.run(
        [*CMD, "eval", *map(str, args), "--judge", "-"],
        input=files["judge"].read_text(), capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 0 and p.stdout == want, p.stderr
    p = subprocess.run(
        [*CMD, "eval", "-", *map(str, args[1:]), "--judge", "-"],
        input="", capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 2 and "standard input (-) can be read once" in p.stderr


# --- small worlds, one case each ------------------------------------------------------


def _binary_world(tmp_path, n_questions, n_human, seed=0, judge_scale=1):
    "Human 0/1 labels on the first `n_human` questions; a judge on all; two runs."
    rng = np.random.default_rng(seed)
    qids, docs = [f"q{i:03d}" for i in range(n_questions)], [f"d{k}" for k in range(6)]
    truth = {q: {d: int(rng.random() < 0.4) for d in docs} for q in qids}
    judge = {
        q: {d: judge_scale * int(v ^ (rng.random() < 0.15)) for d, v in t.items()}
        for q, t in truth.items()
    }
    human = {q: truth[q] for q in qids[:n_human]}
    runs = {
        n: {q: {d: round(float(rng.random() + w * truth[q][d]), 6) for d in docs}
            for q in qids}
        for n, w in (("a", 0.4), ("b", 0.8))
    }  # fmt: skip
    files = [
        _qrels_file(tmp_path / "human.qrels", human),
        *(_run_file(tmp_path / f"{n}.trec", r, n) for n, r in runs.items()),
        "--judge",
        _qrels_file(tmp_path / "judge.qrels", judge),
    ]
    return files, human, judge, runs


def test_two_human_questions_are_refused(tmp_path):
    # before: "b vs a, precision@1: lower by 1.000 [1.000, 1.000], p < 0.001"
    human = {"q1": {"x": 1, "y": 0}, "q2": {"x": 1, "y": 0}}
    judge = {f"q{i}": {"x": 1, "y": 0} for i in range(1, 7)}
    runs = {"a": {q: {"x": 2.0, "y": 1.0} for q in judge}}
    runs["b"] = {q: {"x": 1.0, "y": 2.0} for q in judge}
    files = [
        _qrels_file(tmp_path / "human.qrels", human),
        *(_run_file(tmp_path / f"{n}.trec", r, n) for n, r in runs.items()),
        "--judge",
        _qrels_file(tmp_path / "judge.qrels", judge),
    ]
    status, out, err = irbook("eval", *files, "-m", "precision@1")
    assert (status, out, err.count("\n")) == (2, "", 1), out + err
    assert re.search(r"needs at least 3 (human-judged )?questions, got 2$", err), err


def test_few_human_questions_come_with_a_warning(tmp_path):
    files, *_ = _binary_world(tmp_path, 60, 6)
    status, out, err = irbook("eval", *files, "-m", "ndcg@5")
    assert status == 0, err
    warn = [x for x in out.splitlines() if x.startswith("warning:")]
    assert warn and re.match(r"warning: 6 (human-judged )?questions: below 10", warn[0])
    # a machine format carries no warning line: it goes to stderr
    status, out, err = irbook("eval", *files, "-m", "ndcg@5", "--format", "json")
    assert status == 0 and json.loads(out)[0]["n"] == 6
    assert re.match(r"irbook eval: note: 6 (human-judged )?questions: below 10", err)
    # from 10 human-judged questions on, no warning
    files, *_ = _binary_world(tmp_path, 60, 10)
    status, out, err = irbook("eval", *files, "-m", "ndcg@5")
    assert status == 0 and "warning" not in out and err == "", out + err


def test_judge_on_another_scale_is_refused_until_cut(tmp_path):
    files, human, judge, runs = _binary_world(tmp_path, 40, 12, judge_scale=100)
    human["q000"]["d0"] = 2  # the human qrels graded 0-2, the judge 0/100
    _qrels_file(files[0], human)
    status, out, err = irbook("eval", *files, "-m", "ndcg@5")
    assert (status, out, err.count("\n")) == (2, "", 1), err
    assert "0 to 100" in err and "0 to 2" in err and "--judge-cut" in err, err
    assert "judge_cut" not in err  # the command's option, not the library's argument
    status, out, err = irbook(
        "eval", *files, "-m", "ndcg@5", "--judge-cut", "50", "--format", "json"
    )
    assert status == 0, err
    cut = {q: {d: int(v >= 50) for d, v in t.items()} for q, t in judge.items()}
    t = judged_eval(human, cut, runs, "ndcg@5")  # the 0/1 judge: the same numbers
    for g, r in zip(json.loads(out), t.to_dict("records")):
        assert [g["mean"], g["mean_low"], g["mean_high"]] == pytest.approx(
            [r["mean"], r["mean_low"], r["mean_high"]], abs=1e-6
        )


def test_negative_judge_labels_are_refused_unless_cut(tmp_path):
    files, human, judge, runs = _binary_world(tmp_path, 40, 12)
    judge["q020"]["d1"] = -1  # "could not judge"
    _qrels_file(files[-1], judge)
    status, out, err = irbook("eval", *files, "-m", "ndcg@5")
    assert (status, out, err.count("\n")) == (2, "", 1), err
    assert "--judge-cut" in err and "-1" in err, err
    status, out, err = irbook("eval", *files, "-m", "ndcg@5", "--judge-cut", "1")
    assert status == 0 and "PPI++ intervals" in out, err


def test_judge_missing_questions_the_runs_answer(tmp_path):
    files, human, judge, runs = _binary_world(tmp_path, 100, 12)
    dropped = [f"q{i:03d}" for i in range(12, 96, 4)]  # 21 judge-only questions
    _qrels_file(files[-1], {q: t for q, t in judge.items() if q not in dropped})
    status, out, err = irbook("eval", *files, "-m", "ndcg@5")
    assert (status, out, err.count("\n")) == (2, "", 1), err
    assert len(dropped) == 21 and "q012, q016" in err, err
    assert "21 of the 100 questions the runs answer have no judge labels" in err, err


def test_soft_judge_labels(tmp_path):
    files, human, judge, runs = _binary_world(tmp_path, 40, 12)
    soft = {
        q: {
            d: (0.8 if v else 0.15) if i % 2 else v
            for i, (d, v) in enumerate(t.items())
        }
        for q, t in judge.items()
    }  # half the labels probabilities, half the 0/1 labels as they were
    _qrels_file(files[-1], soft)
    status, out, err = irbook("eval", *files, "-m", "ndcg@5", "--format", "json")
    assert status == 0, err
    t = judged_eval(human, soft, runs, "ndcg@5")
    got = json.loads(out)
    for g, r in zip(got, t.to_dict("records")):
        assert [g["mean"], g["mean_low"], g["mean_high"]] == pytest.approx(
            [r["mean"], r["mean_low"], r["mean_high"]], abs=1e-6
        )
    # read as 0/1 (0.8 -> 1, 0.15 -> 0) the judge's means would be others
    hard = {q: {d: int(v >= 0.5) for d, v in t.items()} for q, t in soft.items()}
    h = judged_eval(human, hard, runs, "ndcg@5")
    assert not np.allclose(t["mean"], h["mean"], atol=1e-6)
    # a label that is neither an integer nor in [0, 1]: its line, one line
    files[-1].write_text("q000 0 d0 0.8\nq000 0 d1 1.5\n")
    status, out, err = irbook("eval", *files)
    assert (status, err.count("\n")) == (2, 1)
    assert "line 2: label '1.5'" in err and "probability in [0, 1]" in err, err


def test_mean_intervals_stay_within_the_metric_range(tmp_path):
    "Means near 1 on few questions: a normal interval would end above 1 (1.1001)."
    files, human, judge, runs = _binary_world(tmp_path, 40, 8, seed=3)
    for q in runs["b"]:  # b puts a relevant document first wherever there is one
        rel = [d for d, v in human.get(q, judge[q]).items() if v] or ["d0"]
        runs["b"][q][rel[0]] = 5.0
    human["q000"] = {d: 0 for d in human["q000"]}  # and misses on q000
    _run_file(files[2], runs["b"], "b"), _qrels_file(files[0], human)
    top = {q: max(ds, key=ds.get) for q, ds in runs["b"].items()}
    y = np.array([human[q][top[q]] for q in human], float)  # b's P@1, by hand
    assert 0.8 <= y.mean() < 1  # near 1, not at it
    assert y.mean() + 1.96 * y.std(ddof=1) / np.sqrt(len(y)) > 1  # a normal interval
    status, out, err = irbook("eval", *files, "-m", "P_1", "--format", "json")
    assert status == 0, err
    got = json.loads(out)
    assert [g["human_mean"] for g in got if g["run"] == "b"] == [
        pytest.approx(y.mean())
    ]
    for g in got:
        for k in ("mean_low", "mean_high", "human_low", "human_high"):
            assert 0 <= g[k] <= 1, (g["run"], k, g[k])
        for k in ("low", "high", "human_diff_low", "human_diff_high"):
            assert g[k] is None or -1 <= g[k] <= 1, (g["run"], k, g[k])
