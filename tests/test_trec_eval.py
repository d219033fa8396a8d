"""irbook.metrics under each trec_eval convention equals the tool itself, per query.

- `convention="trec_eval"` against trec_eval 10.0 built from its source
  (../shared/trec_eval, or $IRBOOK_TREC_EVAL_SRC): on every expected output of its
  own test folder, and on
  >= 1,000 random cases of real-world shape (near-ties in double, graded and negative
  labels, -c, -l2) batched into a few files so the binary runs a few times only;
- `convention="pytrec_eval"` against pytrec_eval (trec_eval 9.0.8, 32-bit scores), per
  query, on random tie-heavy runs and on the JQaRA runs.

trec_eval orders a query's documents by score descending, then by doc id descending as
strings (form_res_rels.c).
"""

import contextlib
import copy
import functools
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TREC_EVAL_SRC
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irbook.metrics as M
from irbook.metrics import trec as T
from irbook.metrics.registry import MEASURES as DECLARED

ROOT = Path(__file__).resolve().parents[1]
SRC = TREC_EVAL_SRC  # tests/conftest.py: the source the `trec_eval` fixture builds
N = int(os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES", 1000))
HSET = dict(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ATOL = 1e-9


# ------------------------------------------------------------------ trec_eval 10.0
def run_trec_eval(binary, args, qrels_path, run_path) -> dict:
    "trec_eval's output as {measure: {query or 'all': value (str)}}."
    out = subprocess.run(
        [str(binary), *args, str(qrels_path), str(run_path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    res = {}
    for line in out.splitlines():
        m, q, v = line.split()
        res.setdefault(m, {})[q] = v
    return res


def read_trec(path, kind) -> dict:
    "A well-formed TREC qrels (labels as int) or run file (scores as float) as dicts."
    out = {}
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if kind == "qrels":
            out.setdefault(f[0], {})[f[2]] = int(f[3])
        else:
            out.setdefault(f[0], {})[f[2]] = float(f[4])
    return out


def ours_name(measure: str, lvl: int) -> str | None:
    "The trec_eval measure as irbook evaluates it (with -l), None if irbook lacks it."
    if measure == "rbp":
        measure = "rbp.9"  # trec_eval's default persistence; bare "rbp" is refused
    elif M.from_trec_eval(measure) is None:
        return None
    if DECLARED[M.parse_metric(measure)[0]].kind == "strings":
        return None  # relstring: a string per query, test_new_measures_*
    return measure + (f"-l{lvl}" if lvl != 1 else "")


def compare(expected: dict, qrels, run, lvl=1, mc=False, decimals=4, per_query=True):
    "Assert irbook (trec_eval convention) == trec_eval's output; the names compared."
    names = {m: ours_name(m, lvl) for m in expected if ours_name(m, lvl)}
    assert names, "no measure in common"
    qc = M.Columns.from_dict(qrels, "qrels")  # columns may hold negative labels
    kw = dict(make_comparable=mc, convention="trec_eval")
    qids, pq = M.evaluate(qc, run, list(names.values()), per_query="columns", **kw)
    at = {q: i for i, q in enumerate(qids)}  # a dict, not a frame's .loc per cell
    agg = M.evaluate(qc, run, list(names.values()), **kw)
    tol = 0.5 * 10.0**-decimals + 1e-12
    for m, ours in names.items():
        for q, v in expected[m].items():
            if q == "all" and (m, mc and lvl != 1) == ("num_rel", True):
                continue  # trec_eval's -c summary counts labels > 0, ignoring -l
                # (te_calc_avg_num_rel, m_num_rel.c); its per-query values use -l
            if q == "all":
                got = agg[ours]
            elif per_query:
                got = float(pq[ours][at[q]])
            else:
                continue
            assert abs(got - float(v)) <= tol, f"{m} {q}: irbook {got} != {v}"
    return sorted(names)


# trec_eval's own tests (its Makefile's quicktest): expected output, flags, files
TEST_FILES = [
    ("out.test", [], "qrels.test", "results.test"),
    ("out.test.a", ["-m", "all_trec"], "qrels.test", "results.test"),
    ("out.test.aq", ["-m", "all_trec", "-q"], "qrels.test", "results.test"),
    ("out.test.aqc", ["-m", "all_trec", "-q", "-c"], "qrels.test", "results.trunc"),
    ("out.test.aqcM", ["-m", "all_trec", "-q", "-c", "-M100"], "qrels.test",
     "results.trunc"),
    ("out.test.aql", ["-m", "all_trec", "-q", "-l2"], "qrels.rel_level",
     "results.test"),
    ("out.test.meas_params", ["-q"], "qrels.test", "results.test"),
    ("out.comment.test", [], "qrels.comment.test", "results.comment.test"),
]  # fmt: skip


def truncate(run: dict, depth: int) -> dict:
    "Each query's top `depth` docs in trec_eval's order (its -M, applied before us)."
    out = {}
    for q, docs in run.items():
        top = sorted(docs.items(), key=lambda x: (x[1], x[0]), reverse=True)[:depth]
        out[q] = dict(top)
    return out


def suite_case(expected, flags, qrels, run):
    """trec_eval's expected output {measure: {query: str}}, its qrels and run (the run
    cut to -M's depth) and -l's level, for one file of its test folder."""
    folder = SRC / "test"
    if not (folder / expected).exists():
        pytest.skip(f"no trec_eval test folder at {folder}")
    exp = {}
    for line in (folder / expected).read_text().splitlines():
        m, q, v = line.split()
        exp.setdefault(m, {})[q] = v
    qd, rd = read_trec(folder / qrels, "qrels"), read_trec(folder / run, "run")
    lvl = int(next((f[2:] for f in flags if f.startswith("-l")), 1))
    depth = next((int(f[2:]) for f in flags if f.startswith("-M")), None)
    return exp, qd, truncate(rd, depth) if depth else rd, lvl


@pytest.mark.parametrize("expected,flags,qrels,run", TEST_FILES, ids=lambda x: str(x))
def test_trec_eval_test_folder(expected, flags, qrels, run):
    "Every measure irbook has, per query where the file has them, as trec_eval prints."
    exp, qd, rd, lvl = suite_case(expected, flags, qrels, run)
    names = compare(exp, qd, rd, lvl=lvl, mc="-c" in flags, per_query="-q" in flags)
    assert len(names) >= (8 if expected == "out.test.meas_params" else 25)


def test_trec_eval_binary_matches_its_test_folder(trec_eval):
    "The built binary reproduces out.test.aq (so the random cases below use trec_eval)."
    folder = SRC / "test"
    got = subprocess.run(
        [str(trec_eval), "-m", "all_trec", "-q", "qrels.test", "results.test"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert got == (folder / "out.test.aq").read_text()


# -------------------------------------------------------- random cases, batched
DOCS = [f"d{i}" for i in range(12)] + ["D1", "d10a", "文書", "é", "z", "a"]
NEAR = [1.0, 1.0000000001, 0.9999999999, 1.0 + 1e-12, 0.5, 0.5, 2.0, 0.0, -1.0]


@st.composite
def case(draw):
    "One qrels/run pair of real-world shape: 1-4 queries, graded and negative labels."
    qrels, run = {}, {}
    for i in range(draw(st.integers(1, 4))):
        judged = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True)
        )
        qrels[f"q{i}"] = {d: draw(st.integers(-1, 3)) for d in judged}
        if draw(st.integers(0, 5)) == 0:
            continue  # query missing from the run (scored with -c only)
        docs = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=15, unique=True)
        )
        free = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
        scores = st.sampled_from(NEAR) if draw(st.booleans()) else free
        run[f"q{i}"] = {d: draw(scores) for d in docs}
    if draw(st.booleans()):
        run["extra"] = {DOCS[0]: 1.0}  # a run query without judgements: ignored
    return qrels, run


def collect_cases(n: int) -> list:
    """n hypothesis cases (derandomized), gathered to be written into one pair of files:
    drawn once per process (test_unjudged.py asks for the same), a copy each call."""
    return copy.deepcopy(_collect_cases(n))


@functools.cache
def _collect_cases(n: int) -> list:
    cases = []

    @settings(max_examples=n, database=None, **HSET)
    @given(case())
    def gather(c):
        cases.append(c)

    gather()
    return cases


def batch(cases, complete: bool) -> tuple:
    "All cases as one qrels and one run, query ids prefixed by the case number."
    qrels, run = {}, {}
    for i, (q, r) in enumerate(cases):
        for qid, docs in q.items():
            if complete and qid not in r:
                continue  # without -c trec_eval stops on such a query
            qrels[f"c{i}_{qid}"] = docs
        for qid, docs in r.items():
            run[f"c{i}_{qid}"] = docs
    return qrels, run


def write(tmp, qrels, run):
    qp, rp = tmp / "qrels", tmp / "run"
    qp.write_text(
        "".join(f"{q} 0 {d} {v}\n" for q, x in qrels.items() for d, v in x.items()),
        encoding="utf-8",
    )
    rp.write_text(
        "".join(
            f"{q} Q0 {d} {i} {v!r} r\n"
            for q, x in run.items()
            for i, (d, v) in enumerate(x.items())
        ),
        encoding="utf-8",
    )
    return qp, rp


@pytest.fixture(scope="module")
def cases():
    return collect_cases(N)


@pytest.mark.parametrize(
    "flags", [["-q"], ["-q", "-c"], ["-q", "-l2"], ["-q", "-c", "-l2"]], ids=" ".join
)
def test_random_cases_equal_trec_eval(trec_eval, cases, tmp_path, flags):
    "Per query, every irbook measure of all_trec, on N cases in one pair of files."
    assert len(cases) >= min(N, 1000) * 0.95  # hypothesis may dedupe a few
    qrels, run = batch(cases, complete="-c" not in flags)
    qp, rp = write(tmp_path, qrels, run)
    exp = run_trec_eval(trec_eval, ["-m", "all_trec", *flags], qp, rp)
    lvl = 2 if "-l2" in flags else 1
    names = compare(exp, qrels, run, lvl=lvl, mc="-c" in flags)
    assert int(exp["num_q"]["all"]) == len(qrels)  # every qrels query scored
    assert {"P_5", "ndcg_cut_10", "bpref", "rbp", "iprec_at_recall_0.50"} <= set(names)


def test_hypothesis_budget():
    "At least 1000 random cases are checked against trec_eval."
    assert N >= 1000 or os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES")


def test_missing_query_refused_like_trec_eval(trec_eval, tmp_path):
    "trec_eval 10 stops on a judged query the run lacks (unless -c); so does irbook."
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": {"a": 1.0}, "zz": {"b": 1.0}}
    qp, rp = write(tmp_path, qrels, run)
    with pytest.raises(subprocess.CalledProcessError):
        run_trec_eval(trec_eval, ["-q"], qp, rp)
    with pytest.raises(M.QueryMismatch, match="q2"):
        M.evaluate(qrels, run, "map", convention="trec_eval")
    exp = run_trec_eval(trec_eval, ["-q", "-c"], qp, rp)
    compare(exp, qrels, run, mc=True)


def test_near_tie_double_not_float():
    "trec_eval 10 compares doubles: 1.0000000001 beats 1.0 (trec_eval 9 ties them)."
    qrels = {"q": {"a": 1, "b": 0}}
    run = {"q": {"a": 1.0000000001, "b": 1.0}}
    assert M.evaluate(qrels, run, "P_1", convention="trec_eval") == 1.0
    assert M.evaluate(qrels, run, "P_1", convention="pytrec_eval") == 0.0


def test_official_names():
    "OFFICIAL is trec_eval's default set, in the order of its out.test."
    folder = SRC / "test"
    if not (folder / "out.test").exists():
        pytest.skip("no trec_eval test folder")
    names = [line.split()[0] for line in (folder / "out.test").read_text().splitlines()]
    assert M.OFFICIAL == [n for n in names if n != "runid"]
    assert all(M.from_trec_eval(n) for n in M.OFFICIAL)


# ------------------------------------------------------------- pytrec_eval (9.0.8)
try:
    import pytrec_eval
except ImportError:  # the trec_eval 10 tests above still run
    pytrec_eval = None
needs_pytrec = pytest.mark.skipif(pytrec_eval is None, reason="no pytrec_eval")

# irbook metric -> trec_eval measure (k = cut-off)
PAIRS = {
    "precision@{k}": "P_{k}",
    "recall@{k}": "recall_{k}",
    "map": "map",
    "map@{k}": "map_cut_{k}",
    "ndcg": "ndcg",
    "ndcg@{k}": "ndcg_cut_{k}",
    "mrr": "recip_rank",
    "r-precision": "Rprec",
    "bpref": "bpref",
    "hit_rate@{k}": "success_{k}",
    "iprec_at_recall@0.1": "iprec_at_recall_0.10",
    "iprec_at_recall@0.5": "iprec_at_recall_0.50",
    "iprec_at_recall@0.7": "iprec_at_recall_0.70",
}
KS = (1, 3, 5, 10)
PDOCS = [f"d{i}" for i in range(15)] + ["D1", "d10a", "文書", "é", "z", "a"]


def measures():
    "irbook name -> trec_eval name, for every pair and cut-off."
    out = {}
    for ours, theirs in PAIRS.items():
        for k in KS if "{k}" in ours else (None,):
            out[ours.format(k=k)] = theirs.format(k=k)
    return out


MEASURES = measures()


def pytrec_per_query(qrels, run, names):
    "pytrec_eval's per-query values {irbook metric: array over its queries}."
    wanted = set()
    for ours in names:
        m = MEASURES[ours]
        if m.startswith("iprec_at_recall"):
            wanted.add("iprec_at_recall")
            continue
        base, _, k = m.rpartition("_") if m[-1].isdigit() else (m, "", "")
        wanted.add(f"{base}.{k}" if k else m)
    res = pytrec_eval.RelevanceEvaluator(qrels, wanted).evaluate(run)
    qs = sorted(res)
    return qs, {o: np.array([res[q][MEASURES[o]] for q in qs]) for o in names}


labels = st.integers(0, 3)
# 1 +- 1e-12: distinct doubles, one 32-bit float (trec_eval 9 keeps `float sim`)
tie_scores = st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.0 + 1e-12, 1.0 - 1e-12, 2.0, -1.0])


@st.composite
def qrels_and_run(draw):
    "Qrels and a run, every run query retrieving at least one doc; some queries unrun."
    nq = draw(st.integers(1, 5))
    qrels, run = {}, {}
    for i in range(nq):
        q = f"q{i}"
        judged = draw(
            st.lists(st.sampled_from(PDOCS), min_size=1, max_size=10, unique=True)
        )
        qrels[q] = {d: draw(labels) for d in judged}
        if i and draw(st.integers(0, 6)) == 0:
            continue  # pytrec_eval scores only the queries both hold
        docs = draw(
            st.lists(st.sampled_from(PDOCS), min_size=1, max_size=15, unique=True)
        )
        free = st.floats(-100, 100, allow_nan=False, width=32)
        scores = tie_scores if draw(st.booleans()) else free
        run[q] = {d: float(draw(scores)) for d in docs}
    return qrels, run


def assert_equal_to_pytrec_eval(qrels, run, names):
    ours = M.evaluate(qrels, run, names, per_query=True, convention="pytrec_eval")
    qs, theirs = pytrec_per_query(qrels, run, names)
    assert list(ours.index) == qs
    for m in names:
        o, t = ours[m].to_numpy(), theirs[m]
        bad = ~np.isclose(o, t, atol=ATOL, rtol=0)
        assert not bad.any(), (
            f"{m} ({MEASURES[m]}): irbook {o[bad]} != trec_eval {t[bad]} for "
            f"{[q for q, b in zip(qs, bad) if b]}: {qrels} {run}"
        )


@needs_pytrec
@settings(max_examples=N, **HSET)
@given(qrels_and_run())
def test_equal_to_pytrec_eval(data):
    "Every paired metric, every cut-off, per query, on tie-heavy graded inputs."
    assert_equal_to_pytrec_eval(*data, list(MEASURES))


@needs_pytrec
def test_tie_order_is_trec_evals():
    "All-tied run: trec_eval ranks doc ids descending; ranx's order differs."
    qrels = {"q": {"a": 1, "b": 0, "c": 0}}
    run = {"q": {"a": 1.0, "b": 1.0, "c": 1.0}}
    # trec_eval: c, b, a -> the relevant doc is third
    for c in ("trec_eval", "pytrec_eval"):
        assert M.evaluate(qrels, run, "mrr", convention=c) == pytest.approx(1 / 3)
    assert pytrec_per_query(qrels, run, ["mrr"])[1]["mrr"][0] == pytest.approx(1 / 3)


def test_no_ties_argument():
    "evaluate takes no `ties=`: `convention=` names the rules."
    with pytest.raises(TypeError, match="ties"):
        M.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, "mrr", ties="trec_eval")


