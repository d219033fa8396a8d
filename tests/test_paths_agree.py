"""Every path of the evaluator is an oracle for every other (issue 27).

Hypothesis writes qrels, runs and metric lists (a measure named twice, and the same
measure in ranx's and trec_eval's spellings) and files (grouped by query or shuffled,
plain or gzipped, or read through a pipe), and requires the same per-query floats from:

- `irbook.metrics.evaluate` on the run read whole (the reference);
- the command line with `--memory 0` (the whole run in memory at once);
- `evaluate_file` (the command's default path) at several memory budgets, down to the
  smallest block it allows, so that queries are cut across many batches and a shuffled
  run is spilled;
- the same through a pipe (`/dev/fd/N`, as `<(zcat run.gz)` gives), which cannot be
  read twice;
- under `--convention trec_eval`, the compiled trec_eval 10 (to its printed digits);
- marked slow: `--engine dask`.

A measure asked twice is computed once and listed once under each name given (a dict
of names, as `evaluate` returns). The command itself reads a pipe as standard input
and as `/dev/fd/N` in `test_the_command_reads_a_pipe`.

Run: python -m pytest tests/test_paths_agree.py -q
"""

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import irbook.metrics as M
from irbook.cli import main
from irbook.core import QueryMismatch
from irbook.metrics.stream import MEMORY, evaluate_file

N = int(os.environ.get("IRBOOK_PATHS_EXAMPLES", 25))
HSET = dict(
    max_examples=N,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the case is printed whole
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
# budgets of `evaluate_file`: the default, one that cuts a few blocks, the smallest
BUDGETS = [MEMORY, 2000 * 14, 0]  # 0: block_size's floor (256 bytes of run text)

# metric names -> trec_eval's name for the same measure (None: trec_eval lacks it, or
# sets it per run as with -l); pairs name one measure in ranx's and trec_eval's words
NAMES = {
    "map": "map", "P_10": "P_10", "precision@10": "P_10",
    "ndcg_cut_10": "ndcg_cut_10", "ndcg@10": "ndcg_cut_10", "ndcg": "ndcg",
    "recip_rank": "recip_rank", "mrr": "recip_rank", "recall_5": "recall_5",
    "recall@5": "recall_5", "success_5": "success_5", "hit_rate@5": "success_5",
    "map_cut_5": "map_cut_5", "map@5": "map_cut_5", "Rprec": "Rprec",
    "r-precision": "Rprec", "bpref": "bpref", "num_ret": "num_ret",
    "num_rel_ret": "num_rel_ret", "num_rel": "num_rel",
    "iprec_at_recall_0.50": "iprec_at_recall_0.50", "rbp.8": None, "gm_map": None,
    "map-l2": None, "ndcg@10-l2": None, "official": None,
}  # fmt: skip
DOCS = [f"d{i}" for i in range(14)] + ["D1", "d10a", "z", "a"]
TIES = [1.0, 1.0000000001, 0.9999999999, 0.5, 0.5, 2.0, 0.0, -1.0]


def known(name: str) -> bool:
    "True if the registry takes `name` (the pool holds only names it takes)."
    try:
        M.expand_metrics(name) and [M.parse_metric(m) for m in M.expand_metrics(name)]
    except ValueError:
        return False
    return True


POOL = [m for m in NAMES if known(m)]


@st.composite
def cases(draw):
    "(qrels, run, metrics, convention, make_comparable, shuffle seed)."
    nq = draw(st.integers(1, 14))
    qrels, run = {}, {}
    for i in range(nq):
        judged = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True)
        )
        qrels[f"q{i}"] = {d: draw(st.integers(-1, 3)) for d in judged}
    mismatch = (
        draw(st.integers(0, 3)) == 0
    )  # most cases: the run holds the same queries
    for i in range(nq):
        if mismatch and draw(st.booleans()):
            continue  # a qrels query the run lacks: each convention's rule
        docs = draw(
            st.lists(st.sampled_from(DOCS), min_size=1, max_size=18, unique=True)
        )
        free = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
        scores = st.sampled_from(TIES) if draw(st.booleans()) else free
        run[f"q{i}"] = {d: draw(scores) for d in docs}
    if mismatch and draw(st.booleans()):
        run["extra"] = {DOCS[0]: 1.0}  # a run query without judgements
    if not run:
        run["q0"] = {DOCS[1]: 0.5}
    first = draw(st.sampled_from(POOL))  # at least one name, often repeated
    metrics = [first] + draw(st.lists(st.sampled_from(POOL + [first] * 3), max_size=5))
    convention = draw(st.sampled_from(["ranx", "trec_eval", "pytrec_eval"]))
    return (
        qrels,
        run,
        metrics,
        convention,
        draw(st.booleans()),
        draw(st.integers(0, 99)),
    )


