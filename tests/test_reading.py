"""One reading semantics (trec_eval 10's): random qrels and run files, written with
every separator, line end, comment, blank line, BOM, extra field and number syntax
the format allows, read by the fast (pyarrow) reader and by the line reader into
IDENTICAL Columns, equal to what was written, and counted alike by trec_eval itself
(built from /work/shared/trec_eval when a C compiler is there).

Run: python -m pytest tests/test_reading.py -q   (the stress test: -m slow)
"""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irbook.metrics as M
from irbook.metrics.io import _fast_columns, _line_columns, read_bytes
from irbook.metrics.stream import evaluate_file, query_blocks

N = max(int(os.environ.get("IRBOOK_HYPOTHESIS_EXAMPLES", 250)), 200)
HSET = dict(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
QIDS = ["q1", "q2", "301", "質問", "q-é"]
DOCS = ["d1", "d2", "D1", "7", "12", "007", "文書", "é9", "a.b", "x_y", "0"]
# separators inside a line: every run of ASCII whitespace that is not a line end
SEPS = [" ", "\t", "  ", " \t ", "\t\t", "\x0b", "\x0c", " \r "]
SCORES = ["1", "1.0", ".5", "5.", "1e3", "1E-3", "+1", "-0.0", "-2.5e-1", "0.125", "42"]
LABELS = ["0", "1", "2", "3", "-1", "-2", "+1", "007"]


def canonical(records, kind):
    "The {query: {doc: value}} the records mean."
    out = {}
    for q, d, v in records:
        out.setdefault(q, {})[d] = int(v) if kind == "qrels" else float(v)
    return out


@st.composite
def trec_file(draw, kind):
    "(file bytes, records, whether trec_eval reads it as we do, whether it is regular)."
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(QIDS), st.sampled_from(DOCS)),
            min_size=1,
            max_size=25,
            unique=True,
        )
    )
    values = SCORES if kind == "run" else LABELS
    records = [(q, d, draw(st.sampled_from(values))) for q, d in pairs]
    regular = draw(st.booleans())  # one separator throughout: the fast reader's case
    one_sep = draw(st.sampled_from([" ", "\t"]))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    # trec_eval's qrels reader takes no blank line, no indented comment and never
    # two comment lines in a row (get_qrels.c): we read them all, it cannot
    liberal = draw(st.booleans())
    lines, last_comment = [], False
    for i, (q, d, v) in enumerate(records):
        if not regular and draw(st.integers(0, 5)) == 0:
            if kind == "run" or liberal or (not last_comment and i > 0):
                lead = draw(st.sampled_from(["", " ", "\t"])) if liberal else ""
                lines.append(lead + "# a comment, " + "with fields" * i)
                last_comment = True
        if not regular and (kind == "run" or liberal) and draw(st.integers(0, 6)) == 0:
            lines.append(draw(st.sampled_from(["", " ", "\t \x0c"])))
        sep = (lambda: one_sep) if regular else (lambda: draw(st.sampled_from(SEPS)))
        if kind == "run":
            tag = draw(st.sampled_from(["run", "tag-1", "r"]))
            fields = [q, "Q0", d, str(i + 1), v, tag]
            if not regular and draw(st.booleans()):
                fields += ["extra", "fields"][: draw(st.integers(1, 2))]
        else:
            fields = [q, draw(st.sampled_from(["0", "Q0", "1"])), d, v]
        line = fields[0]
        for f in fields[1:]:
            line += sep() + f
        if not regular and draw(st.integers(0, 3)) == 0:
            line = draw(st.sampled_from([" ", "\t"])) + line + sep()
        lines.append(line)
        last_comment = False
    if kind == "qrels" and last_comment:
        lines.append(f"{records[0][0]} 0 a-last-doc 0")
        records.append((records[0][0], "a-last-doc", "0"))
    text = eol.join(lines) + (eol if draw(st.booleans()) else "")
    bom = not regular and draw(st.booleans())
    data = ("\ufeff" if bom else "").encode() + text.encode()
    return data, records, kind == "run" or not liberal, regular