def test_unknown_convention():
    with pytest.raises(ValueError, match="convention must be one of"):
        M.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, "mrr", convention="random")


JQARA_METRICS = ["ndcg@10", "mrr", "map", "precision@10", "recall@10", "r-precision"]


@pytest.mark.slow
@needs_pytrec
def test_jqara_runs_equal_pytrec_eval():
    "All 39 JQaRA runs: irbook (convention='pytrec_eval') == pytrec_eval per query."
    data = pytest.importorskip("irbook.data")
    qrels = M.read_qrels(data.fetch("jqara/qrels.trec"))
    for name in data.JQARA_RUNS:
        run = M.read_run(data.fetch(f"jqara/runs/{name}.lz4"))
        run = {q: run[q] for q in qrels if run.get(q)}
        sub = {q: qrels[q] for q in run}
        assert_equal_to_pytrec_eval(sub, run, JQARA_METRICS)


def test_no_common_query_refused():
    "pytrec_eval's rule scores the queries both hold: none in common is an error."
    with pytest.raises(M.QueryMismatch):
        M.evaluate({"q": {"a": 1}}, {"x": {"a": 1.0}}, "map", convention="pytrec_eval")


@pytest.mark.parametrize("convention", ["ranx", "trec_eval", "pytrec_eval"])
def test_every_source_one_join(convention):
    "Dicts, ranx objects and columns join into the same record under each convention."
    ranx = pytest.importorskip("ranx")
    qrels = {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"a": 1}, "q3": {"b": 1}}
    run = {"q1": {"c": 0.5, "a": 0.5, "d": 0.7}, "q2": {"b": 1.0}, "q4": {"a": 1.0}}
    names = ["ndcg@2", "P_1", "bpref", "num_rel_ret", "iprec_at_recall_0.50"]
    frames = [
        M.evaluate(q, r, names, per_query=True, make_comparable=mc, convention=c)
        for mc in (True, False)
        if mc or convention == "pytrec_eval"  # the others refuse the mismatch
        for c in [convention]
        for q, r in [
            (qrels, run),
            (ranx.Qrels(qrels), ranx.Run(run)),
            (M.Columns.from_dict(qrels, "qrels"), M.Columns.from_dict(run, "run")),
        ]
    ]
    groups = [frames[i : i + 3] for i in range(0, len(frames), 3)]
    for g in groups:
        for f in g[1:]:
            assert f.index.tolist() == g[0].index.tolist()
            assert np.allclose(f.to_numpy(), g[0].to_numpy(), atol=ATOL, rtol=0)
    if convention == "pytrec_eval":
        assert groups[-1][0].index.tolist() == ["q1", "q2"]


