"""Streaming evaluation (issue 21): `evaluate_file` reads a run a batch of whole queries
at a time and must give exactly what `evaluate` gives on the whole run read by
`read_columns`: the same per-query floats, the same means, the same errors, under every
convention, with or without make_comparable, for runs written query by query or not,
plain or gzipped, with queries cut across blocks.

Run: python -m pytest tests/test_stream.py -q
"""

import gzip

import numpy as np
import pandas as pd
import pytest

import irbook.metrics as M
from irbook.cli import main
from irbook.metrics.stream import block_size, evaluate_file, query_blocks

CONVENTIONS = ["ranx", "trec_eval", "pytrec_eval"]
METRICS = ["ndcg@10", "ndcg", "map", "map@5", "mrr", "recall@20", "precision@5",
           "bpref", "r-precision", "rbp.8", "gm_map", "num_ret", "num_rel_ret",
           "iprec_at_recall@0.5", "dcg_burges@10"]  # fmt: skip
TINY = 600 * 14  # a `memory` whose blocks (600 bytes) cut queries everywhere


def make_files(
    folder, seed, int_docs=False, extra_run=3, extra_qrels=3, int_qids=False
):
    """A seeded qrels and run: varied depths, tied scores, negative labels, odd queries
    (`int_qids`: query ids that are integers, and run-only ones that read as one of
    the qrels' with a leading zero, "03" against "3")."""
    rng = np.random.default_rng(seed)
    doc = (lambda d: str(d)) if int_docs else (lambda d: f"d{d}")
    nq = 40

    def query(q):
        if not int_qids:
            return f"q{q}"
        return f"0{q + extra_qrels}" if q < extra_qrels else str(q)

    run, qrels = [], []
    for q in range(nq + extra_run):  # the first `extra_qrels` have no judgements
        depth = int(rng.integers(1, 70))
        for i, d in enumerate(rng.choice(300, depth, replace=False)):
            score = rng.integers(0, 6) / 4  # ties, which the conventions break apart
            run.append(f"{query(q)} Q0 {doc(d)} {i + 1} {score} tag\n")
    for q in range(extra_qrels, nq + extra_qrels):  # the run lacks the last ones
        for d in rng.choice(300, int(rng.integers(1, 25)), replace=False):
            qrels.append(f"{query(q)} 0 {doc(d)} {rng.integers(-1, 4)}\n")
    (folder / "qrels").write_text("".join(qrels))
    (folder / "run").write_text("".join(run))
    shuffled = list(run)
    rng.shuffle(shuffled)
    (folder / "unsorted").write_text("".join(shuffled))
    (folder / "run.gz").write_bytes(gzip.compress("".join(run).encode()))
    (folder / "unsorted.gz").write_bytes(gzip.compress("".join(shuffled).encode()))
    return folder / "qrels"


@pytest.fixture(params=["lines", "pyarrow"])
def reader(request, monkeypatch):
    """Blocks read by the line reader (a small file's) or by pyarrow, as a large file's
    are (a spill's rows then made from pyarrow's fields, `_spill_batch`)."""
    import irbook.metrics.stream as S

    if request.param == "pyarrow":
        monkeypatch.setattr(S, "_large", lambda path: True)
    return request.param


def both(qrels, run, **kw):
    "(in-memory result or error text, streaming result or error text)."
    out = []
    for f in (
        lambda: M.evaluate(qrels, M.read_columns(run, "run"), METRICS, **kw),
        lambda: evaluate_file(qrels, run, METRICS, memory=TINY, **kw),
    ):
        try:
            out.append(f())
        except ValueError as e:  # QueryMismatch is a ValueError
            out.append(f"{type(e).__name__}: {e}")
    return out


