"""The distributed engine (irbook.metrics.distributed, appendix 08_engine_distributed):
per-query scores identical to the in-memory `evaluate` under every convention, on dask's
synchronous scheduler and on a LocalCluster of two worker processes; the CLI's
`--engine dask`."""

import re
import zlib

import numpy as np
import pandas as pd
import pytest

from irbook.cli import main
from irbook.metrics import (
    CONVENTIONS,
    QueryMismatch,
    evaluate,
    expand_metrics,
    read_columns,
)
from irbook.metrics.distributed import (
    bucket_of,
    evaluate_distributed,
    partitions,
    to_partitions,
)

METRICS = expand_metrics(
    ["official", "ndcg", "ndcg@10", "dcg_burges@20", "map@100", "rbp.8", "f1@20"]
)


def write_files(folder, n=200, depth=250, seed=0, missing=8, extra=4, ints=True):
    "Qrels and run files with ties, negative labels, missing and unjudged queries."
    rng = np.random.default_rng(seed)
    doc = (lambda d: str(d)) if ints else (lambda d: f"D{d:05d}")
    run, qrels = folder / "run.trec", folder / "qrels.txt"
    with open(run, "w") as f:
        for i in range(missing, n + extra):
            k = int(rng.integers(1, depth))
            for d, s in zip(rng.choice(9000, k, replace=False), rng.normal(size=k)):
                f.write(f"q{i} Q0 {doc(d)} 0 {s:.1f} t\n")
    with open(qrels, "w") as f:
        for i in range(n):
            k = int(rng.integers(1, 50))
            labels = rng.integers(-1, 4, k)
            for d, lab in zip(rng.choice(9000, k, replace=False), labels):
                f.write(f"q{i} 0 {doc(d)} {lab}\n")
    return qrels, run


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def same_queries(tmp_path_factory):
    "A run holding exactly the qrels' queries (string doc ids): every rule scores it."
    return write_files(tmp_path_factory.mktemp("same"), missing=0, extra=0, ints=False)


def check_identical(qrels_path, run_path, data, scheduler, conv, mc):
    qrels, run = read_columns(qrels_path, "qrels"), read_columns(run_path, "run")
    kw = dict(make_comparable=mc, convention=conv)
    try:
        want = evaluate(qrels, run, METRICS, per_query=True, **kw)
    except QueryMismatch as e:
        with pytest.raises(QueryMismatch) as got:
            evaluate_distributed(qrels, data, METRICS, scheduler=scheduler, **kw)
        # the same words and ids; the run's extra queries in partition order
        ids = re.compile(r"'[^']*'")
        assert ids.sub("", str(got.value)) == ids.sub("", str(e))
        assert sorted(ids.findall(str(got.value))) == sorted(ids.findall(str(e)))
        return "refused"
    timings = []
    got = evaluate_distributed(
        qrels, data, METRICS, per_query=True, scheduler=scheduler, timings=timings, **kw
    )
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    means = evaluate_distributed(qrels, data, METRICS, scheduler=scheduler, **kw)
    assert means == evaluate(qrels, run, METRICS, **kw)
    return timings


def test_partitions_hold_whole_queries_in_file_order(files, tmp_path):
    import pyarrow.parquet as pq

    _, run = files
    data = to_partitions(run, tmp_path / "ds", 5)
    folders = partitions(data)
    assert [f.name for f in folders] == [f"part={i}" for i in range(5)]
    lines = [ln.split() for ln in run.read_text().splitlines()]
    for i, f in enumerate(folders):
        t = pq.read_table(f).to_pydict()
        want = [x for x in lines if zlib.crc32(x[0].encode()) % 5 == i]
        assert list(zip(t["q_id"], t["doc_id"])) == [(x[0], x[2]) for x in want]
        assert t["score"] == [float(x[4]) for x in want]
    with pytest.raises(ValueError, match="not empty"):
        to_partitions(run, data, 5)


def test_partitions_are_written_in_bounded_batches(files, tmp_path):
    "A run read a few queries at a time gives the same dataset, and the same scores."
    import pyarrow.parquet as pq

    qrels, run = files
    whole = to_partitions(run, tmp_path / "whole", 4, memory=2**30)
    small = to_partitions(run, tmp_path / "small", 4, memory=3000)  # ~250-byte blocks
    assert len(list(small.rglob("*.parquet"))) > 20 * len(
        list(whole.rglob("*.parquet"))
    )
    for a, b in zip(partitions(whole), partitions(small)):
        assert pq.read_table(a).to_pydict() == pq.read_table(b).to_pydict()
    check_identical(qrels, run, small, "sync", "trec_eval", True)
    bad = tmp_path / "bad.trec"
    lines = run.read_text().splitlines()
    bad.write_text("\n".join(lines[:-1] + ["q1 Q0 x 1 high t"]) + "\n")
    with pytest.raises(ValueError, match=f"line {len(lines)}"):
        to_partitions(bad, tmp_path / "bad", 4, memory=3000)


