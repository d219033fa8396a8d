"""The columnar reader: TREC files read into Columns score exactly as the same files
read into dicts, for every metric, both tie rules, with and without make_comparable; bad
files fail with the line reader's message."""

import gzip
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranx import Qrels

import irbook.metrics as M
import irbook.metrics.io as runs
from irbook.metrics import FRAME_COLUMNS, Columns, read_columns

DOCS = [f"d{i}" for i in range(12)] + ["D1", "文書", "é9", "z", "a"]
# plain integers take the integer path; "007" and "+7" must never meet "7"
INTS = ["0", "7", "10", "99", "5", "123456789012", "8841822", "41", "3", "12"]
ALPHABETS = [DOCS, INTS, INTS + ["007", "+7"]]
N = int(os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES", 300))
HSET = dict(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
METRICS = [
    f"{m}{k}"
    for m in sorted(M.METRICS)
    if m != "rbp"
    for k in ("", "@1", "@3", "@10-l2")
] + ["rbp.8"]


@st.composite
def qrels_and_run(draw):
    nq = draw(st.integers(1, 4))
    alphabet = draw(st.sampled_from(ALPHABETS))
    qrels, run = {}, {}
    for i in range(nq):
        q = f"q{i}"
        judged = draw(
            st.lists(st.sampled_from(alphabet), min_size=1, max_size=8, unique=True)
        )
        qrels[q] = {d: draw(st.integers(0, 3)) for d in judged}
        if draw(st.booleans()) or i == 0:
            docs = draw(
                st.lists(
                    st.sampled_from(alphabet), min_size=1, max_size=12, unique=True
                )
            )
            scores = st.sampled_from([0.0, 1.0, 1.0, 2.5, 1.0 + 1e-12])
            run[q] = {d: draw(scores) for d in docs}
    if draw(st.booleans()):
        run["zz"] = {"d1": 1.0}  # a run query without judgements
    return qrels, run


def write(folder: Path, qrels: dict, run: dict, sep=" ", gz=False):
    qp, rp = folder / "q.trec", folder / ("r.trec.gz" if gz else "r.trec")
    qp.write_text(
        "".join(
            f"{q}{sep}0{sep}{d}{sep}{v}\n"
            for q, x in qrels.items()
            for d, v in x.items()
        )
    )
    lines = "".join(
        f"{q} Q0 {d} {i} {s!r} t\n"
        for q, x in run.items()
        for i, (d, s) in enumerate(x.items(), 1)
    )
    if gz:
        with gzip.open(rp, "wt", encoding="utf-8") as f:
            f.write(lines)
    else:
        rp.write_text(lines)
    return qp, rp


@settings(max_examples=N, **HSET)
@given(
    qrels_and_run(),
    st.sampled_from([" ", "\t"]),
    st.booleans(),
    st.sampled_from(list(M.CONVENTIONS)),
)
def test_columns_score_like_dicts(data, sep, gz, convention):
    qrels, run = data
    with tempfile.TemporaryDirectory() as tmp:
        qp, rp = write(Path(tmp), qrels, run, sep, gz)
        qd, rd = M.read_qrels(qp), M.read_run(rp)
        qc, rc = read_columns(qp, "qrels"), read_columns(rp, "run")
    assert qc.to_dict() == qd and rc.to_dict() == rd
    for mc in (True, False):
        try:
            want = M.evaluate(
                qd,
                rd,
                METRICS,
                per_query=True,
                make_comparable=mc,
                convention=convention,
            )
        except ValueError as e:  # query mismatch without make_comparable
            with pytest.raises(ValueError, match="do not match"):
                M.evaluate(qc, rc, METRICS, make_comparable=mc, convention=convention)
            assert "do not match" in str(e)
            continue
        got = M.evaluate(
            qc, rc, METRICS, per_query=True, make_comparable=mc, convention=convention
        )
        assert list(got.index) == list(want.index)
        np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=0, atol=1e-12)


def test_bad_files_fail_like_the_line_reader(tmp_path):
    cases = {
        "short.trec": ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2\n", "run"),
        "nan.trec": ("q1 Q0 a 1 nan t\n", "run"),
        "word.trec": ("q1 Q0 a 1 high t\n", "run"),
        "dup.trec": ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", "run"),
        "half.qrels": ("q1 0 a 1.5\n", "qrels"),
        "huge.qrels": ("q1 0 a 99999999999999999999\n", "qrels"),
        "empty.qrels": ("", "qrels"),
    }
    for name, (text, kind) in cases.items():
        p = tmp_path / name
        p.write_text(text)
        reader = M.read_qrels if kind == "qrels" else M.read_run
        with pytest.raises(ValueError) as want:
            reader(p)
        with pytest.raises(ValueError) as got:
            read_columns(p, kind)
        assert str(got.value) == str(want.value), name


def test_spaces_runs_and_mixed_separators(tmp_path):
    p = tmp_path / "r.trec"
    p.write_text("q1  Q0 a 1 0.5 t\nq1\tQ0\tb\t2\t0.25\tt\n")
    assert (
        read_columns(p, "run").to_dict()
        == M.read_run(p)
        == {"q1": {"a": 0.5, "b": 0.25}}
    )


def test_integer_ids_take_the_integer_path(tmp_path):
    qp, rp = write(tmp_path, {"1": {"7": 1, "007": 2}}, {"1": {"7": 2.0, "12": 1.0}})
    rc, qc = read_columns(rp, "run"), read_columns(qp, "qrels")
    assert rc.docs is None and qc.docs is not None  # "007" keeps the qrels as strings
    assert list(rc.doc_ids()) == ["7", "12"]
    got = M.evaluate(qc, rc, ["mrr", "ndcg@3"], per_query=True)
    want = M.evaluate(
        M.read_qrels(qp), M.read_run(rp), ["mrr", "ndcg@3"], per_query=True
    )
    assert got.equals(want) and got.loc["1", "mrr"] == 1.0


def frames(d: dict, kind: str):
    "The same qrels or run as a pandas DataFrame, with ranx's from_df column names."
    rows = [(q, doc, v) for q, x in d.items() for doc, v in x.items()]
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))


