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

import pytest

from irbook import data as D

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
    threading.Thread(target=srv.serve_forever, daemon=True).start()
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
    for name in D.JQARA_RUNS:
        assert set(D.load_jqara_run(name).keys()) == set(qrels.keys()), name
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