def run_lines(run: dict, seed: int | None) -> bytes:
    "A TREC run's text, query by query (seed None) or its queries' lines interleaved."
    lines = {
        q: [f"{q} Q0 {d} {i + 1} {v!r} tag\n" for i, (d, v) in enumerate(docs.items())]
        for q, docs in run.items()
    }
    order = [q for q, x in lines.items() for _ in x]  # one slot per line
    if seed is not None:  # each query's lines stay in their order (ranx breaks ties
        np.random.default_rng(seed).shuffle(order)  # by it), the queries interleave
    left = {q: iter(x) for q, x in lines.items()}
    return "".join(next(left[q]) for q in order).encode()


def outcome(f):
    "f()'s per-query frame as {(query, metric): value} with its columns, or its error."
    try:
        t = f()
    except ValueError as e:  # QueryMismatch is a ValueError
        return type(e).__name__
    return list(t.columns), {(q, m): v for q, r in t.iterrows() for m, v in r.items()}


@contextlib.contextmanager
def pipe(data: bytes):
    "`/dev/fd/N`: the read end of a pipe a thread fills with `data` (no second read)."
    r, w = os.pipe()

    def fill():
        try:
            with open(w, "wb") as f:
                f.write(data)
        except BrokenPipeError:  # the reader stopped early (an error): nothing to do
            pass

    t = threading.Thread(target=fill, daemon=True)
    t.start()
    try:
        yield f"/dev/fd/{r}"
    finally:
        os.close(r)
        t.join()


def cli(*args) -> tuple:
    "`irbook eval ARGS` in this process: (exit status, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["eval", *map(str, args)])
    return status, out.getvalue(), err.getvalue()


def cli_frame(*args) -> pd.DataFrame:
    "The command's per-query JSON as a frame (a ValueError if it exits with an error)."
    status, out, err = cli(*args, "-q", "--format", "json")
    if status:  # the only error these cases can give: a query rule refuses the files
        assert "queries" in err, err
        raise QueryMismatch(err)
    return pd.DataFrame.from_dict(json.loads(out), orient="index")


def trec_eval_values(binary, qp, rp, mc: bool) -> tuple:
    "({(query, trec_eval name): value as printed}, exit status) of trec_eval -q."
    flags = ["-q", "-m", "all_trec"] + ["-c"] * mc
    p = subprocess.run(
        [str(binary), *flags, str(qp), str(rp)], capture_output=True, text=True
    )
    out = {}
    for line in p.stdout.splitlines():
        m, q, v = line.split()
        if q != "all" and m not in ("runid", "relstring"):  # the numbers only
            out[q, m] = float(v)
    return out, p.returncode