def same_columns(a, b):
    "True if two Columns are identical, array by array."
    docs = [x if x is None else [str(y) for y in x] for x in (a.docs, b.docs)]
    return (
        a.kind == b.kind
        and np.array_equal(a.qcode, b.qcode)
        and list(a.qids) == list(b.qids)
        and np.array_equal(a.dcode, b.dcode)
        and docs[0] == docs[1]
        and np.array_equal(a.values, b.values)
        and np.array_equal(np.signbit(a.values), np.signbit(b.values))
    )


def trec_eval_counts(exe, qrels: Path, run: Path) -> dict:
    "{(measure, query): value} of trec_eval -c -q: num_ret, num_rel, num_rel_ret."
    out = subprocess.run(
        [
            exe,
            "-c",
            "-q",
            "-m",
            "num_ret",
            "-m",
            "num_rel",
            "-m",
            "num_rel_ret",
            qrels,
            run,
        ],
        capture_output=True,
        check=True,
    ).stdout.decode()
    counts = {}
    for line in out.splitlines():
        m, q, v = line.split("\t")
        if q.strip() != "all":
            counts[m.strip(), q.strip()] = int(v)
    return counts


def our_counts(qd: dict, rd: dict) -> dict:
    "The same counts from our dicts (relevant: label >= 1, as trec_eval's default)."
    counts = {}
    for q in qd:  # -c: every judged query, a query the run misses retrieving nothing
        rel = {d for d, v in qd[q].items() if v >= 1}
        counts["num_ret", q] = len(rd.get(q, {}))
        counts["num_rel", q] = len(rel)
        counts["num_rel_ret", q] = len(rel & set(rd.get(q, {})))
    return counts


@settings(max_examples=N, **HSET)
@given(trec_file("qrels"), trec_file("run"), st.booleans())
def test_fast_and_line_readers_agree_with_each_other_and_trec_eval(
    trec_eval, tmp_path_factory, qfile, rfile, gz
):
    tmp = tmp_path_factory.mktemp("files")
    got = {}
    for kind, (data, records, *_) in (("qrels", qfile), ("run", rfile)):
        p = tmp / (f"{kind}.trec" + (".gz" if gz else ""))
        p.write_bytes(gzip.compress(data) if gz else data)
        line = _line_columns(read_bytes(p), p, kind)
        fast = _fast_columns(read_bytes(p), kind)
        assert fast is None or same_columns(fast, line)
        assert same_columns(M.read_columns(p, kind), line)
        got[kind] = line.to_dict()
        assert got[kind] == canonical(records, kind)
    if not qfile[2]:
        return  # trec_eval reads this qrels file otherwise (or refuses it)
    if any(max(x.values()) < 0 for x in got["qrels"].values()):
        return  # trec_eval fails on a query whose labels are all negative

    # trec_eval keeps a BOM as part of the first query id: give it the file without
    plain = {}
    for kind, (data, *_) in (("qrels", qfile), ("run", rfile)):
        plain[kind] = tmp / f"plain.{kind}"
        plain[kind].write_bytes(data.removeprefix("\ufeff".encode()))
    want = trec_eval_counts(trec_eval, plain["qrels"], plain["run"])
    assert our_counts(got["qrels"], got["run"]) == want


@settings(max_examples=N, **HSET)
@given(trec_file("run"))
def test_regular_files_take_the_fast_path(rfile):
    "A file with one separator throughout and nothing else unusual is read by pyarrow."
    data, records, _, regular = rfile
    if regular:
        assert _fast_columns(data, "run") is not None