@pytest.mark.parametrize("int_docs", [False, True])
@pytest.mark.parametrize("name", ["run", "unsorted", "run.gz", "unsorted.gz"])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_streaming_equals_in_memory(tmp_path, name, convention, int_docs):
    qrels = M.read_columns(make_files(tmp_path, 0, int_docs), "qrels")
    for mc in (False, True):
        for per_query in (True, False) if name == "run" else (True,):
            kw = dict(convention=convention, make_comparable=mc, per_query=per_query)
            want, got = both(qrels, tmp_path / name, **kw)
            if isinstance(want, pd.DataFrame):
                pd.testing.assert_frame_equal(got, want, check_exact=True)
            else:
                assert got == want  # the same means, or the same error


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_query_rules_are_the_in_memory_ones(tmp_path, convention):
    "Same queries: all agree; missing or extra queries: each convention's own rule."
    for extra_run, extra_qrels in [(0, 0), (3, 0), (0, 3), (3, 3)]:
        qrels = make_files(tmp_path, 1, extra_run=extra_run, extra_qrels=extra_qrels)
        qc = M.read_columns(qrels, "qrels")
        for mc in (False, True):
            kw = dict(convention=convention, make_comparable=mc, per_query=True)
            want, got = both(qc, tmp_path / "run", **kw)
            if isinstance(want, str):
                assert got == want
            else:
                pd.testing.assert_frame_equal(got, want, check_exact=True)
        if convention == "trec_eval" and extra_qrels > extra_run:  # trec_eval refuses
            got = both(qc, tmp_path / "run", convention=convention)[1]
            assert "qrels queries missing from the run" in got


@pytest.mark.parametrize("name", ["run", "unsorted"])
def test_many_queries_on_one_side_only(tmp_path, name, reader):
    """More queries on one side than an error shows (12 the qrels lack, 9 the run
    lacks), met across many blocks: the same values, and the same error (its first five
    ids, in run order, and its counts), as in memory."""
    qrels = make_files(tmp_path, 10, extra_run=12, extra_qrels=9)
    qc = M.read_columns(qrels, "qrels")
    for convention in CONVENTIONS:
        for mc in (False, True):
            kw = dict(convention=convention, make_comparable=mc, per_query=True)
            want, got = both(qc, tmp_path / name, **kw)
            if isinstance(want, str):
                assert got == want and "and 7 more" in got
            else:
                pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_queries_looked_up_by_hash_or_by_str(tmp_path, monkeypatch, reader):
    """An id's hash is the same in arrays of any width; a qrels whose ids share a hash
    is looked up by str instead, with the same values as in memory either way."""
    import irbook.metrics.stream as S

    a = np.array(["q1", "q10", "ab\u00e9"])
    b = np.array(["q1", "q10", "ab\u00e9", "a much longer id"])
    assert (S._hashes(a) == S._hashes(b)[:3]).all() and len(set(S._hashes(b))) == 4
    qrels = M.read_columns(make_files(tmp_path, 11, extra_run=12), "qrels")
    assert S._Queries(qrels.qids).table is not None
    kw = dict(per_query=True, make_comparable=True)
    for by in ("hash", "str"):
        if by == "str":  # every id one hash
            monkeypatch.setattr(S, "_hashes", lambda x: np.zeros(len(x), np.uint64))
            assert S._Queries(qrels.qids).table is None
        for name in ("run", "unsorted"):
            want, got = both(qrels, tmp_path / name, **kw)
            pd.testing.assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("int_docs", [False, True])
def test_integer_query_ids_are_looked_up_by_value(tmp_path, reader, int_docs):
    """Query ids that are all plain integers are looked up by their value (a table of
    ints, no hash), and a run id that reads as one of them with a leading zero ("03")
    stays another query, as in memory, read in order or spilled."""
    import irbook.metrics.stream as S

    qrels = M.read_columns(make_files(tmp_path, 14, int_docs, int_qids=True), "qrels")
    assert S._Queries(qrels.qids).ints
    assert "03" in (tmp_path / "run").read_text() and "3" in set(qrels.qids)
    for convention in CONVENTIONS:
        for mc in (False, True):
            kw = dict(convention=convention, make_comparable=mc, per_query=True)
            for name in ("run", "unsorted"):
                want, got = both(qrels, tmp_path / name, **kw)
                if isinstance(want, str):
                    assert got == want and "03" in got
                else:
                    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_query_lookup_tables(tmp_path):
    """Every qrels id is found at its place and no other id is, for tables of any size,
    ids that are integers or not; a table whose last ids pass its end wraps round."""
    import irbook.metrics.stream as S

    for n in (1, 2, 3, 7, 100, 5000):
        for ints in (False, True):
            ids = np.array([str(i) if ints else f"q{i}" for i in range(n)])
            q = S._Queries(ids)
            assert q.ints == ints and q.table is not None
            table = q.table[q.table >= 0]
            assert (np.sort(table) == np.arange(n)).all()
            others = np.array(["0" + ids[0], ids[-1] + "x", "-1", "", str(n), f"q{n}"])
            got = q.places(np.concatenate([ids[::-1], others]))
            assert (got == np.r_[np.arange(n)[::-1], [-1] * len(others)]).all()
    for n in (3, 50):  # every id's own slot the table's last but one
        h = np.arange(n, dtype=np.uint64)
        table, bits = S._hash_table(h, np.int32)
        slots = S._slots(h, bits)
        for i in range(n):  # reached from its own slot before a free one
            k = slots[i]
            while table[k] != i:
                assert table[k] >= 0
                k = (k + 1) % len(table)