def check_case(case, tmp_path, trec_eval=None, dask=False):
    qrels, run, metrics, convention, mc, seed = case
    qp, files = tmp_path / "qrels", {}
    qp.write_text(
        "".join(f"{q} 0 {d} {v}\n" for q, x in qrels.items() for d, v in x.items())
    )
    for layout, s in (("grouped", None), ("shuffled", seed)):
        text = run_lines(run, s)
        (tmp_path / layout).write_bytes(text)
        (tmp_path / f"{layout}.gz").write_bytes(gzip.compress(text))
        files[layout] = text
    qc = M.read_columns(qp, "qrels")
    kw = dict(convention=convention, make_comparable=mc, per_query=True)
    flags = ["-m", *metrics, "--convention", convention] + ["-c"] * mc
    want = outcome(
        lambda: M.evaluate(
            qc, M.read_columns(tmp_path / "grouped", "run"), metrics, **kw
        )
    )
    if not isinstance(want, str):  # each name once, in the order first given
        assert want[0] == list(dict.fromkeys(M.expand_metrics(metrics)))
    got = {}
    for f in ("grouped", "shuffled", "grouped.gz", "shuffled.gz"):
        got[f"python {f}"] = outcome(
            lambda: M.evaluate(qc, M.read_columns(tmp_path / f, "run"), metrics, **kw)
        )
        got[f"--memory 0 {f}"] = outcome(
            lambda: cli_frame(qp, tmp_path / f, "--memory", "0", *flags)
        )
        if "shuffled" in f:  # the command's default and its smallest budget (1 MB)
            for m in ("512", "1"):
                got[f"--memory {m} {f}"] = outcome(
                    lambda: cli_frame(qp, tmp_path / f, "--memory", m, *flags)
                )
        for b in BUDGETS:
            got[f"stream {b} {f}"] = outcome(
                lambda: evaluate_file(qc, tmp_path / f, metrics, memory=b, **kw)
            )
        if dask:
            got[f"dask {f}"] = outcome(
                lambda: cli_frame(
                    qp, tmp_path / f, "--engine", "dask", "--scheduler", "sync", *flags
                )
            )
    for layout, text in files.items():  # read once, as `<(zcat run.gz)` gives it
        for b in BUDGETS:
            with pipe(text) as p:
                got[f"pipe {b} {layout}"] = outcome(
                    lambda: evaluate_file(qc, p, metrics, memory=b, **kw)
                )
        with pipe(text) as p:
            got[f"pipe --memory 0 {layout}"] = outcome(
                lambda: cli_frame(qp, p, "--memory", "0", *flags)
            )
    wrong = {k: v for k, v in got.items() if v != want}
    assert not wrong, (
        f"{len(wrong)} of {len(got)} paths differ, e.g. {next(iter(wrong))}"
    )
    if trec_eval is None or convention != "trec_eval":
        return
    theirs, status = trec_eval_values(trec_eval, qp, tmp_path / "shuffled", mc)
    if isinstance(want, str):  # irbook refused: a qrels query the run lacks
        assert status != 0  # and so does trec_eval
        return
    assert status == 0
    for (q, m), v in want[1].items():
        name = NAMES.get(m)  # None: a measure trec_eval lacks, or -l2
        if name is not None:
            assert abs(v - theirs[q, name]) <= 0.5e-4 + 1e-12, f"{q} {m}: {v}"
    queries = {q for q, _ in want[1]}
    assert queries == {q for q, m in theirs if m == "num_ret"}  # the same queries


@pytest.fixture(scope="module")
def binary(request):
    "trec_eval 10 (tests/conftest.py builds it), or None where it cannot be built."
    try:
        return request.getfixturevalue("trec_eval")
    except pytest.skip.Exception:  # the other paths are still compared
        return None


@settings(**HSET)
@given(case=cases())
def test_every_path_gives_the_same_per_query_values(case, binary, tmp_path_factory):
    check_case(case, tmp_path_factory.mktemp("case"), binary)