@settings(max_examples=N, **HSET)
@given(trec_file("qrels"), trec_file("run"), st.integers(1, 120), st.booleans())
def test_block_reader_agrees_with_the_line_reader(
    tmp_path_factory, qfile, rfile, size, gz
):
    "Blocks of any size (the streaming path), each read by `parse_block`: the same."
    tmp = tmp_path_factory.mktemp("blocks")
    for kind, (data, *_) in (("qrels", qfile), ("run", rfile)):
        p = tmp / (f"{kind}.trec" + (".gz" if gz else ""))
        p.write_bytes(gzip.compress(data) if gz else data)
        whole = _line_columns(read_bytes(p), p, kind).to_dict()
        got, line = {}, 1
        for block in M.read_blocks(p, size):
            c = M.parse_block(block, p, kind, line)
            line += block.count(b"\n")
            for q, docs in (c.to_dict() if c is not None else {}).items():
                for d, v in docs.items():
                    assert d not in got.setdefault(q, {})  # no line read twice
                    got[q][d] = v
        assert got == whole
        # batches of whole queries: the same text, each query in one batch
        batches = [t for t, _ in query_blocks(p, size)]
        assert b"".join(batches) == read_bytes(p)
        cols = [_line_columns(t, p, kind, 1, True) for t in batches]
        seen = [set(c.qids) for c in cols if c is not None]
        assert sum(map(len, seen)) == len(set().union(*seen)) or not batches_grouped(
            read_bytes(p)
        )


def batches_grouped(data: bytes) -> bool:
    "True if every query's lines are contiguous (comments and blanks aside)."
    qs = [
        f[0] for f in (x.split() for x in data.split(b"\n")) if f and f[0][:1] != b"#"
    ]
    runs = [q for i, q in enumerate(qs) if i == 0 or qs[i - 1] != q]
    return len(runs) == len(set(runs))


@pytest.mark.parametrize("ids", ["strings", "integers"])
def test_many_blocks_read_identically(tmp_path, ids):
    "A file of several pyarrow blocks (1 MB each): the same Columns as line by line."
    rng = np.random.default_rng(0)
    n = 120_000
    q = rng.integers(0, 500, n)
    d = rng.permutation(n) * 3
    docs = d.astype(str) if ids == "integers" else np.char.add("doc", d.astype(str))
    text = "".join(
        f"Q{a} Q0 {b} {i} {s!r} run\n"
        for i, (a, b, s) in enumerate(
            zip(q, docs, rng.normal(size=n).round(6).tolist())
        )
    )
    p = tmp_path / "big.run"
    p.write_text(text)
    data = read_bytes(p)
    fast, line = _fast_columns(data, "run"), _line_columns(data, p, "run")
    assert fast is not None and (fast.docs is None) == (ids == "integers")
    assert same_columns(fast, line)


def test_non_finite_scores_are_refused_clearly(tmp_path):
    "trec_eval's atof reads inf and nan; irbook refuses them, naming the line."
    for word in ["inf", "-inf", "Infinity", "nan", "NaN", "1e999"]:
        p = tmp_path / "r.trec"
        p.write_text(f"q1 Q0 d1 1 1.0 r\nq1 Q0 d2 2 {word} r\n")
        with pytest.raises(ValueError, match=f"line 2: score '{word}' .* not finite"):
            M.read_columns(p, "run")


def test_negative_labels_are_kept(tmp_path):
    p = tmp_path / "q.trec"
    p.write_text("q1 0 d1 1\nq1 0 d2 -1\n")
    c = M.read_columns(p, "qrels")
    assert list(c.values) == [1.0, -1.0] and M.read_qrels(p) == {
        "q1": {"d1": 1, "d2": -1}
    }