@settings(max_examples=max(N // 3, 20), **HSET)
@given(qrels_and_run(), st.sampled_from(["frame", "arrow", "parquet", "dict", "ranx"]))
def test_tables_score_like_dicts(data, form):
    qrels, run = data
    run = {q: x for q, x in run.items() if q in qrels} or {"q0": {"z": 1.0}}
    qrels.setdefault("q0", {"z": 1})
    qf, rf = frames(qrels, "qrels"), frames(run, "run")
    if form == "arrow":
        qf, rf = pa.Table.from_pandas(qf), pa.Table.from_pandas(rf)
    elif form == "parquet":
        with tempfile.TemporaryDirectory() as tmp:
            qp, rp = Path(tmp) / "q.parquet", Path(tmp) / "r.parquet"
            qf.to_parquet(qp), rf.to_parquet(rp)
            qf, rf = read_columns(qp, "qrels"), read_columns(rp, "run")
    elif form == "dict":  # one side columnar, the other a dict
        rf = run
    elif form == "ranx":
        qf = Qrels(qrels)
    want = M.evaluate(qrels, run, METRICS, per_query=True, make_comparable=True)
    got = M.evaluate(qf, rf, METRICS, per_query=True, make_comparable=True)
    assert list(got.index) == list(want.index)
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=0, atol=1e-12)


def test_bad_tables_say_what_and_where():
    ok = pd.DataFrame({"q_id": ["q"], "doc_id": ["a"], "score": [1.0]})
    cases = {
        "no column": (ok.rename(columns={"score": "s"}), "no column"),
        "not numeric": (ok.assign(score=["x"]), "not numeric"),
        "missing": (ok.assign(doc_id=[None]), "missing values"),
        "nan": (ok.assign(score=[np.nan]), "missing values"),
        "inf": (ok.assign(score=[np.inf]), "row 0: value inf is not a finite score"),
        "repeat": (pd.concat([ok, ok]), "row 1: doc 'a' repeated in query 'q'"),
    }
    for name, (df, msg) in cases.items():
        with pytest.raises(ValueError, match=msg):
            Columns.from_frame(df, "run")
    with pytest.raises(ValueError, match="row 0: value 0.5 is not an integer label"):
        Columns.from_frame(ok.assign(score=[0.5]), "qrels")


def test_large_reads_show_a_progress_bar(tmp_path, monkeypatch, capsys):
    qp, rp = write(tmp_path, {"q": {"a": 1}}, {"q": {"a": 1.0, "b": 0.5}}, gz=True)
    monkeypatch.setattr(runs, "_BIG", 0)
    assert read_columns(rp, "run", progress=True).to_dict() == M.read_run(rp)
    assert "r.trec.gz" in capsys.readouterr().err
    read_columns(rp, "run", progress=False)
    assert capsys.readouterr().err == ""


def test_arrow_strs_are_the_strings_of_to_pylist():
    "`arrow_strs` (ASCII from the bytes, else through Python) equals `to_pylist`."
    from irbook.metrics.columns import arrow_strs

    cases = [
        ["a", "bb", ""],
        [""],
        ["x" * 30, "7"],
        ["é", "a"],
        ["q1", "q22", "q333"],
        [],
    ]
    for xs in cases:
        a = pa.array(xs, pa.string())
        for s in (
            a,
            a.slice(1),
            pa.array(xs, pa.large_string()),
            a.dictionary_encode().dictionary,
        ):
            got, want = arrow_strs(s), np.asarray(s.to_pylist(), dtype=str)
            assert got.dtype == want.dtype and got.tolist() == want.tolist()