def test_trec_eval_names():
    "trec_eval's spellings map to irbook's; 'official' expands to OFFICIAL."
    assert M.from_trec_eval("P_10") == "precision@10"
    assert M.from_trec_eval("ndcg_cut_10-l2") == "ndcg@10-l2"
    assert M.from_trec_eval("recip_rank") == "mrr"
    assert M.from_trec_eval("precision@10") is None
    assert M.expand_metrics(["official", "ndcg"]) == M.OFFICIAL + ["ndcg"]
    got = M.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, "official")
    assert list(got) == M.OFFICIAL and got["num_q"] == 1.0


# ------------------------------------------------------------------ the command line
_MAIN = "import sys; from irbook.cli import command; command()"


def _cli(*args) -> str:
    "`irbook eval ...`'s standard output (exit status 0 asserted)."
    out = subprocess.run(
        [sys.executable, "-c", _MAIN, "eval", *map(str, args)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _lines(text: str) -> list:
    "Output lines (the runid line included: the run's tag, as trec_eval prints it)."
    return text.splitlines()


@pytest.mark.parametrize("per_query", [False, True])
def test_cli_official_is_trec_evals_output(trec_eval, per_query):
    "`-m official --convention trec_eval --format trec` diffs clean against trec_eval."
    q, r = SRC / "test" / "qrels.test", SRC / "test" / "results.test"
    flags = ["-q"] * per_query
    ours = _cli(
        q, r, "-m", "official", "--convention", "trec_eval", "--format", "trec", *flags
    )
    theirs = subprocess.run(
        [str(trec_eval), *flags, "-m", "official", str(q), str(r)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert _lines(ours) == _lines(theirs)
    if not per_query:  # and the expected file of trec_eval's own test suite
        expected = (SRC / "test" / "out.test").read_text()
        assert _lines(ours) == _lines(expected)


# ------------------------------------------- irbook.metrics.trec: the rest of all_trec
# trec_eval's lines that irbook.metrics.trec computes -> (kernel, its parameter)
def new_lines() -> dict:
    out = {"infAP": (T.infAP, 0), "gm_bpref": (T.gm_bpref, 0)}
    for x in range(1, 11):
        out[f"Rprec_mult_{x / 5:.2f}"] = (T.Rprec_mult, x / 5)
    out |= {"utility": (T.utility, 0), "11pt_avg": (T.eleven_pt_avg, 0)}
    out |= {m: (getattr(T, m), 0) for m in ("binG", "G", "ndcg_rel", "Rndcg")}
    out |= {f"relative_P_{k}": (T.relative_P, k) for k in CUTS}
    out |= {"set_relative_P": (T.relative_P, 0), "set_map": (T.set_map, 0)}
    out |= {"num_nonrel_judged_ret": (T.num_nonrel_judged_ret, 0)}
    out |= {"rbp_resid": (T.rbp_resid, 0.9)}
    return out | {f"unj_{k}": (T.unj, k) for k in (5, 10, 20)}


CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)


def ranked_with_pool(qrels, run, mc=False):
    "`to_ranked` under trec_eval's convention (it records the pooled unjudged docs)."
    qc = M.Columns.from_dict(qrels, "qrels")
    return M.to_ranked(qc, run, mc, convention="trec_eval")


def compare_new(expected: dict, qrels, run, lvl=1, mc=False):
    "Assert each line of `new_lines` (and relstring) == trec_eval's, per query and all."
    r = ranked_with_pool(qrels, run, mc=mc)
    lines = new_lines()
    assert set(lines) <= set(expected), set(lines) - set(expected)
    for m, (fn, p) in lines.items():
        v = np.asarray(fn(r, p, rel_lvl=lvl), np.float64)
        per = dict(zip(r.query_ids, v))
        for q, want in expected[m].items():
            # gm_bpref and num_nonrel_judged_ret aggregate as declared (gmean, sum)
            got = M.aggregate(m if m in AGG else "map", v) if q == "all" else per[q]
            assert abs(got - float(want)) <= 0.5e-4 + 1e-12, f"{m} {q}: {got} != {want}"
    strings = dict(zip(r.query_ids, T.relstring(r)))
    for q, want in expected.get("relstring", {}).items():
        assert f"'{strings[q]}'" == want, (q, strings[q], want)
    return len(lines)


AGG = {"gm_bpref", "num_nonrel_judged_ret"}


@pytest.mark.parametrize(
    "expected,flags,qrels,run",
    [t for t in TEST_FILES if "all_trec" in t[1]],
    ids=lambda x: str(x),
)
def test_new_measures_on_trec_evals_test_folder(expected, flags, qrels, run):
    "The 34 lines irbook lacked (rbp it had), relstring with -q, as trec_eval prints."
    exp, qd, rd, lvl = suite_case(expected, flags, qrels, run)
    assert compare_new(exp, qd, rd, lvl=lvl, mc="-c" in flags) == 34


@pytest.mark.parametrize(
    "flags", [["-q"], ["-q", "-c"], ["-q", "-l2"], ["-q", "-c", "-l2"]], ids=" ".join
)
def test_new_measures_on_random_cases(trec_eval, cases, tmp_path, flags):
    "Per query and summary, on N random graded cases (ties, -1 labels, empty queries)."
    qrels, run = batch(cases, complete="-c" not in flags)
    qp, rp = write(tmp_path, qrels, run)
    exp = run_trec_eval(trec_eval, ["-m", "all_trec", *flags], qp, rp)
    lvl = 2 if "-l2" in flags else 1
    assert compare_new(exp, qrels, run, lvl=lvl, mc="-c" in flags) == 34
    assert any("." in s for s in exp["relstring"].values())  # pooled docs were met


def test_pooled_docs_tell_infap_apart(trec_eval, tmp_path):
    "A pooled unjudged doc above a relevant one counts in infAP; an unpooled one not."
    qrels = {"q": {"r1": 1, "n": 0, "p": -1, "r2": 1}}
    run = {"q": {"r1": 4.0, "n": 3.0, "p": 2.0, "r2": 1.0}}
    exp = run_trec_eval(trec_eval, ["-q", "-m", "infAP", "-m", "relstring"], *write(
        tmp_path, qrels, run
    ))  # fmt: skip
    r = ranked_with_pool(qrels, run)
    # r2 at rank 4: 1/4 + 3/4 * (3/3) * (1 + e) / (2 + 2e); (1 + that) / 2
    want = (1 + 0.25 + 0.75 * (1 + 1e-5) / (2 + 2e-5)) / 2
    assert T.infAP(r)[0] == pytest.approx(want, abs=1e-15)
    assert float(exp["infAP"]["q"]) == pytest.approx(want, abs=5e-5)
    assert T.relstring(r) == ["10.1"] and exp["relstring"]["q"] == "'10.1'"
    unpooled = {"q": {"r1": 1, "n": 0, "r2": 1}}  # p outside the qrels: not counted
    assert T.infAP(ranked_with_pool(unpooled, run))[0] < want


@pytest.mark.parametrize("source", ["dicts", "columns", "ranx"])
def test_join_records_pooled_docs(source):
    "to_ranked marks a doc the qrels label < 0 (trec_eval's RELVALUE_UNJUDGED)."
    qrels = {"q": {"a": -1, "b": 1, "d": -3}}
    run = {"q": {"a": 2.0, "b": 1.0, "c": 0.5, "d": 0.1}}
    if source == "columns":
        qrels = M.Columns.from_dict(qrels, "qrels")
        run = M.Columns.from_dict(run, "run")
    elif source == "ranx":
        ranx = pytest.importorskip("ranx")
        qrels, run = ranx.Qrels(qrels), ranx.Run(run)
    for c in ("ranx", "trec_eval", "pytrec_eval"):
        r = M.to_ranked(qrels, run, convention=c, widths=(6, 0))
        assert r.pooled.tolist() == [[True, False, False, True, False, False]], c
        assert r.judged.tolist() == [[False, True, False, False, False, False]], c
        assert not M.drop_unjudged(r).pooled.any()


def test_pooled_and_outside_ties_in_trec_evals_order(trec_eval, tmp_path):
    "A pooled and an unpooled doc tied on score: doc id descending, as trec_eval."
    qrels = {"q": {"r": 1, "p": -1, "n": 0}}
    run = {"q": {"p": 1.0, "x": 1.0, "r": 0.5, "n": 2.0}}
    exp = run_trec_eval(trec_eval, ["-q", "-m", "infAP", "-m", "relstring"], *write(
        tmp_path, qrels, run
    ))  # fmt: skip
    r = ranked_with_pool(qrels, run)
    assert exp["relstring"]["q"] == f"'{T.relstring(r)[0]}'" == "'0-.1'"
    assert abs(T.infAP(r)[0] - float(exp["infAP"]["q"])) <= 0.5e-4


PATH_NAMES = ["gm_bpref", "utility", "11pt_avg", "binG", "G", "ndcg_rel", "Rndcg",
              "set_map", "relative_P@5", "relative_P", "num_nonrel_judged_ret",
              "rbp_resid.9", "unj@5", "Rprec_mult@0.6"]  # fmt: skip


def test_new_measures_on_every_path(cases, tmp_path):
    "evaluate on dicts and on Columns and evaluate_file at the smallest budget agree."
    from irbook.metrics.stream import evaluate_file

    qrels, run = batch(cases[:300], complete=True)
    qp, rp = write(tmp_path, qrels, run)
    kw = dict(per_query=True, convention="trec_eval")
    qc = M.Columns.from_dict(qrels, "qrels")
    frames = [
        M.evaluate(qc, run, PATH_NAMES, **kw),
        M.evaluate(qc, M.read_run(rp), PATH_NAMES, **kw),
        evaluate_file(qc, rp, PATH_NAMES, memory=0, **kw),
    ]
    for f in frames[1:]:
        f = f.loc[frames[0].index]
        assert np.array_equal(f.to_numpy(), frames[0].to_numpy()), (
            (f - frames[0]).abs().max()
        )


# ------------------------------- the command, line for line, on trec_eval's test suite
def quicktest() -> list:
    """trec_eval's own test suite: (expected file, arguments) of each line of its
    Makefile's quicktest target (`./trec_eval ARGS | diff - test/EXPECTED`)."""
    import shlex

    make = SRC / "Makefile"
    if not make.exists():
        return []
    text = make.read_text().split("quicktest:", 1)[1].split("\n\n", 1)[0]
    out = []
    for line in text.splitlines():
        if "./trec_eval " not in line or "| diff - test/" not in line:
            continue
        args, expected = line.split("./trec_eval ", 1)[1].split("| diff - test/")
        out.append((expected.strip(), shlex.split(args)))
    return out


# what irbook does not do, and why: trec_eval's other input formats
NOT_IN_IRBOOK = {
    "-R": "-R prefs, qrels_prefs, qrels_jg: preference and judgment-group qrels "
    "formats (the prefs and *_avgjg measures), not relevance qrels",
}


def suite_cases():
    "Each line of the quicktest, an expected xfail (strict) where irbook lacks a flag."
    cases = []
    for expected, args in quicktest():
        lacks = [why for flag, why in NOT_IN_IRBOOK.items() if flag in args]
        marks = [pytest.mark.xfail(strict=True, reason=lacks[0])] if lacks else []
        ident = f"{expected}: {' '.join(args)}"
        cases.append(pytest.param(expected, args, marks=marks, id=ident))
    return cases


@pytest.mark.parametrize("expected,args", suite_cases())
def test_command_equals_trec_evals_test_suite(expected, args, capsys, monkeypatch):
    "`irbook eval ARGS --convention trec_eval --format trec` prints the expected file."
    from irbook.cli import main

    monkeypatch.chdir(SRC)  # the Makefile's paths: test/qrels.test ...
    status = main(["eval", *args, "--convention", "trec_eval", "--format", "trec"])
    out = capsys.readouterr()
    assert status == 0, out.err
    want = (SRC / "test" / expected).read_text().splitlines()
    got = out.out.splitlines()
    assert len(got) == len(want)
    assert got == want


def test_the_suite_is_the_makefiles():
    "The quicktest holds every expected file of the test folder (none left out)."
    if not (SRC / "Makefile").exists():
        pytest.skip(f"no trec_eval source at {SRC}")
    files = {p.name for p in (SRC / "test").glob("out.*")}
    assert {e for e, _ in quicktest()} == files and len(quicktest()) >= 15


FLAG_SETS = [
    ["-q"], ["-q", "-c"], ["-q", "-l2"], ["-q", "-c", "-l2"], ["-q", "-M", "5"],
    ["-q", "-n"], ["-c"], ["-q", "-J"], ["-q", "-c", "-J", "-l2"],
    ["-q", "-m", "relstring.20", "-m", "utility.2,-1,0,0", "-m", "11pt_avg..25,.5",
     "-m", "G.1=3,2=9", "-m", "ndcg_rel.0=1,3=2", "-m", "Rndcg.2=5", "-m", "P.7,3"],
]  # fmt: skip


def nan_lines(lines: list) -> list:
    "trec_eval's -J lines of 0 / 0 (an emptied ranking): iprec_at_recall, 11pt_avg."
    return [x for x in lines if x.endswith("-nan")]


# `make test` runs three of them (a minute of CPU); `make test-slow` and CI all ten
FAST_FLAGS = [["-q"], ["-q", "-c", "-J", "-l2"], FLAG_SETS[-1]]


def _marked(sets: list, fast: list) -> list:
    "The flag sets as pytest params, those not in `fast` marked slow."
    slow = pytest.mark.slow
    return [pytest.param(f, marks=() if f in fast else slow) for f in sets]


@pytest.mark.parametrize("flags", _marked(FLAG_SETS, FAST_FLAGS), ids=" ".join)
def test_command_equals_trec_eval_on_random_cases(trec_eval, cases, tmp_path, flags):
    "The command's whole output == trec_eval's, on N random graded cases in one file."
    from irbook.cli import main

    qrels, run = batch(cases, complete="-c" not in flags)
    qp, rp = write(tmp_path, qrels, run)
    asked = [] if "-m" in flags else ["-m", "all_trec"]
    p = subprocess.run(
        [str(trec_eval), *asked, *flags, str(qp), str(rp)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    want = p.stdout.splitlines()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["eval", *asked, *flags, qp, rp, "--convention", "trec_eval",
                       "--format", "trec"])  # fmt: skip
    assert status == 0
    got = out.getvalue().splitlines()
    assert len(got) == len(want) > 0
    if "-J" in flags:  # trec_eval's -nan (0 / 0) where -J empties a ranking: printed
        assert nan_lines(want) and nan_lines(got) == nan_lines(want)  # as it prints it
    differ = [(a, b) for a, b in zip(got, want) if a != b]
    assert len(differ) <= 3, differ[:5]  # a tie, at most, printed the other way
    for a, b in differ:
        assert_tie(a, b, qp, rp, flags)


def assert_tie(ours: str, theirs: str, qp, rp, flags):
    """Two lines that differ only as a value half-way between two printed ones does:
    irbook's sum and trec_eval's (added in another order) on either side of the tie.
    Per query the value itself is checked to be within 1e-9 of that half-way point."""
    (m, q, x), (m2, q2, y) = ours.split("\t"), theirs.split("\t")
    assert (m, q) == (m2, q2) and abs(float(x) - float(y)) < 1.5e-4, (ours, theirs)
    lvl = int(flags[flags.index("-l2")][2:]) if "-l2" in flags else 1
    name = ours_name(m.strip(), lvl)
    if q == "all" or "-M" in flags or name is None:
        return
    kw = dict(convention="trec_eval", make_comparable="-c" in flags)
    qc, rc = M.read_columns(qp, "qrels"), M.read_columns(rp, "run")
    v = M.evaluate(qc, rc, [name], per_query=True, judged_only="-J" in flags, **kw)
    half = v.loc[q, name] * 1e4 % 1
    assert abs(half - 0.5) < 1e-9, (ours, theirs, v.loc[q, name])


# ------------------------------------------------- -Z: z-scores of a reference file
def zscore_file(path, raw: list, gone: bool, seed: int = 0):
    """A made-up -Z file for trec_eval's `-q -m all_trec` lines `raw`: random means and
    stddevs, some entries left out (not gm_map's), one query's all if `gone`, one
    stddev 0 at the value and one away from it.
    trec_eval's binary searches look one entry past the end (convert_zscores.c: `end =
    num`), so each query keeps its strcmp-last measure and the strcmp-last query stays:
    a missing measure or query then never falls past the end."""
    rng = np.random.default_rng(seed)
    values = {}  # (qid, measure): trec_eval's value, gm_map and gm_bpref as logs
    for line in raw:
        m, q, v = line.split("\t")
        if q != "all" and not v.startswith("'"):  # relstring: not a number
            values[q.strip(), m.strip()] = float(v)
    qids = sorted({q for q, _ in values}, key=str.encode)
    for q in qids:  # gm_map's per-query value is log(max(AP, 1e-5))
        for gm, base in (("gm_map", "map"), ("gm_bpref", "bpref")):
            values[q, gm] = math.log(max(values[q, base], 1e-5))
    last = {}  # each query's strcmp-last measure, in one pass over the values
    for q, m in values:
        if q not in last or m.encode() > last[q].encode():
            last[q] = m
    gone_q = qids[len(qids) // 2] if gone else None  # not the last query
    lines, zeros = [], 0
    for (q, m), v in values.items():
        kept = m == "gm_map" or rng.random() > 0.1
        keep = m == last[q] or (q != gone_q and m != "P_5" and kept)
        if not keep:  # P_5: no query has it; some others missing here and there
            continue
        if zeros < 2 and m == "num_rel":  # sd 0: at the value (0), then off (missing)
            lines.append(f"{q} {m} {v + zeros} 0\n")
            zeros += 1
            continue
        mean, sd = v + rng.normal(0, 0.3), rng.uniform(0.05, 2)
        lines.append(f"{q} {m} {mean!r} {sd!r}\n")
    rng.shuffle(lines)  # any order, as trec_eval sorts them
    path.write_text("".join(lines), encoding="utf-8")
    assert zeros == 2
    return path


@pytest.mark.parametrize(
    "flags", _marked([["-q"], ["-q", "-c"], []], [["-q"]]), ids=" ".join
)
def test_zscores_equal_trec_evals(trec_eval, cases, tmp_path, flags):
    "`-Z FILE`: the command's lines == trec_eval's, per query and 'all' (gm_map too)."
    from irbook.cli import main

    qrels, run = batch(cases, complete="-c" not in flags)
    qp, rp = write(tmp_path, qrels, run)
    args = ["-m", "all_trec", *flags, str(qp), str(rp)]
    raw = subprocess.run(
        [str(trec_eval), "-q", *args], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    gone = flags == ["-q"]  # a query the file lacks: gm_map's mean is then 0
    zp = zscore_file(tmp_path / "zscores", raw, gone)
    want = subprocess.run(
        [str(trec_eval), "-Z", str(zp), *args],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert any("\t-1000000.0000" in x for x in want)  # missing entries are there
    gm = [x.split("\t")[2] for x in want if x.startswith("Zgm_map")]
    assert gm == ["0.0000"] if gone else gm != ["0.0000"], gm
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["eval", "-Z", str(zp), *args, "--convention", "trec_eval",
                       "--format", "trec"])  # fmt: skip
    assert status == 0
    got = out.getvalue().splitlines()
    assert len(got) == len(want) > 0
    differ = [(a, b) for a, b in zip(got, want) if a != b]
    assert len(differ) <= 3, differ[:5]  # a sum half-way between two printed values
    for a, b in differ:
        (m, q, x), (m2, q2, y) = a.split("\t"), b.split("\t")
        assert (m, q) == (m2, q2) and abs(float(x) - float(y)) < 1.5e-4, (a, b)


def test_zscores_refused_outside_trec_evals_layout(tmp_path, capsys):
    "-Z needs --convention trec_eval --format trec, and a well-formed file."
    from irbook.cli import main

    folder = SRC / "test"
    if not folder.exists():
        pytest.skip(f"no trec_eval source at {SRC}")
    files = [str(folder / "qrels.test"), str(folder / "results.test")]
    zp = str(folder / "zscores_file")
    trec = ["--convention", "trec_eval", "--format", "trec"]
    for more in (["--format", "trec"], ["--convention", "trec_eval"], [],
                 [*trec, "--bounds"]):  # fmt: skip
        assert main(["eval", "-Z", zp, *files, *more]) == 2
        assert "-Z/--Zscore is trec_eval's" in capsys.readouterr().err
    bad = tmp_path / "bad"
    for text, says in [
        ("301 map 0.1\n", "not 3 fields"),
        ("301 map x 1\n", "numbers"),
        ("301 map 0 1\n301 map 0 2\n", "given twice"),
        ("", "no z-score"),
    ]:
        bad.write_text(text)
        assert main(["eval", "-Z", str(bad), *files, *trec]) == 2
        assert says in capsys.readouterr().err
