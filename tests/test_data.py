"""The data layer against a real HTTP server on 127.0.0.1 serving copies of the offline
mirror."""

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import threading
import warnings
from pathlib import Path

import pytest

from irbook import data as D
from irbook.data import MARKER, build_folder, folder_is_complete

# the test servers' poll interval: shutdown() waits up to one (http.server's default,
# 0.5 s, was most of each test's time)
POLL = 0.01

SHARED = Path(
    os.environ.get("IRBOOK_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
pytestmark = pytest.mark.skipif(
    not (SHARED / "fastbook-benchmark.json").is_file(),
    reason="needs the offline mirror (set IRBOOK_DATA)",
)
NAME = "fastbook-benchmark.json"


class _Handler(http.server.BaseHTTPRequestHandler):
    mode = "good"  # good | corrupt | hangup | missing
    hits: list = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        type(self).hits.append(self.path)
        if self.mode == "missing":
            self.send_error(404)
            return
        body = (SHARED / self.path.lstrip("/")).read_bytes()
        if self.mode == "corrupt":
            body = body[:100] + bytes([body[100] ^ 0xFF]) + body[101:]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.mode == "hangup":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    _Handler.hits = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, args=(POLL,), daemon=True)
    t.start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def env(tmp_path, monkeypatch):
    "No offline dir, an empty cache."
    monkeypatch.delenv(D.ENV_DATA, raising=False)
    monkeypatch.delenv(D.ENV_OFFLINE, raising=False)
    monkeypatch.setenv(D.ENV_CACHE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _files(d: Path):
    return (
        sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())
        if d.exists()
        else []
    )


def test_good_download_lands_and_verifies(server, env):
    srv, base = server
    _Handler.mode = "good"
    p = D.fetch(NAME, url=f"{base}/{NAME}", progress=False)
    assert p == env / NAME and _files(env) == [NAME]
    assert hashlib.sha256(p.read_bytes()).hexdigest() == D.SOURCES[NAME].sha256
    assert len(D.load_benchmark()["questions"]) == 191
    # a second fetch is served from the cache, not the network
    n = len(_Handler.hits)
    D.fetch(NAME, url=f"{base}/{NAME}")
    assert len(_Handler.hits) == n


def test_corrupted_payload_raises_and_leaves_nothing(server, env):
    srv, base = server
    _Handler.mode = "corrupt"
    with pytest.raises(D.ChecksumError, match="sha256"):
        D.fetch(NAME, url=f"{base}/{NAME}", progress=False)
    assert _files(env) == []


def test_hangup_mid_transfer_leaves_nothing(server, env):
    srv, base = server
    _Handler.mode = "hangup"
    with pytest.raises(D.DataError):
        D.fetch(NAME, url=f"{base}/{NAME}", progress=False)
    assert _files(env) == []
    # and the next good transfer still works
    _Handler.mode = "good"
    assert D.fetch(NAME, url=f"{base}/{NAME}", progress=False).is_file()


def test_http_error_is_data_not_found(server, env):
    srv, base = server
    _Handler.mode = "missing"
    with pytest.raises(D.DataNotFound, match="404"):
        D.fetch(NAME, url=f"{base}/{NAME}", progress=False)
    assert _files(env) == []


def test_offline_without_copy_names_file_url_and_variable(env, monkeypatch):
    # a closed port on loopback: the connection is refused, as with no network
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}/{NAME}"
    with pytest.raises(D.DataNotFound) as e:
        D.fetch(NAME, url=url, progress=False)
    msg = str(e.value)
    assert NAME in msg and url in msg and D.ENV_DATA in msg
    monkeypatch.setenv(D.ENV_OFFLINE, "1")
    with pytest.raises(D.DataNotFound, match="downloads are disabled") as e:
        D.fetch(NAME)
    assert D.SOURCES[NAME].url in str(e.value) and D.ENV_DATA in str(e.value)
    assert _files(env) == []


def test_env_dir_wins_over_cache_without_network(server, env, tmp_path, monkeypatch):
    srv, base = server
    off = tmp_path / "offline"
    off.mkdir()
    shutil.copy(SHARED / NAME, off / NAME)
    (env).mkdir(parents=True)
    (env / NAME).write_text("stale cache entry")
    monkeypatch.setenv(D.ENV_DATA, str(off))
    p = D.fetch(NAME, url=f"{base}/{NAME}")
    assert p == off / NAME and _Handler.hits == []


def test_bad_cache_entry_is_replaced(server, env):
    srv, base = server
    _Handler.mode = "good"
    env.mkdir(parents=True)
    (env / NAME).write_text('{"questions": [')  # truncated earlier copy
    p = D.fetch(NAME, url=f"{base}/{NAME}", progress=False)
    assert (
        hashlib.sha256(p.read_bytes()).hexdigest() == D.SOURCES[NAME].sha256
        and len(_Handler.hits) == 1
    )


