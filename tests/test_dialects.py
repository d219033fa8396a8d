"""Three dialects, one registry: ranx's, trec_eval's and ir_measures' names.

- each ir_measures name resolves to irbook's measure and gives ir_measures' own values,
  per query (random graded qrels with queries without a relevant document; distinct
  scores, so no tie rule is involved: with ties ir_measures' RR@k and Judged@k order by
  their own rules, `msmarco` and `judged` providers, not trec_eval's);
- trec_eval's `-m` spellings (P.5,10, ndcg_cut.10, all_trec) and repeated `-m` flags
  print what trec_eval 10 prints, digit for digit;
- names irbook lacks are refused by name; `-` reads standard input; `--version`;
  the help states the defaults; trec_eval's layout with another convention says so.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irbook.cli import main
from irbook.metrics import evaluate, expand_metrics, parse_metric
from irbook.metrics.registry import MEASURES as M_MEASURES
from irbook.metrics.registry import measure_names
from irbook.metrics.stream import MEMORY

ROOT = Path(__file__).resolve().parents[1]

IRM = [  # ir_measures' names checked against ir_measures itself
    "nDCG@10", "nDCG", "P@5", "RR", "RR@10", "AP", "AP@100", "R@100", "Judged@10",
    "Bpref", "Success@10", "NumRet", "NumRet(rel=1)", "NumRel", "NumQ", "P(rel=2)@5",
    "SetF", "SetP", "SetR", "IPrec@0.5", "Rprec",
]  # fmt: skip
SAME = {  # ir_measures' name -> irbook's (ranx) name
    "nDCG@10": "ndcg@10", "P@5": "precision@5", "RR": "mrr", "RR@10": "mrr@10",
    "AP": "map", "AP@100": "map@100", "R@100": "recall@100", "Judged@10": "judged@10",
    "Bpref": "bpref", "Success@10": "hit_rate@10", "NumRet": "num_ret",
    "P(rel=2)@5": "precision@5-l2", "RBP(p=0.8)": "rbp.8", "SetF": "f1",
    "IPrec@0.5": "iprec_at_recall@0.5",
}  # fmt: skip


def sample(seed=0, n=30):
    "Random graded qrels (every fifth query without a relevant doc) and a tie-free run."
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(n):
        docs = [f"d{i}" for i in range(40)]
        judged = rng.choice(docs, 15, replace=False)
        qrels[f"q{q}"] = {
            d: 0 if q % 5 == 0 else int(rng.choice([0, 0, 1, 2, 3])) for d in judged
        }
        depth = int(rng.integers(5, 40))
        scores = rng.permutation(1000)[:depth] / 7
        run[f"q{q}"] = {
            d: float(s) for d, s in zip(rng.choice(docs, depth, replace=False), scores)
        }
    return qrels, run


def test_every_name_resolves_to_the_same_measure():
    for irm, ours in SAME.items():
        assert parse_metric(irm) == parse_metric(ours), irm


@pytest.mark.parametrize("convention", ["ranx", "trec_eval", "pytrec_eval"])
@pytest.mark.parametrize("seed", [0, 1])
def test_ir_measures_values_per_query(convention, seed):
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = sample(seed)
    ours = evaluate(qrels, run, IRM, per_query=True, convention=convention)
    for name in IRM:
        measure = ir_measures.parse_measure(name)
        theirs = {
            m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)
        }
        for q in qrels:
            assert ours.loc[q, name] == pytest.approx(theirs[q], abs=1e-9), (name, q)


def test_three_dialects_one_value():
    qrels, run = sample(2)
    got = evaluate(
        qrels, run, ["nDCG@10", "ndcg_cut_10", "ndcg@10", "RBP(p=0.8)", "rbp.8"]
    )
    assert got["nDCG@10"] == got["ndcg_cut_10"] == got["ndcg@10"]
    assert got["RBP(p=0.8)"] == got["rbp.8"]


def numbered(qrels, run):
    "The sample with numeric query ids: gdeval.pl (ir_measures' ERR) reads no others."
    ids = {q: str(100 + i) for i, q in enumerate(qrels)}
    return (
        {ids[q]: v for q, v in qrels.items()},
        {ids[q]: v for q, v in run.items()},
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_err_against_ir_measures(seed):
    ir_measures = pytest.importorskip("ir_measures")
    if shutil.which("perl") is None:
        pytest.skip("ir_measures computes ERR with gdeval.pl, a perl script")
    qrels, run = numbered(*sample(seed))
    names = ["ERR@1", "ERR@5", "ERR@10", "ERR@20"]
    ours = evaluate(qrels, run, names, per_query=True)
    for name in names:
        measure = ir_measures.parse_measure(name)
        theirs = {
            m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)
        }
        assert set(theirs) == set(qrels)  # a query without a relevant doc: 0 in both
        for q, v in theirs.items():  # gdeval.pl prints 5 decimals
            assert ours.loc[q, name] == pytest.approx(v, abs=5.1e-6), (name, q)


def test_err_by_hand():
    "Chapelle et al.'s formula: stop at grade g with (2**g - 1) / 16, ERR = E[1/rank]."
    qrels = {"q": {"a": 4, "c": 2, "d": 1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6}}
    r1, r3, r4 = 15 / 16, 3 / 16, 1 / 16
    want = r1 + (1 - r1) * r3 / 3 + (1 - r1) * (1 - r3) * r4 / 4
    got = evaluate(qrels, run, ["err", "ERR@4", "err@1", "err@4-l2"])
    assert got["err"] == got["ERR@4"] == pytest.approx(want, abs=1e-15)
    assert got["err@1"] == pytest.approx(r1)
    assert got["err@4-l2"] == pytest.approx(r1 + (1 - r1) * r3 / 3)  # label 1 < level 2
    with pytest.raises(ValueError, match="grades go from 0 to 4"):
        evaluate({"q": {"a": 5}}, run, "err@10")


@pytest.mark.parametrize(
    "name, says",
    [
        ("NERR8@10", "NERR8 is not available"),
        ("SDCG@10", "SDCG is not available"),
        ("alpha_nDCG@10", "alpha_nDCG is not available"),
        ("nDCG(dcg=exp-log2)@10", "cannot read the parameters 'dcg=exp-log2'"),
        ("RBP(p=0.8)@10", "no cut-off"),
        ("P(p=0.5)@5", "not 'p'"),
        ("P@5(judged_only=True)", "P(judged_only=True)@5"),  # ir_measures refuses it
        ("nDCG(dcg='exp-log2', gains={1: 2})@10", "not 'gains'"),  # ir_measures too
        ("nDCG(dcg='log3')@10", "not 'dcg'"),
        ("P(judged_only=1)@5", "True or False"),
        ("nDCG(gains={1: 'a'})@10", "dict {label: gain}"),
        ("IPrec@1.5", "must be in [0, 1]"),
        ("P", "-m P for its default cut-offs"),
    ],
)
def test_refused_by_name(name, says):
    with pytest.raises(
        ValueError,
        match=r"(?s)"
        + __import__("re").escape(name)
        + ".*"
        + __import__("re").escape(says),
    ):
        parse_metric(name)


def test_trec_eval_spellings_expand():
    got = expand_metrics(["P.5,10", "ndcg_cut.10", "recall.100,1000", "success.10"])
    assert got == [
        "P_5", "P_10", "ndcg_cut_10", "recall_100", "recall_1000", "success_10",
    ]  # fmt: skip
    assert expand_metrics("success") == ["success_1", "success_5", "success_10"]
    all_trec = expand_metrics("all_trec")
    assert all_trec[:4] == ["num_q", "num_ret", "num_rel", "num_rel_ret"]
    for m in all_trec:
        parse_metric(m)


def test_measures_lists_three_names():
    rows = {r[0]: r for r in measure_names()}
    assert rows["ndcg@k"][1:3] == ("ndcg_cut_k", "nDCG@k")
    assert rows["precision@k"][1:3] == ("P_k", "P@k")
    assert all(r[3] for r in rows.values())  # a meaning for each


# ------------------------------------------------------------------- the command
def write(tmp_path, qrels, run):
    q, r = tmp_path / "qrels.txt", tmp_path / "run.txt"
    q.write_text(
        "".join(f"{qid} 0 {d} {v}\n" for qid, x in qrels.items() for d, v in x.items())
    )
    r.write_text(
        "".join(
            f"{qid} Q0 {d} {i} {s} sys\n"
            for qid, x in run.items()
            for i, (d, s) in enumerate(sorted(x.items(), key=lambda t: -t[1]))
        )
    )
    return q, r


def cli(capsys, *args):
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def trec_lines(text):
    return {tuple(line.split()[:2]): line.split()[2] for line in text.splitlines()}


@pytest.mark.parametrize(
    "ms",
    [
        ["-m", "map", "-m", "P.10"],
        ["-m", "P.5,10", "-m", "ndcg_cut.10", "-m", "recall.100,1000"],
        ["-m", "success.10", "-m", "recip_rank"],
        ["-m", "all_trec"],
        ["-m", "official"],
    ],
)
def test_trec_eval_m_flags_match_trec_eval(trec_eval, tmp_path, capsys, ms):
    q, r = write(tmp_path, *sample(3))
    status, out, err = cli(
        capsys, "eval", q, r, *ms, "--format", "trec", "--convention", "trec_eval"
    )
    assert status == 0 and err == ""
    ours = trec_lines(out)
    theirs = trec_lines(
        subprocess.run(
            [str(trec_eval), *ms, str(q), str(r)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    if ms == ["-m", "all_trec"]:  # trec_eval prints more measures than irbook has
        theirs = {k: v for k, v in theirs.items() if k in ours}
        assert len(ours) == len(expand_metrics("all_trec")) + 1  # + runid
    # irbook's trec layout always opens with runid and num_q; trec_eval with -m
    # prints only the measures asked
    assert {k: ours.get(k) for k in theirs} == theirs
    assert set(ours) - set(theirs) <= {("runid", "all"), ("num_q", "all")}


def test_repeated_m_adds_up(tmp_path, capsys):
    q, r = write(tmp_path, *sample(4))
    status, out, _ = cli(
        capsys, "eval", q, r, "-m", "map", "-m", "P.10", "--format", "csv"
    )
    assert status == 0
    assert "map" in out and "P_10" in out


def test_ir_measures_names_on_the_command_line(tmp_path, capsys):
    import json

    qrels, run = sample(5)
    q, r = write(tmp_path, qrels, run)
    status, out, err = cli(capsys, "eval", q, r, "-m", *SAME, "--format", "json")
    assert status == 0, err
    got, want = json.loads(out), evaluate(qrels, run, list(SAME.values()))
    assert list(got) == list(SAME)  # printed under the names given
    for irm, ours in SAME.items():
        assert got[irm] == pytest.approx(want[ours], abs=1e-12), irm


def test_refused_on_the_command_line(tmp_path, capsys):
    q, r = write(tmp_path, *sample(6))
    status, _, err = cli(capsys, "eval", q, r, "-m", "SDCG@10")
    assert status == 2
    assert err.splitlines() == [
        "irbook eval: error: metric 'SDCG@10': ir_measures' SDCG is not "
        "available in irbook (scaled DCG is not implemented)"
    ]
    status, out, _ = cli(capsys, "measures")
    assert status == 0
    assert "SDCG" in out and "refused: scaled DCG" in out
    assert "refused: rank-biased" not in out  # Compat is a measure (test_compat.py)
    # ir_measures' infAP is trec_eval's infAP once irbook.metrics.trec declares it
    irm = {r[2]: r for r in measure_names()}
    assert "refused" not in irm.get("infAP", ("", "", "", "refused"))[3] or (
        "infAP" not in M_MEASURES
    )


def test_trec_layout_with_another_convention_says_so(tmp_path, capsys):
    q, r = write(tmp_path, *sample(7))
    status, _, err = cli(capsys, "eval", q, r, "-m", "official", "--format", "trec")
    assert status == 0
    assert len(err.splitlines()) == 1 and "ranx's numbers" in err
    status, _, err = cli(
        capsys,
        "eval",
        q,
        r,
        "-m",
        "official",
        "--format",
        "trec",
        "--convention",
        "trec_eval",
    )
    assert status == 0 and err == ""


def sh(*args, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    exe = [
        sys.executable,
        "-c",
        "import sys; from irbook.cli import main; sys.exit(main())",
    ]
    return subprocess.run(
        [*exe, *map(str, args)], input=stdin, capture_output=True, env=env, text=True
    )


def test_dash_reads_stdin(tmp_path):
    q, r = write(tmp_path, *sample(8))
    want = sh("eval", q, r, "-m", "map", "P_5", "--format", "csv").stdout
    run = sh("eval", q, "-", "-m", "map", "P_5", "--format", "csv", stdin=r.read_text())
    qrels = sh(
        "eval", "-", r, "-m", "map", "P_5", "--format", "csv", stdin=q.read_text()
    )
    assert run.returncode == qrels.returncode == 0, run.stderr + qrels.stderr
    num = lambda t: [line.split(",")[1:] for line in t.splitlines()]  # noqa: E731
    assert num(run.stdout) == num(want) == num(qrels.stdout)
    two = sh("eval", "-", "-", stdin="")
    assert two.returncode == 2 and "standard input (-) can be read once" in two.stderr


def test_version_and_help_defaults():
    from irbook import __version__

    v = sh("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"irbook {__version__}"
    h = " ".join(sh("eval", "--help").stdout.split())
    for default in [
        "default: ndcg@10 mrr@10 recall@100",
        "default: ranx",
        "default: t)",
        "default: 0.05",
        f"default: {MEMORY // 2**20}",
        "default: table",
    ]:
        assert default in h, default
    m = sh("measures")
    assert m.returncode == 0 and "nDCG@k" in m.stdout and "ndcg_cut_k" in m.stdout


# ------------------------------------------------- other libraries' inputs (Python API)
MS = ["ndcg@10", "map", "P_5", "RR@10", "recall@20"]


def frames(qrels, run, names):
    "qrels and run as DataFrames with `names` = (query, doc, label, score) columns."
    import pandas as pd

    q, d, lab, s = names
    return (
        pd.DataFrame(
            [(a, b, v) for a, x in qrels.items() for b, v in x.items()],
            columns=[q, d, lab],
        ),
        pd.DataFrame(
            [(a, b, v) for a, x in run.items() for b, v in x.items()],
            columns=[q, d, s],
        ),
    )


@pytest.mark.parametrize(
    "names",
    [("qid", "docno", "label", "score"), ("query_id", "doc_id", "relevance", "score")],
    ids=["pyterrier", "ir_measures"],
)
def test_other_libraries_frames(names):
    qrels, run = sample(9)
    want = evaluate(qrels, run, MS, per_query=True)
    qf, rf = frames(qrels, run, names)
    rf["rank"] = rf.groupby(names[0]).cumcount()  # pyterrier's extra columns are fine
    for q, r in [(qf, rf), (qf, run), (qrels, rf)]:
        got = evaluate(q, r, MS, per_query=True)
        assert got.loc[want.index].equals(want)


def test_a_frame_of_no_known_dialect_is_refused():
    qf, rf = frames(*sample(9), ("qid", "doc", "label", "score"))
    with pytest.raises(ValueError, match="no column.*pyterrier's \\(qid, docno"):
        evaluate(qf, rf, "map")


def test_ir_measures_named_tuples():
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = sample(10)
    want = evaluate(qrels, run, MS, per_query=True)
    qt = [ir_measures.Qrel(q, d, v) for q, x in qrels.items() for d, v in x.items()]
    rt = [ir_measures.ScoredDoc(q, d, s) for q, x in run.items() for d, s in x.items()]
    for q, r in [(qt, rt), (iter(qt), (t for t in rt)), (qt, run), (qrels, rt)]:
        got = evaluate(q, r, MS, per_query=True)
        assert got.loc[want.index].equals(want)
    with pytest.raises(ValueError, match="named tuples need the fields.*ScoredDoc"):
        evaluate(qrels, qt, "map")  # qrels given as the run
    with pytest.raises(ValueError, match="doc 'd0' repeated"):
        evaluate(qt + [ir_measures.Qrel(qt[0].query_id, "d0", 1)] * 2, rt, "map")


class FakeDataset:
    "What irbook uses of an ir_datasets dataset: its qrels as named tuples."

    def __init__(self, qrels):
        from collections import namedtuple

        Qrel = namedtuple("TrecQrel", "query_id doc_id relevance iteration")
        self.rows = [Qrel(q, d, v, "0") for q, x in qrels.items() for d, v in x.items()]

    def has_qrels(self):
        return bool(self.rows)

    def qrels_iter(self):
        return iter(self.rows)


def test_ir_datasets_id_and_dataset(monkeypatch):
    import types

    qrels, run = sample(11)
    want = evaluate(qrels, run, MS, per_query=True)
    local = {"irbook/toy": FakeDataset(qrels), "irbook/empty": FakeDataset({})}

    def load(name):
        if name not in local:
            raise KeyError(f"{name!r} not found")
        return local[name]

    fake = types.ModuleType("ir_datasets")
    fake.load = load
    monkeypatch.setitem(sys.modules, "ir_datasets", fake)  # registered here, no network
    for q in ["irbook/toy", local["irbook/toy"]]:
        got = evaluate(q, run, MS, per_query=True)
        assert got.loc[want.index].equals(want)
    with pytest.raises(ValueError, match="ir_datasets has no dataset 'nope/x'"):
        evaluate("nope/x", run, "map")
    with pytest.raises(ValueError, match="'irbook/empty' has no qrels"):
        evaluate("irbook/empty", run, "map")
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # not installed
    with pytest.raises(ValueError, match="ir_datasets is not installed"):
        evaluate("irbook/toy", run, "map")


# ------------------------------------------- parameter forms, family defaults, all_trec
FORMS = [  # ir_measures' parameter forms: equal to ir_measures, per query
    "nDCG(judged_only=True)@10", "nDCG(gains={0:0,1:1,2:3})@10",
    "P(judged_only=True)@5", "AP(rel=2, judged_only=True)@100", "nDCG(cutoff=5)",
    "RR(judged_only=True)",
]  # fmt: skip


@pytest.mark.parametrize("convention", ["trec_eval", "pytrec_eval"])
@pytest.mark.parametrize("name", FORMS)
def test_parameter_forms_equal_ir_measures(name, convention):
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = sample(7)  # the runs hold unjudged docs: judged_only matters
    ours = evaluate(qrels, run, [name], per_query=True, convention=convention)[name]
    plain = evaluate(qrels, run, [name.split("(")[0] + "@10"], per_query=True)
    measure = ir_measures.parse_measure(name)
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    for q in qrels:
        assert ours[q] == pytest.approx(theirs.get(q, 0.0), abs=1e-9), (name, q)
    if "judged_only" in name or "gains" in name:  # the option changes the numbers
        assert not np.allclose(ours.to_numpy(), plain.iloc[:, 0].to_numpy())


def test_exp_log2_is_burges_and_equals_ir_measures():
    "nDCG(dcg='exp-log2') is ranx's ndcg_burges; ir_measures computes it with gdeval."
    ir_measures = pytest.importorskip("ir_measures")
    if shutil.which("perl") is None:
        pytest.skip("ir_measures computes nDCG(dcg='exp-log2') with gdeval.pl")
    qrels, run = numbered(*sample(8))
    name = "nDCG(dcg='exp-log2')@10"
    assert parse_metric(name) == parse_metric("ndcg_burges@10")
    ours = evaluate(qrels, run, [name], per_query=True)[name]
    measure = ir_measures.parse_measure(name)
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    for q, v in theirs.items():  # gdeval.pl prints 5 decimals
        assert ours[q] == pytest.approx(v, abs=5.1e-6), q


def test_infap_is_trec_evals():
    "ir_measures' infAP is trec_eval's infAP (irbook.metrics.trec), equal per query."
    ir_measures = pytest.importorskip("ir_measures")
    from irbook.metrics.registry import MEASURES, TREC_ONLY

    if "infAP" not in TREC_ONLY:
        pytest.skip("infAP is not registered yet (irbook.metrics.trec)")
    assert parse_metric("infAP")[0] == "infAP" and "infAP" in MEASURES
    qrels, run = sample(9)
    ours = evaluate(qrels, run, ["infAP"], per_query=True, convention="trec_eval")
    measure = ir_measures.parse_measure("infAP")
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    for q in qrels:
        assert ours.loc[q, "infAP"] == pytest.approx(theirs.get(q, 0.0), abs=1e-9), q


def test_one_measure_in_every_dialect():
    same = [
        ["nDCG(judged_only=True)@10", "ndcg(judged_only=True)@10"],
        ["P(rel=2, judged_only=True)@5", "precision(judged_only=True)@5-l2"],
        ["IPrec@0.5", "iprec_at_recall_0.50", "iprec_at_recall@0.5"],
        ["RBP", "RBP(p=0.8)", "rbp.8", "rbp@8"],
        ["rbp", "rbp.9"],
        ["NumRet(rel=1)", "NumRelRet", "num_rel_ret"],
        ["SetP", "set_P", "precision"],
        ["nDCG(dcg='log2')@10", "nDCG@10", "ndcg_cut_10", "nDCG(cutoff=10)"],
    ]
    for names in same:
        assert len({parse_metric(n) for n in names}) == 1, names
    assert parse_metric("nDCG(judged_only=True)@10") != parse_metric("nDCG@10")
    # str: irbook's spelling, which parses back to the same measure
    for n in ["nDCG(gains={0:0,1:1,2:3})@10", "P(rel=2, judged_only=True)@5", "RBP"]:
        assert parse_metric(str(parse_metric(n))) == parse_metric(n)


def trec_names(trec_eval, tmp_path, *flags):
    q, r = write(tmp_path, *sample(3))
    out = subprocess.run(
        [str(trec_eval), *flags, str(q), str(r)], check=True, capture_output=True,
        text=True,
    ).stdout  # fmt: skip
    return [line.split()[0] for line in out.splitlines()]


@pytest.mark.parametrize(
    "family",
    ["P", "recall", "iprec_at_recall", "ndcg_cut", "map_cut", "success", "Rprec_mult",
     "relative_P", "unj"],
)  # fmt: skip
def test_bare_family_expands_as_trec_eval_prints_it(trec_eval, tmp_path, family):
    assert expand_metrics(family, trec=True) == trec_names(
        trec_eval, tmp_path, "-m", family
    )


def test_all_trec_is_trec_evals_list(trec_eval, tmp_path):
    from irbook.metrics.registry import ALL_TREC, missing_trec

    theirs = trec_names(trec_eval, tmp_path, "-m", "all_trec")
    assert theirs[0] == "runid" and list(ALL_TREC) == theirs[1:] and len(theirs) == 99
    lack = missing_trec()
    if lack:  # said, not dropped in silence
        with pytest.warns(UserWarning, match=lack[0]):
            got = expand_metrics("all_trec")
    else:
        got = expand_metrics("all_trec")
    assert got == [m for m in ALL_TREC if m not in lack]