def run_cli(*args):
    code = "import sys; from irbook.cli import command; command()"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-c", code, "eval", *map(str, args), "-m", "map", "ndcg@10"],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_no_abort_under_repetition(tmp_path):
    "irbook eval 200 times on a good file, 200 on a truncated .gz: exit 0 or 2 only."
    rng = np.random.default_rng(1)
    n = 300_000  # several pyarrow blocks: its reading threads at work
    q = np.repeat(np.arange(300), n // 300)
    lines = "".join(
        f"{a} Q0 {b} {i % 1000 + 1} {s:.4f} run\n"
        for i, (a, b, s) in enumerate(zip(q, rng.permutation(n), rng.random(n)))
    )
    (tmp_path / "q.trec").write_text("".join(f"{a} 0 {a * 7} 1\n" for a in range(300)))
    good, cut = tmp_path / "run.trec.gz", tmp_path / "cut.trec.gz"
    good.write_bytes(gzip.compress(lines.encode()))
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    bad = []
    for path, want in ((good, 0), (cut, 2)):
        for _ in range(200):
            r = run_cli(tmp_path / "q.trec", path)
            if r.returncode != want or "Traceback" in r.stderr:
                bad.append((path.name, r.returncode, r.stderr[-300:]))
    assert not bad, bad[:5]


def test_small_text_by_the_line_reader_large_by_pyarrow(tmp_path):
    "Below `SMALL_FILE` bytes the line reader (no pyarrow import); above, pyarrow."
    import pyarrow as pa

    from irbook.metrics import io as mio

    line = "q{} Q0 d{} {} {} run\n"
    small = "".join(line.format(i % 9, i, i + 1, 1000 - i) for i in range(100))
    n = mio.SMALL_FILE // len(line.format(1, 1, 1, 1)) + 1000
    large = "".join(line.format(i % 9, i, i + 1, 10**6 - i) for i in range(n))
    for text, arrow in ((small, False), (large, True)):
        p = tmp_path / "run"
        p.write_text(text)
        assert (len(text) >= mio.SMALL_FILE) == arrow
        got = M.read_columns(p, "run")
        assert isinstance(got.docs, pa.Array) == arrow
        assert same_columns(got, _line_columns(text.encode(), p, "run"))
        blocks = [M.parse_block(b, p, "run") for b in M.read_blocks(p, 2 * len(text))]
        assert len(blocks) == 1 and same_columns(blocks[0], got)


def test_cr_only_line_ends_are_line_ends(tmp_path):
    """An old Mac file (lines ended by CR alone, no LF anywhere) is read line by line by
    every reader, as its LF copy. trec_eval 10 reads CR as a space: it refuses such a
    qrels file and reads such a run as its first result only (checked below when it is
    built). A CR inside a file that has LFs stays a space, as trec_eval reads it."""
    qrels = b"q1 0 d1 1\rq1 0 d2 0\rq2 0 d3 1\r"
    run = b"q1 Q0 d1 1 2.0 r\rq1 Q0 d2 2 1.0 r\rq2 Q0 d3 1 1.0 r"
    for kind, data in (("qrels", qrels), ("run", run)):
        cr, lf = tmp_path / f"{kind}.cr", tmp_path / f"{kind}.lf"
        cr.write_bytes(data)
        lf.write_bytes(data.replace(b"\r", b"\n"))
        assert same_columns(M.read_columns(cr, kind), M.read_columns(lf, kind))
        gz = tmp_path / f"{kind}.cr.gz"
        gz.write_bytes(gzip.compress(data))
        assert same_columns(M.read_columns(gz, kind), M.read_columns(lf, kind))
        for size in (4, 1 << 20):  # with no LF to cut at, one block: the whole file
            assert list(query_blocks(cr, size)) == [(lf.read_bytes(), 1)]
    lf = tmp_path / "run.lf"
    want = M.evaluate(M.read_qrels(tmp_path / "qrels.lf"), M.read_run(lf), "map")
    assert want == 1.0
    qrels = M.read_qrels(tmp_path / "qrels.cr")
    assert evaluate_file(qrels, tmp_path / "run.cr", "map", memory=64) == want
    # one line with CR among its separators and no LF: one line, as trec_eval reads it
    one = tmp_path / "one"
    one.write_bytes(b"q1 \r 0 \r d1 \r 1")
    assert M.read_qrels(one) == {"q1": {"d1": 1}}
    mixed = tmp_path / "mixed"  # a lone CR in a file with LFs: a space
    mixed.write_bytes(b"q1 Q0 d1 1 2.0 r\rq1 Q0 d2 2 1.0 r\nq2 Q0 d3 1 1.0 r\n")
    assert M.read_run(mixed) == {"q1": {"d1": 2.0}, "q2": {"d3": 1.0}}


def test_trec_eval_reads_a_cr_only_file_as_one_line(trec_eval, tmp_path):
    "What irbook departs from on old Mac files: trec_eval 10 sees a single line."
    qrels, run, lf = tmp_path / "q", tmp_path / "r", tmp_path / "q.lf"
    qrels.write_bytes(b"q1 0 d1 1\rq1 0 d2 1\r")
    lf.write_bytes(b"q1 0 d1 1\nq1 0 d2 1\n")
    run.write_bytes(b"q1 Q0 d1 1 2.0 r\rq1 Q0 d2 2 1.0 r\r")
    te = subprocess.run([trec_eval, qrels, run], capture_output=True)
    assert te.returncode != 0 and b"Malformed line 1" in te.stderr  # qrels refused
    assert trec_eval_counts(trec_eval, lf, run) == {("num_ret", "q1"): 1,
        ("num_rel", "q1"): 2, ("num_rel_ret", "q1"): 1}  # fmt: skip
    assert len(M.read_run(run)["q1"]) == 2  # irbook: both results


def test_the_fields_the_measures_do_not_use_are_not_converted(tmp_path):
    """The fast reader converts only query, doc and value: a rank that is not an
    integer and a tag that is not UTF-8 are read by pyarrow (not left to the line
    reader), as the line reader reads them; an empty one of those fields is found."""
    lines = [
        f"q{i % 7} Q0 d{i} {i / 3:.2f} {100 - i / 9:.4f} t\xe9g\n" for i in range(800)
    ]
    data = "".join(lines).encode("latin-1")  # \xe9 alone: not UTF-8
    fast, line = _fast_columns(data, "run"), _line_columns(data, tmp_path, "run")
    assert fast is not None and same_columns(fast, line)
    for empty in (b"q1 Q0 d1  2.0 t\n", b"q1  d1 1 2.0 t\n"):  # 5 fields and a gap
        assert _fast_columns(data + empty, "run") is None  # the line reader's error
        with pytest.raises(ValueError, match="line 801: a run line has at least 6"):
            _line_columns(data + empty, tmp_path, "run")


def test_each_block_of_a_large_file_is_read_by_pyarrow(tmp_path, monkeypatch):
    """However small the blocks (a small `memory`), a large run's blocks go to pyarrow's
    reader, not the line reader (--memory 4 on MS MARCO's dev run: 20.8 s -> 1.8 s)."""
    from irbook.metrics import io as mio

    n = mio.SMALL_FILE // 20 + 1000  # lines of 20-26 bytes: more than SMALL_FILE
    text = "".join(
        f"q{i // 100} Q0 d{i} {i % 100 + 1} {1000 - i % 100} r\n" for i in range(n)
    )
    (tmp_path / "run").write_text(text)
    qrels = {f"q{q}": {f"d{q * 100 + 5}": 1} for q in range(n // 100 + 1)}
    calls = []
    monkeypatch.setattr(mio, "_line_columns", lambda *a, **k: calls.append(a) or None)
    got = evaluate_file(qrels, tmp_path / "run", "mrr", memory=12 * 50_000)
    assert not calls and got == pytest.approx(1 / 6, abs=0.01)


def test_plain_integer_doc_ids_are_their_own_codes(tmp_path):
    """The fast reader takes a doc id for an integer (docs None) only if every id is
    1-18 ASCII digits without a leading zero, as the line reader's plain_int; any other
    id keeps them all as strings, in chunked and sliced pyarrow arrays too."""
    import pyarrow as pa

    from irbook.metrics.columns import doc_codes, list_columns, plain_int

    plain = ["0", "7", "10", "8841822", "1" * 18]
    others = ["007", "00", "+7", "-7", " 7", "7 ", "1" * 19, "٣", "7a", "1e3", "0x1"]
    for odd in [None, *others]:
        ids = plain + ([] if odd is None else [odd])
        c = list_columns(["q"] * len(ids), ids, np.zeros(len(ids)), "run")
        assert (c.docs is None) == (odd is None) == all(plain_int(x) >= 0 for x in ids)
        for arr in (
            pa.array(ids),
            pa.chunked_array([pa.array(ids[:2]), pa.array([]).cast(pa.string()),
                              pa.array(ids[2:])]),
            pa.array(["x", *ids]).slice(1),  # offsets that do not start at 0
        ):  # fmt: skip
            code, docs = doc_codes(arr)
            assert (docs is None) == (odd is None), (odd, arr)
            got = code.astype(str) if docs is None else np.asarray(docs)[code]
            assert list(got) == ids
