"""`irbook eval HUMAN_QRELS RUN... --judge JUDGE_QRELS`, end to end in a subprocess on
small files: PPI++ intervals equal `irbook.ppi.judged_eval`'s, the human-judged
questions are named, and bad combinations are one line on stderr with exit status 2."""

import json
import subprocess
import sys

import numpy as np
import pytest

from irbook.ppi import judged_eval

CMD = [sys.executable, "-c", "from irbook.cli import command; command()"]


def irbook(*args):
    p = subprocess.run([*CMD, *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


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
    assert "--judge goes with none of -q" in err
    short = _qrels_file(
        tmp_path / "short.qrels", {q: judge[q] for q in list(judge)[5:]}
    )
    status, out, err = irbook("eval", *args[:-1], short)
    assert status == 2 and err.count("\n") == 1
    assert "human-judged questions have no judge labels" in err
    status, out, err = irbook("eval", *args[:-1], tmp_path / "missing.qrels")
    assert status == 2 and "missing.qrels" in err