@pytest.mark.slow
@settings(**{**HSET, "max_examples": max(N // 4, 5)})
@given(case=cases())
def test_dask_gives_the_same_per_query_values(case, tmp_path_factory):
    pytest.importorskip("dask")
    check_case(case, tmp_path_factory.mktemp("case"), dask=True)


def test_a_measure_named_twice_is_listed_once(tmp_path):
    "The issue's case: `-m map map P_10` and `-m official map` give trec_eval's map."
    (tmp_path / "q").write_text("q1 0 d1 1\nq1 0 d3 1\nq2 0 d2 1\nq2 0 d5 1\n")
    docs = {"q1": ["d1", "d2", "d3"], "q2": ["d1", "d2", "d5"]}  # AP 5/6 and 7/12
    run = [
        f"{q} Q0 {d} {i + 1} {3 - i} r\n" for q in docs for i, d in enumerate(docs[q])
    ]
    (tmp_path / "r").write_text("".join(run))
    for ms in (["map", "map", "P_10"], ["official", "map"], ["P_10", "precision@10"]):
        outs = {cli(tmp_path / "q", tmp_path / "r", "-q", "--format", "json",
                    "--memory", m, "-m", *ms) for m in ("0", "1", "512")}  # fmt: skip
        assert len(outs) == 1, ms
        status, out, _ = outs.pop()
        t = json.loads(out)
        assert status == 0 and list(t["q1"]) == list(
            dict.fromkeys(M.expand_metrics(ms))
        )
        if "map" in ms:
            assert (t["q1"]["map"], t["q2"]["map"]) == pytest.approx((5 / 6, 7 / 12))


def big_files(folder, nq=400, seed=0) -> tuple:
    "A qrels and a shuffled run of `nq` queries (~1 MB, more than the smallest budget)."
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(nq):
        for d in rng.choice(500, int(rng.integers(1, 30)), replace=False):
            qrels.append(f"q{q} 0 doc{d} {rng.integers(0, 3)}\n")
        for i, d in enumerate(
            rng.choice(500, int(rng.integers(20, 100)), replace=False)
        ):
            run.append(f"q{q} Q0 doc{d} {i + 1} {rng.integers(0, 50) / 7:.6f} tag\n")
    rng.shuffle(run)
    (folder / "qrels").write_text("".join(qrels))
    (folder / "run.gz").write_bytes(gzip.compress("".join(run).encode()))
    (folder / "run").write_text("".join(run))
    return folder / "qrels", folder / "run"


_MAIN = "from irbook.cli import command; command()"


@pytest.mark.parametrize("memory", ["1", "512", "0"])
@pytest.mark.parametrize("how", ["stdin", "fd"])
def test_the_command_reads_a_pipe(tmp_path, how, memory):
    "`irbook eval q /dev/stdin < pipe` and `irbook eval q <(zcat run.gz)` read it once."
    qp, rp = big_files(tmp_path)
    metrics = ["map", "P_10", "ndcg@10", "map"]
    want = M.evaluate(M.read_columns(qp, "qrels"), M.read_columns(rp, "run"), metrics,
                      per_query=True)  # fmt: skip
    src = subprocess.Popen(["gzip", "-dc", str(rp) + ".gz"], stdout=subprocess.PIPE)
    fd = src.stdout.fileno()
    path, kw = ("/dev/stdin", dict(stdin=src.stdout)) if how == "stdin" else (
        f"/dev/fd/{fd}", dict(pass_fds=(fd,)))  # fmt: skip
    args = [qp, path, "-m", *metrics, "-q", "--format", "json", "--memory", memory]
    p = subprocess.run([sys.executable, "-c", _MAIN, "eval", *map(str, args)],
                       capture_output=True, text=True, **kw)  # fmt: skip
    src.stdout.close()
    src.wait()
    assert p.returncode == 0, p.stderr
    got = pd.DataFrame.from_dict(json.loads(p.stdout), orient="index")
    assert list(got.columns) == ["map", "P_10", "ndcg@10"]
    assert got.to_dict() == want.to_dict()


def test_one_entry_point_takes_the_engine(tmp_path):
    "evaluate(engine=...): the same per-query values in memory, in batches, by dask."
    qrels = {"q1": {"d1": 1, "d3": 2}, "q2": {"d2": 1}, "q3": {"d9": 1}}
    lines = ["q1 Q0 d3 1 3.0 r", "q1 Q0 d1 2 2.0 r", "q1 Q0 d2 3 2.0 r",
             "q2 Q0 d5 1 9.0 r", "q2 Q0 d2 2 1.0 r", "q3 Q0 d8 1 1.0 r"]  # fmt: skip
    path = tmp_path / "run.trec"
    path.write_text("\n".join(lines) + "\n")
    ms = ["ndcg@10", "map", "recip_rank", "P_5"]
    kw = dict(per_query=True, convention="trec_eval")
    want = M.evaluate(qrels, M.read_run(path), ms, **kw)
    pd.testing.assert_frame_equal(M.evaluate(qrels, str(path), ms, **kw), want)
    got = M.evaluate(qrels, path, ms, engine="stream", memory=1, **kw)
    pd.testing.assert_frame_equal(got.loc[want.index], want, check_names=False)
    assert set(M.ENGINES) == {"stream", "dask"}
    with pytest.raises(ValueError, match="one of 'memory', 'stream', 'dask'"):
        M.evaluate(qrels, path, ms, engine="spark")
    with pytest.raises(TypeError, match="memory"):
        M.evaluate(qrels, M.read_run(path), ms, memory=1)
    with pytest.raises(ValueError, match="judged_only"):
        M.evaluate(qrels, path, ms, engine="stream", judged_only=True)
    # per_query="columns": the same values, as (query ids, {metric: array}), no pandas
    pytest.importorskip("dask")
    for engine, kw2 in [("memory", {}), ("stream", {"memory": 1}), ("dask", {})]:
        run = M.read_run(path) if engine == "memory" else path
        kw3 = dict(convention="trec_eval", engine=engine, **kw2)
        qids, cols = M.evaluate(qrels, run, ms, per_query="columns", **kw3)
        assert list(cols) == ms and sorted(qids) == sorted(want.index)
        at = [qids.index(q) for q in want.index]
        for m in ms:
            assert np.array_equal(np.asarray(cols[m])[at], want[m].to_numpy()), m
    with pytest.raises(ValueError, match="per_query is True, False or"):
        M.evaluate(qrels, M.read_run(path), ms, per_query="dict")
