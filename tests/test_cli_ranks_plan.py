"""`irbook eval --ranks` (simultaneous rank intervals) and `irbook plan --judge`
(human labels a judge saves), from files, as a user runs them."""

import numpy as np
import pytest
from test_cli_judge import _qrels_file, _run_file, irbook

from irbook.power import n_for


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranks")
    rng = np.random.default_rng(3)
    qids, docs = [f"q{i:03d}" for i in range(150)], [f"d{j}" for j in range(10)]
    truth = {q: {d: int(rng.random() < 0.3) for d in docs} for q in qids}
    judge = {
        q: {d: int(v ^ (rng.random() < 0.1)) for d, v in lab.items()}
        for q, lab in truth.items()
    }
    pilot = {q: truth[q] for q in qids[:40]}
    weights = (("weak", 0.0), ("mid", 0.6), ("strong", 1.5), ("twin", 1.5))
    runs = {
        name: {
            q: {d: float(rng.random() + w * t[d]) for d in docs}
            for q, t in truth.items()
        }
        for name, w in weights
    }
    return dict(
        truth=_qrels_file(tmp / "truth.qrels", truth),
        pilot=_qrels_file(tmp / "pilot.qrels", pilot),
        judge=_qrels_file(tmp / "judge.qrels", judge),
        **{n: _run_file(tmp / f"{n}.trec", r, n) for n, r in runs.items()},
    )


def test_ranks_print_what_each_run_can_hold(files):
    f = files
    rc, out, err = irbook("eval", f["truth"], f["weak"], f["mid"], f["strong"],
                          f["twin"], "-m", "ndcg@10", "--ranks")  # fmt: skip
    assert rc == 0, err
    table = out.split("ranks by ndcg@10:")[1].splitlines()
    rows = {ln.split()[0]: ln for ln in table if ln and not ln.startswith("system")}
    assert rows["weak"].endswith("rank 4") and rows["mid"].endswith("rank 3"), rows
    # two equally good runs cannot be told apart: both may hold 1 or 2
    assert rows["strong"].endswith("ranks 1-2") and rows["twin"].endswith("ranks 1-2")


def test_ranks_are_refused_where_they_do_not_fit(files):
    f = files
    for extra in (["--format", "json"], ["-q"]):
        rc, _, err = irbook("eval", f["truth"], f["weak"], f["mid"], "--ranks", *extra)
        assert rc == 2 and "--ranks" in err and len(err.splitlines()) == 1, err
    rc, _, err = irbook("eval", f["truth"], f["weak"], "--ranks", "--judge", f["judge"])
    assert rc == 2 and "--ranks" in err, err


def test_plan_with_a_judge(files):
    f = files
    rc, out, err = irbook("plan", f["pilot"], f["weak"], f["strong"], "--judge",
                          f["judge"], "-m", "ndcg@10", "--diff", "0.05", "--format",
                          "json")  # fmt: skip
    assert rc == 0, err
    import json

    (row,) = json.loads(out)
    assert row["pilot"] == 40 and row["run"] == "strong" and row["baseline"] == "weak"
    assert 0.5 < row["rho"] < 1  # a judge that flips 10% of the labels
    assert row["n_ppi"] < row["n_human"]
    assert row["labels_saved"] == row["n_human"] - row["n_ppi"]
    # the human-only n is the paired t-test's, from the pilot's differences
    from irbook.metrics import evaluate, read_qrels, read_run

    q = read_qrels(f["pilot"])
    d = [
        evaluate(q, {k: v for k, v in read_run(f[r]).items() if k in q}, "ndcg@10",
                 per_query=True)["ndcg@10"]
        for r in ("strong", "weak")
    ]  # fmt: skip
    assert row["n_human"] == n_for(0.05, float(np.std(d[0] - d[1], ddof=1)))


def test_plan_judge_refusals(files):
    f = files
    args = ("plan", f["pilot"], f["weak"], f["strong"])
    rc, _, err = irbook(*args, "--judge", f["judge"])
    assert rc == 2 and "--diff" in err, err
    rc, _, err = irbook(*args, "--judge-cut", "1", "--diff", "0.1")
    assert rc == 2 and "--judge" in err, err