def test_int_values_are_those_of_plain_integers():
    import irbook.metrics.columns as C

    ids = ["0", "7", "007", "+7", " 7", "7 ", "1e3", "12a", "", "9" * 18, "9" * 19]
    ok, value = C.plain_int_values(np.array(ids))
    want = np.array([C.plain_int(i) for i in ids])  # the reader's rule, an id at a time
    assert (ok == (want >= 0)).all() and (value[ok] == want[ok]).all() and ok.sum() == 3


@pytest.mark.parametrize("fanout,held", [(4, 0), (4, 10**6), (2, 0)])
def test_a_spill_spread_again_over_levels(tmp_path, monkeypatch, fanout, held):
    """At most `fanout` files written at once: a shuffled run spread again over several
    levels (files of their own, then files in one file, then batches of those), its
    rows held a block's worth (`held` 0) or all at once: the same values as in memory,
    and every level's files read."""
    import irbook.metrics.stream as S

    monkeypatch.setattr(S, "_FANOUT", fanout)
    monkeypatch.setattr(S, "_HELD", held)
    spread, names = S._spread, []

    def spreading(parts, n, size, folder, sp, held, prefix=""):
        out = spread(parts, n, size, folder, sp, held, prefix)
        names.extend(name for name, _ in out)
        return out

    monkeypatch.setattr(S, "_spread", spreading)
    qrels = M.read_columns(make_files(tmp_path, 12), "qrels")
    for convention in CONVENTIONS:
        kw = dict(convention=convention, make_comparable=True, per_query=True)
        want, got = both(qrels, tmp_path / "unsorted", **kw)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert any(n.count(".") >= 2 and "all@" in n for n in names), names[:5]  # 3 levels


def test_integer_doc_ids_sieved_or_not(tmp_path, monkeypatch):
    """Integer doc ids are joined with a sieve from `_SIEVED` run docs on: sieved always
    (with 20 bits, or all in one bucket) or never, the same values in memory and
    streamed."""
    import irbook.metrics.join as J

    qrels = M.read_columns(make_files(tmp_path, 13, int_docs=True), "qrels")
    kw = dict(convention="trec_eval", make_comparable=True, per_query=True)
    monkeypatch.setattr(J, "_SIEVED", 10**9)  # a binary search of every run doc
    want = {n: both(qrels, tmp_path / n, **kw)[0] for n in ("run", "unsorted")}
    assert (want["run"]["map"] > 0).any()
    for bits in (2**20 - 1, 0):
        monkeypatch.setattr(J, "_SIEVED", 0)
        monkeypatch.setattr(J, "_SIEVE", bits)
        for name, w in want.items():
            for got in both(qrels, tmp_path / name, **kw):
                pd.testing.assert_frame_equal(got, w, check_exact=True)


def test_batches_hold_whole_queries_and_stay_near_the_block_size(tmp_path):
    make_files(tmp_path, 2)
    text = (tmp_path / "run").read_bytes()
    longest = max(
        sum(len(x) + 1 for x in text.decode().splitlines() if x.split()[0] == q)
        for q in {x.split()[0] for x in text.decode().splitlines()}
    )
    size = block_size(TINY)
    parts = list(query_blocks(tmp_path / "run", size))
    assert len(parts) > 10 and b"".join(t for t, _ in parts) == text
    queries = [[x.split()[0] for x in t.decode().splitlines()] for t, _ in parts]
    flat = [q for qs in queries for q in dict.fromkeys(qs)]
    assert len(flat) == len(set(flat))  # no query in two batches
    assert max(len(t) for t, _ in parts) <= size + longest
    lines = [line for _, line in parts]
    assert lines == list(np.cumsum([1] + [t.count(b"\n") for t, _ in parts[:-1]]))


