"""A stand-in for the network: with no offline copy and an empty cache, every loader the
chapters call downloads its file from the public URL path, verifies it and loads it.

A local HTTP server on 127.0.0.1 serves the offline copy under each source's URL path;
the test-only setting IRBOOK_TEST_URL_HOST points irbook.data at it instead of the real
host."""

import functools
import http.server
import os
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from irbook import data as D
from irbook.course import jqara as J

# the test servers' poll interval: shutdown() waits up to one (http.server's default,
# 0.5 s, was most of each test's time)
POLL = 0.01

SHARED = Path(
    os.environ.get("IRBOOK_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
pytestmark = pytest.mark.skipif(
    not all((SHARED / n).is_file() for n in D.SOURCES),
    reason="needs the complete offline copy to serve (set IRBOOK_DATA)",
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    served: list = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        type(self).served.append(self.path)
        super().do_GET()


def _site(root: Path) -> Path:
    "The offline copy laid out under the public URL paths, as the real hosts serve it."
    for name, src in D.SOURCES.items():
        target = root / urllib.parse.urlsplit(src.url).path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(SHARED / name)
    return root


@pytest.fixture
def network(tmp_path, monkeypatch):
    """A fresh machine: no IRBOOK_DATA, an empty cache, downloads allowed, served
    locally."""
    site = _site(tmp_path / "site")
    _Quiet.served = []
    handler = functools.partial(_Quiet, directory=str(site))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, args=(POLL,), daemon=True).start()
    monkeypatch.delenv(D.ENV_DATA, raising=False)
    monkeypatch.delenv(D.ENV_OFFLINE, raising=False)
    monkeypatch.setenv(D.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.setenv(D.ENV_URL_HOST, f"http://127.0.0.1:{srv.server_address[1]}")
    yield site, tmp_path / "cache"
    srv.shutdown()
    srv.server_close()


def test_every_loader_downloads_verifies_and_loads(network):
    site, cache = network
    assert not cache.exists()
    for n in D.FASTBOOK_CHAPTERS:
        assert D.load_fastbook_chapter(n)["cells"]
    assert len(D.load_benchmark()["questions"]) == 191
    assert len(D.load_fts_keywords()) == 191
    qrels = D.load_jqara_qrels()
    # the 39 runs share one loader: two are read here (ranx, ~0.2 s a run); every one
    # is downloaded and verified below; all 39 are read by make test-slow's test_jqara
    loaded = ("bm25", D.JQARA_RUNS[-1])
    for name in D.JQARA_RUNS:
        if name in loaded:
            assert set(D.load_jqara_run(name).keys()) == set(qrels.keys()), name
        else:
            assert D.fetch(f"jqara/runs/{name}.lz4").is_file(), name
    assert len(D.load_jqara_leaderboard()) == 37
    assert D.load_jsquad()["data"]
    # each file came over the wire once, from its public path, and sits verified in the
    # cache
    paths = sorted(urllib.parse.urlsplit(s.url).path for s in D.SOURCES.values())
    assert sorted(_Quiet.served) == paths
    for name, src in D.SOURCES.items():
        assert D.sha256_file(cache / name) == src.sha256, name
    # a second call is served from the cache, not the network
    D.load_jqara_leaderboard()
    assert len(_Quiet.served) == len(paths)


def test_altered_bytes_are_refused(network):
    site, cache = network
    name = "jqara/README.md"
    served = site / urllib.parse.urlsplit(D.SOURCES[name].url).path.lstrip("/")
    body = served.read_bytes()
    served.unlink()
    served.write_bytes(
        body.replace(b"0.7712", b"0.7812")
    )  # one published figure changed
    with pytest.raises(D.ChecksumError, match="sha256"):
        D.load_jqara_leaderboard()
    assert not (cache / name).exists()
    assert not any(p.is_file() for p in cache.rglob("*"))  # no partial download left


def test_without_the_mapping_the_real_url_is_used(monkeypatch):
    monkeypatch.delenv(D.ENV_URL_HOST, raising=False)
    url = D.SOURCES["jqara/README.md"].url
    assert D._mapped(url) == url
    monkeypatch.setenv(D.ENV_URL_HOST, "http://127.0.0.1:9/")
    assert D._mapped(url) == "http://127.0.0.1:9" + urllib.parse.urlsplit(url).path


# JQaRA's test split (chapter 20) has no offline copy: a small parquet file of the same
# schema, written here, stands in for it at the pinned public path.


class _Chars:
    "A deterministic toy encoder: counts of a fixed set of characters."

    def __init__(self, texts):
        self.chars = sorted(set("".join(texts)))

    def encode(self, texts, **kw):
        return np.array([[t.count(c) for c in self.chars] for t in texts], float)


class _Overlap:
    "A deterministic toy re-ranker: distinct characters shared by question and passage."

    def predict(self, pairs, **kw):
        return [len(set(q) & set(p)) for q, p in pairs]


class _Oracle:
    "A re-ranker that knows the labels: 1 for a relevant (question, passage) pair."

    def __init__(self, relevant):
        self.relevant = relevant

    def predict(self, pairs, **kw):
        return [float((q, p) in self.relevant) for q, p in pairs]


def _jqara_split() -> pd.DataFrame:
    "Three questions x four candidates, in the dataset's columns; ids are integers."
    words = ["富士山", "琵琶湖", "東京都", "大阪城", "北海道", "京都府"]
    rows = []
    for i, q in enumerate(["富士山の高さ", "日本の首都", "大きな湖"]):
        for j in range(4):
            w = words[(i + j) % len(words)]
            rows.append(
                {
                    "q_id": f"Q{i}",
                    "question": q,
                    "answers": [w],
                    "passage_row_id": 1000 * i + j,
                    "title": w,
                    "text": f"{w}について{j}",
                    "label": int(j in (1, 3) if i else j == 0),
                }
            )
    return pd.DataFrame(rows)


def test_jqara_split_downloads_and_scores_a_model(network):
    ranx = pytest.importorskip("ranx")
    site, cache = network
    df = _jqara_split()
    served = site / urllib.parse.urlsplit(J.JQARA_TEST_URL).path.lstrip("/")
    served.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(served)
    sha = D.sha256_file(served)
    pointer = site / urllib.parse.urlsplit(
        J.JQARA_TEST_URL.replace("/resolve/", "/raw/")
    ).path.lstrip("/")
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if J.JQARA_TEST_SHA256 is None:  # the hash comes from the LFS pointer at the commit
        with pytest.raises(D.DataNotFound, match="LFS pointer"):
            J.load_jqara_test()  # no pointer served: no unverified download
        assert all("/raw/" in path for path in _Quiet.served)  # no parquet fetched
        pointer.write_text("version https://git-lfs.github.com/spec/v1\n")
        with pytest.raises(D.MalformedData, match="not a Git LFS pointer"):
            J.load_jqara_test()
        lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 1\n"
        pointer.write_text(lfs.format("0" * 64))
        with pytest.raises(D.ChecksumError):
            J.load_jqara_test()  # a pointer naming other bytes: refused
        pointer.write_text(lfs.format(sha))
        assert D.lfs_sha256(J.JQARA_TEST_URL) == sha
        J.load_jqara_test()
        for f in cache.rglob("*.parquet"):
            f.unlink()
    with pytest.raises(D.ChecksumError):
        J.load_jqara_test(sha256="0" * 64)
    data = J.load_jqara_test(sha256=sha)
    assert _Quiet.served[-1] == urllib.parse.urlsplit(J.JQARA_TEST_URL).path
    assert len(data) == len(df) and set(J.JQARA_COLUMNS) <= set(data.columns)
    assert D.sha256_file(next(cache.rglob("*.parquet"))) == sha

    qrels = J.dataset_qrels(data)
    assert qrels.to_dict() == {
        "Q0": {"0": 1},
        "Q1": {"1001": 1, "1003": 1},
        "Q2": {"2001": 1, "2003": 1},
    }
    docs = data.title + " " + data.text  # what the evaluator shows a model
    enc = _Chars([*data.question, *docs])
    run = J.model_run(enc, data, name="chars")
    # the run's shape: every question, each with exactly its own candidates
    assert run.name == "chars"
    got = run.to_dict()
    want = df.groupby("q_id").passage_row_id.apply(lambda s: sorted(map(str, s)))
    assert {q: sorted(d) for q, d in got.items()} == want.to_dict()
    # its scores: the cosine of the two bags of characters
    v = enc.encode([data.question[5], docs[5]])
    cos = v[0] @ v[1] / np.linalg.norm(v[0]) / np.linalg.norm(v[1])
    assert got["Q1"]["1001"] == pytest.approx(cos)

    # a re-ranker that knows the labels ranks every relevant passage first
    oracle = _Oracle(set(zip(data.question[data.label == 1], docs[data.label == 1])))
    best = J.score_model(oracle, data, name="oracle")
    assert best.loc["oracle", "ndcg@10"] == 1 and best.loc["oracle", "mrr@10"] == 1

    # score_model is the leaderboard code on model_run's run, and ranx agrees
    for model, name in ((_Overlap(), "overlap"), (enc, "chars")):
        table = J.score_model(model, data, name=name)
        same = J.leaderboard({name: J.model_run(model, data, name=name)}, qrels)
        pd.testing.assert_frame_equal(table, same)
        theirs = ranx.evaluate(qrels, J.model_run(model, data), ["ndcg@10", "mrr@10"])
        assert table.loc[name].to_dict() == pytest.approx(theirs, abs=1e-12)
    assert table.loc["chars", "ndcg@10"] < 1  # the toy encoder is no oracle
