"""`irbook eval --power` and `irbook plan`: the numbers equal statsmodels' power solver
on the runs' own per-query scores; bad input is one line on stderr and status 2."""

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.power import TTestPower

import irbook.metrics as M
from irbook.cli import main

N_QUERIES = 60


def write(tmp_path, seed=0):
    "A qrels file and three run files over N_QUERIES queries, seeded random rankings."
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(8)]
    qrels = {
        f"q{i}": {d: 1 for d in rng.choice(docs, 2, replace=False)}
        for i in range(N_QUERIES)
    }
    (tmp_path / "qrels.trec").write_text(
        "".join(f"{q} 0 {d} {r}\n" for q, ds in qrels.items() for d, r in ds.items())
    )
    runs = {}
    for name, skill in (("weak", 0.0), ("mid", 1.0), ("strong", 2.0)):
        run = {}
        for q, rel in qrels.items():
            s = rng.random(len(docs)) + skill * np.array([d in rel for d in docs])
            run[q] = {d: float(v) for d, v in zip(docs, s)}
        lines = [
            f"{q} Q0 {d} {i} {v} {name}"
            for q, ds in run.items()
            for i, (d, v) in enumerate(sorted(ds.items(), key=lambda x: -x[1]), 1)
        ]
        (tmp_path / f"{name}.trec").write_text("\n".join(lines) + "\n")
        runs[name] = run
    return tmp_path / "qrels.trec", [tmp_path / f"{n}.trec" for n in runs], qrels, runs


@pytest.fixture
def files(tmp_path):
    return write(tmp_path)


def cli(capsys, *args):
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


def per_query(qrels, run, metric="mrr"):
    return M.evaluate(qrels, run, metric, per_query=True)[metric].to_numpy()


def reference(d, sd, n, alpha=0.05, power=0.8):
    "MDD and questions needed from statsmodels' solver (effect sizes d / sd)."
    es = TTestPower().solve_power(nobs=n, alpha=alpha, power=power)
    need = TTestPower().solve_power(effect_size=abs(d) / sd, alpha=alpha, power=power)
    return es * sd, math.ceil(need - 1e-6)


@pytest.mark.parametrize("power", [None, "0.9"])
def test_eval_power_columns_equal_statsmodels(files, capsys, power):
    qrels_file, run_files, qrels, runs = files
    args = ["eval", qrels_file, *run_files, "-m", "mrr", "--format", "csv", "--power"]
    status, out, err = cli(capsys, *args, *([power] if power else []))
    assert status == 0 and err == ""
    t = pd.read_csv(io.StringIO(out))
    tested = t[t.baseline.notna()]
    assert len(tested) == 2 and {"mdd", "n_needed"} <= set(t.columns)
    assert t[t.baseline.isna()][["mdd", "n_needed"]].isna().all().all()
    base = per_query(qrels, runs["weak"])
    for r in tested.itertuples():
        d = per_query(qrels, runs[r.run]) - base
        sd = d.std(ddof=1)
        want_mdd, want_n = reference(d.mean(), sd, N_QUERIES, power=float(power or 0.8))
        assert r.mdd == pytest.approx(want_mdd, rel=5e-4)
        assert r.n_needed == want_n


def test_eval_power_table_and_json(files, capsys):
    qrels_file, run_files, _, _ = files
    status, out, _ = cli(capsys, "eval", qrels_file, *run_files, "-m", "mrr", "--power")
    assert status == 0
    text, block = out.split("Power 80%, paired t-test at alpha 0.05", 1)
    assert "mdd" not in text and "n_needed" in block
    assert sum(line.startswith(("mid", "strong")) for line in block.splitlines()) == 2
    status, out, _ = cli(
        capsys,
        "eval",
        qrels_file,
        *run_files,
        "-m",
        "mrr",
        "--power",
        "--format",
        "json",
    )
    rows = json.loads(out)
    assert [r["mdd"] is None for r in rows] == [r["baseline"] is None for r in rows]
    # without --power, nothing changes
    status, plain, _ = cli(capsys, "eval", qrels_file, *run_files, "-m", "mrr")
    assert plain == text.rstrip("\n") + "\n" and "Power" not in plain


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--power", "--format", "trec"], "trec_eval's layout"),
        (["--power", "0.01"], "power must lie strictly between alpha and 1"),
    ],
)
def test_eval_power_bad_input(files, capsys, extra, words):
    qrels_file, run_files, _, _ = files
    status, out, err = cli(capsys, "eval", qrels_file, *run_files, "-m", "mrr", *extra)
    assert status == 2 and out == "" and words in err and err.count("\n") == 1