def test_a_run_in_query_order_is_not_spilled(tmp_path, monkeypatch):
    """A run written query by query is scored in one pass, however small the blocks;
    one whose first block meets a query again is spilled before any batch is scored,
    unless the whole run is one block (scored as it is)."""
    import irbook.metrics.stream as S

    qrels = M.read_columns(make_files(tmp_path, 9), "qrels")
    events, spill, call = [], S.spill, S._Scorer.__call__

    def spilling(*a, **k):
        events.append("spill")
        return spill(*a, **k)

    def scoring(self, *a):
        events.append("score")
        return call(self, *a)

    monkeypatch.setattr(S, "spill", spilling)
    monkeypatch.setattr(S._Scorer, "__call__", scoring)
    kw = dict(make_comparable=True)
    evaluate_file(qrels, tmp_path / "run", "map", memory=TINY, **kw)
    assert "spill" not in events and "score" in events
    lines = (tmp_path / "run").read_text().splitlines(keepends=True)
    q0, q1 = ([x for x in lines if x.startswith(f"{q} ")][:2] for q in ("q0", "q1"))
    assert len(q0) == len(q1) == 2
    rest = [x for x in lines if x not in q0 + q1]  # q0, q1, q0, q1: in the first block
    (tmp_path / "again").write_text("".join([q0[0], q1[0], q0[1], q1[1], *rest]))
    want = M.evaluate(qrels, M.read_columns(tmp_path / "again", "run"), "map", **kw)
    for memory, first in ((TINY, "spill"), (10**6, "score")):
        events.clear()
        got = evaluate_file(qrels, tmp_path / "again", "map", memory=memory, **kw)
        assert got == want
        assert events[0] == first and events.count("spill") == (first == "spill")


def test_a_query_longer_than_a_block(tmp_path):
    qrels = make_files(tmp_path, 3)
    big = "".join(f"q7 Q0 x{i} {i + 1} {1 / (i + 1)} t\n" for i in range(2000))
    run = (tmp_path / "run").read_text()
    (tmp_path / "big").write_text(big + run)  # q7 in two places: spilled
    (tmp_path / "big2").write_text(big.replace("q7", "q99") + run)  # grouped
    for f in ("big", "big2"):
        kw = dict(per_query=True, make_comparable=True)
        want, got = both(M.read_columns(qrels, "qrels"), tmp_path / f, **kw)
        pd.testing.assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("bad", ["q5 Q0 d1 1 x t", "q5 Q0 d1 1", "q5 Q0 d1 1 inf t"])
def test_a_bad_line_late_in_the_run_is_named_as_in_memory(tmp_path, bad):
    qrels = M.read_columns(make_files(tmp_path, 4), "qrels")
    lines = (tmp_path / "run").read_text().splitlines(keepends=True)
    k = len(lines) - 5  # far past the first block
    (tmp_path / "bad").write_text("".join(lines[:k] + [bad + "\n"] + lines[k:]))
    want, got = both(qrels, tmp_path / "bad")
    assert isinstance(want, str) and got == want and f"line {k + 1}:" in got


@pytest.mark.parametrize("bad", ["q5 Q0 d1 1 x t", "q5 Q0 d1 1 inf t"])
def test_a_bad_line_late_in_a_spilled_run_is_named_as_in_memory(tmp_path, bad, reader):
    "A shuffled run's lines are numbered only for an error's message, and rightly."
    qrels = M.read_columns(make_files(tmp_path, 4), "qrels")
    lines = (tmp_path / "unsorted").read_text().splitlines(keepends=True)
    k = len(lines) - 5  # far past the first block, and the first pass's end
    (tmp_path / "bad").write_text("".join(lines[:k] + [bad + "\n"] + lines[k:]))
    want, got = both(qrels, tmp_path / "bad")
    assert isinstance(want, str) and got == want and f"line {k + 1}:" in got