def test_wrong_hash_in_offline_dir_is_an_error(tmp_path, monkeypatch):
    (tmp_path / NAME).write_text('{"questions": []}')
    monkeypatch.setenv(D.ENV_DATA, str(tmp_path))
    with pytest.raises(D.ChecksumError, match=NAME):
        D.load_benchmark()


def test_wrong_paths(tmp_path, monkeypatch):
    monkeypatch.setenv(D.ENV_DATA, str(tmp_path / "nope"))
    with pytest.raises(D.DataNotFound, match="not a directory"):
        D.fetch(NAME)
    with pytest.raises(D.DataNotFound, match="no file"):
        D.load_notebook(tmp_path / "missing.ipynb")
    with pytest.raises(KeyError):
        D.fetch("no/such/file.json")
    with pytest.raises(ValueError, match="chapter 3"):
        D.load_fastbook_chapter(3)
    with pytest.raises(ValueError, match="unknown JQaRA run"):
        D.load_jqara_run("bm26")


def _unhashed(monkeypatch, name):
    src = D.SOURCES[name]
    monkeypatch.setitem(D.SOURCES, name, D.Source(src.name, src.url, None, src.licence))


@pytest.mark.parametrize(
    "payload,loader,err",
    [
        ('{"questions": [', D.load_benchmark, "not valid JSON"),
        ('{"items": []}', D.load_benchmark, "no 'questions' list"),
    ],
)
def test_malformed_benchmark_is_rejected_and_not_cached(
    server, env, monkeypatch, payload, loader, err, tmp_path
):
    # a source without a pinned hash (like the 31 unmirrored JQaRA runs) is checked by
    # parsing, and a bad copy is dropped
    _unhashed(monkeypatch, NAME)
    env.mkdir(parents=True)
    (env / NAME).write_text(payload)
    with pytest.raises(D.MalformedData, match=err) as e:
        loader()
    assert NAME in str(e.value) and not (env / NAME).exists()


def test_notebook_not_nbformat4(tmp_path, monkeypatch):
    name = "fastbook/04_mnist_basics.ipynb"
    _unhashed(monkeypatch, name)
    monkeypatch.setenv(D.ENV_DATA, str(tmp_path))
    (tmp_path / "fastbook").mkdir()
    (tmp_path / name).write_text(json.dumps({"nbformat": 3, "worksheets": []}))
    with pytest.raises(D.MalformedData, match="nbformat 4"):
        D.load_fastbook_chapter(4)


def test_malformed_jqara_run_rejected(tmp_path, monkeypatch):
    name = "jqara/runs/bm25.lz4"
    _unhashed(monkeypatch, name)
    monkeypatch.setenv(D.ENV_DATA, str(tmp_path))
    (tmp_path / "jqara/runs").mkdir(parents=True)
    (tmp_path / name).write_bytes(b"not lz4 at all")
    with pytest.raises(D.MalformedData, match="bm25.lz4"):
        D.load_jqara_run("bm25")


def test_registry_is_complete():
    assert len(D.FASTBOOK_CHAPTERS) == 7 and len(D.JQARA_RUNS) == 39
    assert "jqara/README.md" in D.SOURCES
    assert not any("expected_metrics" in n for n in D.SOURCES)  # not a published file
    for s in D.SOURCES.values():
        # a public URL pinned to a full commit id, and the sha256 of the bytes
        assert re.fullmatch(r"https://[^/]+/.*/[0-9a-f]{40}/.+", s.url or ""), s
        assert re.fullmatch(r"[0-9a-f]{64}", s.sha256 or ""), s
    # every file of the offline mirror matches its pinned hash
    for name, s in D.SOURCES.items():
        if (SHARED / name).exists():
            assert D.sha256_file(SHARED / name) == s.sha256, name


_README = """# A benchmark
### 評価結果
#### 密な文ベクトルモデル

| model_names | ndcg@10 | mrr@10 |
| :--- | ---: | ---: |
| [ruri-small](https://example.org/ruri) |  0.5359 | 0.7661 |
| bm25 | 0.458 | 0.702 |

#### ColBERT モデル
| model_names | ndcg@10 | mrr@10 |
| :--- | ---: | ---: |
| [JaColBERTv2.5](https://example.org/jacolbert) | 0.642 | 0.8647 |

#### CrossEncoder モデル
| [ruri-reranker-large](https://example.org/r) | 0.7712 | 0.9098 |
#### スパースベクトルモデル
| japanese-splade-base-v1 | 0.6441 | 0.8616 |
#### その他モデル
| [bge-m3+all](https://example.org/b) | 0.576 | 0.8178 |

## Not a leaderboard
| random | 0.1 | 0.2 |
"""


def _readme_in(tmp_path, monkeypatch, text):
    name = "jqara/README.md"
    _unhashed(monkeypatch, name)
    monkeypatch.setenv(D.ENV_DATA, str(tmp_path))
    monkeypatch.setenv(D.ENV_CACHE, str(tmp_path / "cache"))
    (tmp_path / "jqara").mkdir(exist_ok=True)
    (tmp_path / name).write_text(text, encoding="utf-8")