def test_eval_power_needs_a_comparison(files, capsys):
    qrels_file, run_files, _, _ = files
    for args in ([run_files[0]], [run_files[0], "-q"]):
        status, _, err = cli(capsys, "eval", qrels_file, *args, "--power")
        assert status == 2 and "--power needs two runs or more" in err
    status, _, err = cli(capsys, "eval", qrels_file, *run_files, "--power", "1.5")
    assert status == 2 and "must lie strictly between 0 and 1" in err


def test_plan_equals_statsmodels_on_sakai_pooled_sd(files, capsys):
    qrels_file, run_files, qrels, runs = files
    status, out, err = cli(
        capsys, "plan", qrels_file, *run_files, "-m", "mrr", "--diff", "0.05", "0.1",
        "--n", "191", "--format", "json",
    )  # fmt: skip
    assert status == 0 and err == ""
    rows = json.loads(out)
    x = np.column_stack([per_query(qrels, r) for r in runs.values()])
    # Sakai: sqrt(2 V_E) is the mean of the three pairs' variances of differences
    pairs = [np.var(x[:, j] - x[:, k], ddof=1) for j in range(3) for k in range(j)]
    sd = math.sqrt(np.mean(pairs))
    for r, d in zip(rows, (0.05, 0.1)):
        want_mdd, want_n = reference(d, sd, 191)
        assert (r["metric"], r["test"], r["pilot"], r["systems"]) == ("mrr", "t", 60, 3)
        assert r["sd"] == pytest.approx(sd, rel=1e-9) and r["n"] == 191
        assert r["mdd"] == pytest.approx(want_mdd, rel=5e-4)
        assert r["diff"] == d and r["n_needed"] == want_n


def test_plan_formats_and_defaults(files, capsys):
    qrels_file, run_files, _, _ = files
    status, out, _ = cli(capsys, "plan", qrels_file, *run_files[:2], "-m", "mrr")
    assert status == 0
    header, row = out.splitlines()
    assert header.split() == [
        "metric", "test", "pilot", "systems", "sd", "n", "mdd", "diff", "n_needed"
    ]  # fmt: skip
    assert row.split()[:6] == ["mrr", "t", "60", "2", row.split()[4], "60"]
    assert row.split()[-2:] == ["NaN", "NaN"]  # no --diff: the MDD only
    status, out, _ = cli(
        capsys, "plan", qrels_file, *run_files, "-m", "mrr", "ndcg@5", "--format", "csv"
    )
    assert pd.read_csv(io.StringIO(out)).metric.tolist() == ["mrr", "ndcg@5"]


def test_plan_by_simulation(files, capsys):
    qrels_file, run_files, _, _ = files
    closed_form = ["plan", qrels_file, *run_files, "-m", "mrr", "--diff", "0.15"]
    args = closed_form + ["--test", "fisher", "--reps", "60", "--format", "json"]
    status, out, err = cli(capsys, *args)
    assert status == 0 and err == ""
    sim = json.loads(out)[0]
    status, again, _ = cli(capsys, *args)
    assert json.loads(again) == [sim]  # seeded
    closed = json.loads(cli(capsys, *closed_form, "--format", "json")[1])[0]
    assert sim["test"] == "fisher" and closed["test"] == "t"
    # the randomisation test's answer is near the t-test's (60 sets: loosely)
    assert 0.5 < sim["n_needed"] / closed["n_needed"] < 2
    assert 0.5 < sim["mdd"] / closed["mdd"] < 2


@pytest.mark.parametrize(
    "args, words",
    [
        (["-m", "mrr"], "plan needs two pilot runs or more"),
        (["-m", "nonsense@3"], "nonsense"),
    ],
)
def test_plan_bad_input(files, capsys, args, words):
    qrels_file, run_files, _, _ = files
    runs = run_files[:1] if "two pilot" in words else run_files
    status, out, err = cli(capsys, "plan", qrels_file, *runs, *args)
    assert status == 2 and out == ""
    assert err.startswith("irbook plan: error:") and words in err


def test_plan_help(capsys):
    assert main(["plan", "--help"]) == 0
    assert "--diff" in capsys.readouterr().out