@pytest.mark.parametrize("later", ["d5", "007", "x y"])
def test_a_spill_whose_later_doc_ids_are_not_integers(tmp_path, later, reader):
    """A shuffled run spills its doc ids as integers while they all are: one that is
    not, after the first block, makes it spill them as strings, with the same values
    (and the same error) as in memory."""
    qrels = M.read_columns(make_files(tmp_path, 8, int_docs=True), "qrels")
    lines = (tmp_path / "unsorted").read_text().splitlines(keepends=True)
    q, _, d, *rest = lines[-3].split(" ")
    odd = " ".join([q, "Q0", later.replace(" ", "_"), *rest])  # the same query
    (tmp_path / "mixed").write_text("".join(lines[:-3] + [odd] + lines[-2:]))
    for c in ("ranx", "trec_eval"):
        kw = dict(convention=c, per_query=True, make_comparable=True)
        want, got = both(qrels, tmp_path / "mixed", **kw)
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_a_repeated_doc_is_refused(tmp_path, reader):
    qrels = M.read_columns(make_files(tmp_path, 5), "qrels")
    lines = (tmp_path / "run").read_text().splitlines(keepends=True)
    (tmp_path / "dup").write_text("".join(lines[:-1] + [lines[-2], lines[-1]]))
    want, got = both(qrels, tmp_path / "dup")  # query by query: the same message
    assert "duplicate doc id" in want and got == want
    (tmp_path / "dup2").write_text("".join(lines + [lines[3]]))  # far apart
    want, got = both(qrels, tmp_path / "dup2")
    assert "duplicate doc id" in want and "repeated in query" in got
    shuffled = (tmp_path / "unsorted").read_text().splitlines(keepends=True)
    k = len(shuffled) // 2  # a shuffled run's repeat within a block: its line named
    (tmp_path / "dup3").write_text("".join(shuffled[: k + 1] + shuffled[k:]))
    want, got = both(qrels, tmp_path / "dup3")
    assert f"line {k + 2}: duplicate doc id" in want and got == want