def test_leaderboard_parser_on_a_toy_readme(tmp_path, monkeypatch):
    _readme_in(tmp_path, monkeypatch, _README)
    b = D.load_jqara_leaderboard()
    assert list(b.columns) == ["family", "ndcg@10", "mrr@10"]
    assert b.loc["ruri-small"].tolist() == ["dense", 0.5359, 0.7661]
    assert b.loc["bm25", "family"] == "dense" and "random" not in b.index
    assert b["family"].value_counts().to_dict() == {
        "dense": 2,
        "colbert": 1,
        "cross-encoder": 1,
        "sparse": 1,
        "other": 1,
    }


@pytest.mark.parametrize(
    "text, match",
    [
        ("# no tables here", "five model tables"),
        (_README.replace("#### その他モデル", "#### Others"), "five model tables"),
        (_README.replace("bm25", "bm99"), "unknown runs.*bm99"),
        (_README + "#### 密な文ベクトルモデル\n| bm25 | 0.1 | 0.2 |\n", "five model"),
    ],
)
def test_malformed_leaderboard_is_rejected(tmp_path, monkeypatch, text, match):
    _readme_in(tmp_path, monkeypatch, text)
    with pytest.raises(D.MalformedData, match=match):
        D.load_jqara_leaderboard()


def test_published_leaderboard():
    b = D.load_jqara_leaderboard()
    assert len(b) == 37 and set(D.JQARA_RUNS) - set(b.index) == {"random", "minhash"}
    assert b["family"].value_counts().to_dict() == {
        "dense": 15,
        "cross-encoder": 13,
        "colbert": 5,
        "sparse": 3,
        "other": 1,
    }
    scores = b[["ndcg@10", "mrr@10"]].to_numpy()
    assert ((scores > 0) & (scores < 1)).all()


# ---- built folders in the cache (irbook.data.build_folder)
# ----------------------------------
def _build(calls):
    def build(tmp):
        calls.append(tmp)
        (tmp / "model.safetensors").write_bytes(b"weights" * 100)
        (tmp / "sub").mkdir()
        (tmp / "sub" / "config.json").write_text("{}")

    return build


def test_build_folder_reuses_complete_and_rebuilds_broken(tmp_path):
    f, calls, s = tmp_path / "m", [], "key-a"
    assert (
        build_folder(f, s, _build(calls)) == f
        and len(calls) == 1
        and folder_is_complete(f, s)
    )
    stamp = (f / MARKER).stat().st_mtime_ns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_folder(f, s, _build(calls))
    assert (
        len(calls) == 1 and (f / MARKER).stat().st_mtime_ns == stamp
    )  # reused, not rebuilt
    (f / "model.safetensors").write_bytes(b"weights")  # truncated later
    with pytest.warns(UserWarning, match="rebuilding"):
        build_folder(f, s, _build(calls))
    assert len(calls) == 2 and folder_is_complete(f, s)
    with pytest.warns(UserWarning, match="rebuilding"):
        build_folder(f, "other settings", _build(calls))
    assert len(calls) == 3
    (f / MARKER).unlink()  # half-written: no marker
    with pytest.warns(UserWarning, match="rebuilding"):
        build_folder(f, s, _build(calls))
    assert len(calls) == 4 and not list(tmp_path.glob(".m.*"))


def test_build_folder_failure_leaves_nothing(tmp_path):
    def boom(tmp):
        (tmp / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("killed mid-training")

    with pytest.raises(RuntimeError):
        build_folder(tmp_path / "m", "key-a", boom)
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.*"))


def test_build_folder_needs_a_string_key(tmp_path):
    with pytest.raises(ValueError, match="key"):
        build_folder(tmp_path / "m", object(), lambda tmp: None)


def test_bench_record_checkout_env_and_download(tmp_path, monkeypatch, env):
    # in a source checkout the committed record is read as it is
    rec = D.bench_record("small_n")
    root = Path(__file__).resolve().parents[1]
    assert rec == json.loads((root / "bench/results/small_n.json").read_text())
    # installed from a wheel (no checkout): downloaded once from the repository into
    # the cache, through the stand-in host
    monkeypatch.setattr(D, "_bench_dirs", lambda: [tmp_path / "no-checkout"])
    served = tmp_path / "host"
    (served / "irbook/irbook/main/bench/results").mkdir(parents=True)
    (served / "irbook/irbook/main/bench/results/toy.json").write_text('{"n": 3}')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    handler = functools.partial(Quiet, directory=str(served))
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, args=(POLL,), daemon=True).start()
    try:
        monkeypatch.setenv(D.ENV_URL_HOST, f"http://127.0.0.1:{srv.server_address[1]}")
        assert D.bench_record("toy") == {"n": 3}
        assert (env / "bench/toy.json").is_file()
        with pytest.raises(D.DataNotFound, match="IRBOOK_BENCH"):
            D.bench_record("missing")
    finally:
        srv.shutdown()
        srv.server_close()
    monkeypatch.setenv(D.ENV_OFFLINE, "1")
    with pytest.raises(D.DataNotFound, match="downloads are off"):
        D.bench_record("other")
