"""`irbook eval SPANS RUN --chunks LAYOUT`: span judgments from the shell. Values equal
the library's `span_evaluate`; bad input is one line on stderr with exit status 2."""

import json

import pytest

from irbook.cli import main
from irbook.spans import Span, span_evaluate

TEXT = "a" * 200
LAYOUT = {c: (Span("d", s, s + 50),) for c, s in zip("abcd", range(0, 200, 50))}
JUDGED = {
    "q1": [[Span("d", 10, 30), Span("d", 160, 170)], [Span("d", 60, 90)]],
    "q2": [[Span("d", 120, 140)]],
}
RUNS = {
    "first": {"q1": {"a": 3.0, "b": 2.0, "d": 1.0}, "q2": {"c": 1.0}},
    "second": {"q1": {"d": 3.0, "c": 2.0}, "q2": {"a": 2.0, "c": 1.0}},
}


def lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "layout.jsonl").write_text(
        lines(
            {"id": c, "doc": s.doc, "start": s.start, "end": s.end}
            for c, segs in LAYOUT.items()
            for s in segs
        )
    )
    (tmp_path / "spans.jsonl").write_text(
        lines(
            {"qid": q, "doc": s.doc, "start": s.start, "end": s.end, "group": i}
            for q, groups in JUDGED.items()
            for i, g in enumerate(groups)
            for s in g
        )
    )
    runs = []
    for name, run in RUNS.items():
        p = tmp_path / f"{name}.trec"
        p.write_text(
            "".join(
                f"{q} Q0 {d} {r} {s} x\n"
                for q, docs in run.items()
                for r, (d, s) in enumerate(docs.items(), 1)
            )
        )
        runs.append(p)
    return tmp_path, runs


def cli(capsys, *args):
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


METRICS = ["span_recall@2", "span_precision@2", "group_recall@2", "span_recall"]


def eval_args(tmp, *runs, extra=()):
    return [
        "eval",
        tmp / "spans.jsonl",
        *runs,
        "--chunks",
        tmp / "layout.jsonl",
        *extra,
    ]


@pytest.mark.parametrize("budget", [None, 15])
def test_per_query_values_equal_the_library(files, capsys, budget):
    tmp, runs = files
    extra = ["-m", *METRICS, "-q", "--format", "json"]
    extra += [] if budget is None else ["--budget", budget]
    status, out, err = cli(capsys, *eval_args(tmp, runs[0], extra=extra))
    assert status == 0 and err == ""
    want = span_evaluate(JUDGED, RUNS["first"], LAYOUT, METRICS, budget=budget)
    got = json.loads(out)
    assert set(got) == set(want.index)
    for q, row in got.items():
        assert row == pytest.approx(want.loc[q].to_dict(), abs=1e-12)
    if budget is None:  # by hand: a and b read, 20 + 30 of the 60 judged characters
        assert got["q1"]["span_recall@2"] == pytest.approx(50 / 60)
        assert got["q1"]["span_precision@2"] == pytest.approx(50 / 100)


def test_two_runs_are_compared(files, capsys):
    tmp, runs = files
    extra = ["-m", "span_recall@1", "--format", "json", "--test", "bootstrap"]
    status, out, err = cli(capsys, *eval_args(tmp, *runs, extra=extra))
    # two questions: the bootstrap cannot hold alpha, and the command says so
    assert status == 0 and err.startswith("irbook eval: note: the paired bootstrap")
    rows = {r["run"]: r for r in json.loads(out)}
    for name in RUNS:
        want = span_evaluate(JUDGED, RUNS[name], LAYOUT, ["span_recall@1"])
        assert rows[name]["mean"] == pytest.approx(want["span_recall@1"].mean())
    assert rows["second"]["baseline"] == "first"


def test_default_metrics_are_span_recall_and_precision_at_10(files, capsys):
    tmp, runs = files
    status, out, _ = cli(capsys, *eval_args(tmp, runs[0], extra=["--format", "json"]))
    assert status == 0
    assert set(json.loads(out)) == {"span_recall@10", "span_precision@10"}


def test_quoted_passages_need_texts(files, capsys):
    tmp, runs = files
    (tmp / "texts.jsonl").write_text(lines([{"doc": "d", "text": "x" * 60 + "needle"}]))
    (tmp / "spans.jsonl").write_text(
        lines([{"qid": "q1", "doc": "d", "passage": "needle"}])
    )
    extra = ["-m", "span_recall@1", "-q", "--format", "json"]
    status, _, err = cli(capsys, *eval_args(tmp, runs[0], extra=extra))
    assert status == 2 and "spans.jsonl, line 1: a quoted passage needs" in err
    assert err.count("\n") == 1
    extra += ["--texts", tmp / "texts.jsonl"]
    status, out, err = cli(capsys, *eval_args(tmp, runs[0], extra=extra))
    # the passage is 60..66, inside chunk b, the second of run "first" for q1
    assert status == 0 and json.loads(out) == {"q1": {"span_recall@1": 0.0}}
    status, out, err = cli(
        capsys,
        *eval_args(tmp, runs[0], extra=[*extra[:1], "span_recall@2", *extra[2:]]),
    )
    assert json.loads(out) == {"q1": {"span_recall@2": 1.0}}


@pytest.mark.parametrize(
    "change, words",
    [
        (("-m", "ndcg@10"), "unknown span metric 'ndcg@10'"),
        (("--budget", "-1"), "budget must be >= 0"),
        (("--chunks", "missing.jsonl"), "missing.jsonl"),
    ],
)
def test_bad_input_is_one_line(files, capsys, change, words):
    tmp, runs = files
    args = eval_args(tmp, runs[0])
    if change[0] == "--chunks":
        args[args.index("--chunks") + 1] = tmp / change[1]
    else:
        args += list(change)
    status, out, err = cli(capsys, *args)
    assert status == 2 and out == "" and words in err and err.count("\n") == 1


def test_a_chunk_missing_from_the_layout_is_named(files, capsys):
    tmp, runs = files
    (tmp / "odd.trec").write_text("q1 Q0 zz 1 1.0 x\n")
    status, _, err = cli(capsys, *eval_args(tmp, tmp / "odd.trec"))
    assert status == 2 and "odd.trec" in err and "'zz', which is not in chunks" in err


def test_a_bad_layout_line_is_named(files, capsys):
    tmp, runs = files
    (tmp / "layout.jsonl").write_text('{"id": "a", "doc": "d", "start": 5, "end": 2}\n')
    status, _, err = cli(capsys, *eval_args(tmp, runs[0]))
    assert status == 2 and "layout.jsonl, line 1" in err and "0 <= start < end" in err