@pytest.mark.parametrize("int_docs", [False, True])
def test_a_spilled_run_with_comments(tmp_path, reader, int_docs):
    """Comment lines in a shuffled run, a result line commented out among them: read
    past, by pyarrow's blocks too (where such a line parses as any other)."""
    qrels = M.read_columns(make_files(tmp_path, 15, int_docs), "qrels")
    lines = (tmp_path / "unsorted").read_text().splitlines(keepends=True)
    for k in (len(lines) - 4, len(lines) // 2, 3):  # blocks of regular lines only
        lines.insert(k, "#" + lines[k].replace(" Q0 ", " Q0 x"))
    lines.insert(1, "# a comment\n")
    (tmp_path / "commented").write_text("".join(lines))
    for convention in CONVENTIONS:
        for mc in (False, True):
            kw = dict(convention=convention, make_comparable=mc, per_query=True)
            want, got = both(qrels, tmp_path / "commented", **kw)
            if isinstance(want, str):
                assert got == want and "#" not in got
            else:
                pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_a_run_without_results(tmp_path):
    qrels = M.read_columns(make_files(tmp_path, 6), "qrels")
    (tmp_path / "empty").write_text("# nothing\n\n")
    want, got = both(qrels, tmp_path / "empty")
    assert "holds no results" in want and got == want


def test_cli_streams_by_default_and_reads_whole_with_memory_0(tmp_path, capsys):
    qrels = make_files(tmp_path, 7)
    out = []
    for extra in ([], ["--memory", "0"], ["--memory", "1"]):
        args = ["eval", str(qrels), str(tmp_path / "unsorted.gz"), "-m", *METRICS]
        assert main(args + ["-c", "-q", "--format", "json", *extra]) == 0
        out.append(capsys.readouterr().out)
    assert out[0] == out[1] == out[2]
    assert main(["eval", str(qrels), str(tmp_path / "run"), "--memory", "-1"]) == 2
    assert "--memory" in capsys.readouterr().err


_BOUND_CHILD = r"""
import gc, json, sys
import irbook.cli
import irbook.metrics as M
import pyarrow.compute, pyarrow.csv
from irbook.metrics.stream import evaluate_file


def status(field):  # this process's own memory, MB (ru_maxrss would hold the
    for line in open("/proc/self/status"):  # parent's RSS at the fork: Linux keeps
        if line.startswith(field + ":"):  # the larger across exec)
            return int(line.split()[1]) / 1024


qc = M.read_columns(sys.argv[1], "qrels")
gc.collect()
with open("/proc/self/clear_refs", "w") as f:  # the peak from here on: the qrels
    f.write("5")  # reader's own (transient) peak is not the run's
rss0 = status("VmRSS")  # R0: what the process holds once the qrels are read
means = evaluate_file(qc, sys.argv[2], ["ndcg@10", "map"], convention="trec_eval",
                      memory=int(sys.argv[3]) * 2**20)  # means: pandas not imported
print(json.dumps({"rss0": rss0, "peak": status("VmHWM"), "means": means}))
"""


@pytest.mark.parametrize(
    "memory,nq,depth", [(4, 800, 1000), (16, 800, 1000), (16, 200_000, 4)]
)
def test_memory_bounds_the_process(tmp_path, memory, nq, depth):
    """Peak RSS <= memory + the RSS before the run is read + OVERHEAD, for a run in
    query order and the same run shuffled (spilled, spread again): 800,000 lines, of
    long queries or of many short ones (what is kept a query must stay small)."""
    import json
    import subprocess
    import sys

    from irbook.metrics.stream import OVERHEAD

    rng = np.random.default_rng(0)
    base = rng.integers(0, 8000, (nq, 1)) * depth  # ids apart within a query
    k = (3, 700) if depth > 700 else (0, 3)  # two relevant docs a query
    docs = rng.permuted(base + np.arange(depth), axis=1)
    q = np.repeat(np.arange(nq), depth)
    rank = np.tile(np.arange(1, depth + 1), nq)
    lines = [
        f"{a} Q0 {b} {r} {s:.4f} run\n"
        for a, b, r, s in zip(q, docs.ravel(), rank, 1000.0 - rank + rng.random(q.size))
    ]
    (tmp_path / "sorted").write_text("".join(lines))
    rng.shuffle(lines)
    (tmp_path / "shuffled").write_text("".join(lines))
    del lines
    (tmp_path / "qrels").write_text(
        "".join(f"{a} 0 {docs[a, i]} 1\n" for a in range(nq) for i in k)
    )
    got = {}
    for order in ("sorted", "shuffled"):
        p = subprocess.run(
            [sys.executable, "-c", _BOUND_CHILD, tmp_path / "qrels", tmp_path / order,
             str(memory)], capture_output=True, text=True, check=True
        )  # fmt: skip
        got[order] = json.loads(p.stdout)
        bound = memory + got[order]["rss0"] + OVERHEAD / 2**20
        assert got[order]["peak"] <= bound, (order, got[order], bound)
    assert got["sorted"]["means"] == got["shuffled"]["means"]


def test_tail_finds_the_last_querys_first_line():
    "`_tail`'s quick test of a line (its query's id, then a space) agrees with a split."
    from irbook.metrics.stream import _tail

    def slow(data: bytes, end: int) -> int:  # every line split, as the line reader does
        last, lines = None, data[:end].splitlines(keepends=True)
        at = end
        for line in reversed(lines):
            f = line.split(None, 1)
            if f and not f[0].startswith(b"#"):
                if last is None:
                    last = f[0]
                elif f[0] != last:
                    return at
            at -= len(line)
        return 0

    rng = np.random.default_rng(3)
    ids = [b"q1", b"q10", b"q", b"1", b"11", b"#q1"]
    for _ in range(400):
        lines = []
        for _ in range(rng.integers(1, 12)):
            q = ids[rng.integers(len(ids))]
            kind = rng.integers(6)
            if kind == 0:
                lines.append(b"\n")  # blank
            elif kind == 1:
                lines.append(b"# a comment " + q + b"\n")
            elif kind == 2:
                lines.append(b"  " + q + b" Q0 d 1 2 r\n")  # leading whitespace
            elif kind == 3:
                lines.append(q + b"\tQ0\td\t1\t2\tr\n")  # tabs
            else:
                lines.append(q + b" Q0 d 1 2 r\n")
        data = b"".join(lines)
        assert _tail(data, len(data)) == slow(data, len(data)), data


def test_a_lost_chunk_is_read_again(tmp_path, monkeypatch):
    "pyarrow's rare 'a chunk failed converting' is read again in one thread."
    import pyarrow as pa
    import pyarrow.csv as csv

    from irbook.metrics import io as mio

    real, calls = csv.read_csv, []

    def flaky(*a, **kw):  # the threaded read fails as pyarrow 26's once did
        calls.append(kw["read_options"].use_threads)
        if kw["read_options"].use_threads:
            raise pa.ArrowException("Unknown error: a chunk failed converting")
        return real(*a, **kw)

    data = b"".join(f"q{i % 7} Q0 d{i} 1 {i / 10} r\n".encode() for i in range(500))
    monkeypatch.setattr(csv, "read_csv", flaky)
    t = mio.fast_table(data, "run")
    assert calls == [True, False] and t.num_rows == 500
    monkeypatch.setattr(csv, "read_csv", lambda *a, **kw: (_ for _ in ()).throw(
        pa.ArrowCancelled("stopped")))  # fmt: skip
    with pytest.raises(pa.ArrowCancelled):  # a signal is not swallowed
        mio.fast_table(data, "run")