def test_bucket_is_crc32_modulo_n():
    ids = ["q1", "1085779", "クエリ"]
    assert list(bucket_of(ids, 7)) == [zlib.crc32(q.encode()) % 7 for q in ids]
    with pytest.raises(ValueError, match="positive"):
        bucket_of(ids, 0)


@pytest.mark.parametrize("mc", [False, True], ids=["strict", "comparable"])
@pytest.mark.parametrize("conv", list(CONVENTIONS))
def test_identical_to_in_memory_sync(files, same_queries, tmp_path, conv, mc):
    for i, (qrels, run) in enumerate([files, same_queries]):
        data = to_partitions(run, tmp_path / f"ds{i}", 6)
        check_identical(qrels, run, data, "sync", conv, mc)


def test_a_run_file_is_partitioned_on_the_fly(files):
    qrels, run = files
    kw = dict(per_query=True, make_comparable=True, convention="trec_eval")
    got = evaluate_distributed(qrels, run, METRICS, scheduler="sync", **kw)
    want = evaluate(
        read_columns(qrels, "qrels"), read_columns(run, "run"), METRICS, **kw
    )
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_a_query_in_two_partitions_is_refused(files, tmp_path):
    qrels, run = files
    halves = [tmp_path / "a.trec", tmp_path / "b.trec"]
    lines = run.read_text().splitlines(keepends=True)
    for h, part in zip(halves, (lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        h.write_text("".join(part))
    one = to_partitions(halves, tmp_path / "ok", 3)  # files -> one dataset: fine
    got = evaluate_distributed(
        qrels, one, METRICS, make_comparable=True, scheduler="sync"
    )
    want = evaluate(
        read_columns(qrels, "qrels"),
        read_columns(run, "run"),
        METRICS,
        make_comparable=True,
    )
    assert got == want
    bad = tmp_path / "bad"
    to_partitions(halves[0], bad / "part=0", 1)  # a query's lines split across folders
    to_partitions(halves[1], bad / "part=1", 1)
    with pytest.raises(ValueError, match="in two partitions"):
        evaluate_distributed(
            qrels, bad, METRICS, make_comparable=True, scheduler="sync"
        )


def test_cli_engine_dask_prints_what_the_local_engine_prints(files, capsys):
    qrels, run = files
    args = [str(qrels), str(run), "-m", "ndcg@10", "map", "-c", "-q", "--format", "csv"]
    assert main(["eval", *args]) == 0
    local = capsys.readouterr().out
    assert main(["eval", *args, "--engine", "dask", "--scheduler", "sync"]) == 0
    assert capsys.readouterr().out == local
    assert main(["eval", str(qrels), str(run), "--engine", "dask"]) == 2  # not -c
    assert "missing from the run" in capsys.readouterr().err
    assert main(["eval", *args, "--scheduler", "sync"]) == 2
    assert "--engine dask" in capsys.readouterr().err


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


@pytest.mark.slow
def test_identical_on_a_local_cluster_of_two_workers(
    files, same_queries, tmp_path, cluster
):
    from distributed import Client

    with Client(cluster) as client:
        workers = set()
        for i, (qrels, run) in enumerate([files, same_queries]):
            data = to_partitions(run, tmp_path / f"ds{i}", 4)
            for conv in CONVENTIONS:
                for mc in (False, True):
                    got = check_identical(qrels, run, data, client, conv, mc)
                    if got != "refused":
                        workers |= {t["worker"] for t in got}
                        assert sum(t["lines"] for t in got) > 0
        assert len(workers) == 2  # both worker processes scored partitions


@pytest.mark.slow
def test_cli_scheduler_address(files, capsys, cluster):
    qrels, run = files
    args = ["eval", str(qrels), str(run), "-m", "official", "-c", "--format", "json"]
    assert main(args) == 0
    local = capsys.readouterr().out
    address = cluster.scheduler_address
    assert main([*args, "--engine", "dask", "--scheduler", address]) == 0
    assert capsys.readouterr().out == local
