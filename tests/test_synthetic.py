"""irbook.course.synthetic against a fake OpenAI-compatible server on 127.0.0.1
(http.server in a thread)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from irbook.course.synthetic import (
    QA_SCHEMA,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMReplyError,
    QAPair,
    benchmark_pairs,
    citation_score,
    generate_qa,
    llm_config,
    parse_json_reply,
    qa_prompt,
)

# the test servers' poll interval: shutdown() waits up to one (http.server's default,
# 0.5 s, was most of each test's time)
POLL = 0.01

PAGE = (
    "Gradient descent changes each weight a little in the direction that lowers the "
    "loss. "
    "The size of that step is set by the learning rate, a number we choose before "
    "training."
)


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}}
            ],
        }
    ).encode()


def qa_reply(*pairs) -> str:
    return json.dumps(
        {
            "pairs": [
                {"question": q, "answer": a, "citations": list(c)} for q, a, c in pairs
            ]
        }
    )


class FakeServer:
    """Serves a script of replies in order: (status, body_bytes, delay_s, headers).
    Records every request."""

    def __init__(self, script):
        self.script, self.requests = list(script), []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                )
                outer.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "auth": self.headers.get("Authorization"),
                    }
                )
                status, payload, delay, headers = (
                    outer.script.pop(0)
                    if outer.script
                    else (500, b"script exhausted", 0, {})
                )
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(POLL,), daemon=True
        )

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(content):
    return (200, completion(content), 0, {})


@pytest.fixture
def client_for(tmp_path):
    waits = []

    def make(server, **kw):
        kw.setdefault("retries", 3)
        kw.setdefault("backoff", 0.01)
        kw.setdefault("timeout", 5)
        c = LLMClient(
            LLMConfig(server.url, "fake-model", "sk-test"),
            cache_root=tmp_path / "llm",
            sleep=waits.append,
            **kw,
        )
        c.waits = waits
        return c

    return make


def test_config_from_env_and_args(monkeypatch):
    for v in ("IRBOOK_LLM_BASE_URL", "IRBOOK_LLM_MODEL", "IRBOOK_LLM_API_KEY"):
        monkeypatch.delenv(v, raising=False)
    assert llm_config() is None
    with pytest.raises(ValueError, match="no LLM endpoint"):
        LLMClient()
    monkeypatch.setenv("IRBOOK_LLM_BASE_URL", "http://localhost:8000/v1/")
    monkeypatch.setenv("IRBOOK_LLM_MODEL", "m")
    monkeypatch.setenv("IRBOOK_LLM_API_KEY", "k")
    assert llm_config() == LLMConfig("http://localhost:8000/v1", "m", "k")
    assert llm_config(model="other").model == "other"
    assert "k" not in repr(llm_config())  # the key is never printed
    with pytest.raises(ValueError, match="http"):
        llm_config(base_url="localhost:8000")


def test_endpoint_reached_through_the_environment_alone(monkeypatch, tmp_path):
    "The documented setting: the three IRBOOK_LLM_* variables, and no argument at all."
    good = (
        "What sets the size of a gradient descent step?",
        "The learning rate.",
        ["The size of that step is set by the learning rate"],
    )
    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path))  # the client's default cache
    with FakeServer([ok(qa_reply(good))]) as s:
        monkeypatch.setenv("IRBOOK_LLM_BASE_URL", s.url + "/")
        monkeypatch.setenv("IRBOOK_LLM_MODEL", "stand-in-model")
        monkeypatch.setenv("IRBOOK_LLM_API_KEY", "sk-from-env")
        client = LLMClient()  # nothing passed: the environment decides
        pairs, summary = generate_qa({"p1": PAGE}, client, progress=False)
    assert [(p.question, p.page) for p in pairs] == [(good[0], "p1")]
    (r,) = s.requests
    assert r["path"] == "/v1/chat/completions" and r["auth"] == "Bearer sk-from-env"
    assert r["body"]["model"] == "stand-in-model"
    assert list((tmp_path / "llm").rglob("*.json"))  # the reply cached by default


def test_success_request_shape(client_for):
    reply = qa_reply(
        (
            "What sets the size of a gradient descent step?",
            "The learning rate.",
            ["The size of that step is set by the learning rate"],
        )
    )
    with FakeServer([ok(reply)]) as s:
        c = client_for(s)
        out = c.ask(qa_prompt(PAGE), QA_SCHEMA)
    assert out == json.loads(reply)
    r = s.requests[0]
    assert r["path"] == "/v1/chat/completions" and r["auth"] == "Bearer sk-test"
    assert r["body"]["model"] == "fake-model" and r["body"]["messages"][-1][
        "content"
    ] == qa_prompt(PAGE)
    assert c.stats["requests"] == 1 and c.stats["retries"] == 0


def test_malformed_json_is_rejected_not_cached(client_for):
    with FakeServer(
        [
            ok('Here you go: {"pairs": []}'),
            ok('{"pairs": [{"question": "Why?"}]}'),
            (200, b"<html>not a completion</html>", 0, {}),
        ]
    ) as s:
        c = client_for(s)
        with pytest.raises(LLMReplyError, match="not JSON") as e:
            c.ask("p1", QA_SCHEMA)
        assert e.value.raw.startswith("Here you go")
        with pytest.raises(LLMReplyError, match="schema"):
            c.ask("p2", QA_SCHEMA)
        with pytest.raises(LLMReplyError, match="chat completion"):
            c.ask("p3", QA_SCHEMA)
    assert (
        c.stats["bad_replies"] == 2
        and c.cached("p1") is None
        and c.cached("p2") is None
    )
    assert c.stats["retries"] == 0  # a wrong reply is not an HTTP failure: no retry


def test_429_then_success_honours_retry_after(client_for):
    with FakeServer(
        [
            (429, b"slow down", 0, {"Retry-After": "0.05"}),
            (429, b"slow down", 0, {}),
            ok('{"pairs": []}'),
        ]
    ) as s:
        c = client_for(s)
        assert c.ask("p", QA_SCHEMA) == {"pairs": []}
    assert len(s.requests) == 3 and c.stats["retries"] == 2 and c.stats["HTTP 429"] == 2
    assert c.waits == [0.05, 0.02]  # Retry-After, then backoff * 2**1


def test_500_retries_with_exponential_backoff_then_fails(client_for):
    with FakeServer([(500, b"boom", 0, {})] * 4) as s:
        c = client_for(s, retries=3, backoff=0.5)
        with pytest.raises(LLMError, match="HTTP 500 after 4 attempts"):
            c.ask("p", QA_SCHEMA)
    assert len(s.requests) == 4 and c.waits == [0.5, 1.0, 2.0]


def test_500_then_success(client_for):
    with FakeServer([(503, b"", 0, {}), ok('{"pairs": []}')]) as s:
        assert client_for(s).ask("p", QA_SCHEMA) == {"pairs": []}


def test_4xx_is_not_retried(client_for):
    with FakeServer([(401, b"bad key", 0, {}), ok('{"pairs": []}')]) as s:
        c = client_for(s)
        with pytest.raises(LLMError, match="401"):
            c.ask("p")
    assert len(s.requests) == 1 and not isinstance(LLMError("x"), LLMReplyError)


def test_timeout_is_retried(client_for):
    with FakeServer(
        [(200, completion('{"pairs": []}'), 1.5, {}), ok('{"pairs": []}')]
    ) as s:
        c = client_for(s, timeout=0.3)
        t = time.perf_counter()
        assert c.ask("p", QA_SCHEMA) == {"pairs": []}
    assert (
        c.stats["timeout"] == 1
        and c.stats["retries"] == 1
        and time.perf_counter() - t < 1.4
    )


def test_timeouts_exhausted(client_for):
    with FakeServer([(200, completion("{}"), 1.0, {})] * 2) as s:
        c = client_for(s, timeout=0.2, retries=1)
        with pytest.raises(LLMError, match="timeout after 2 attempts"):
            c.ask("p")


def test_cache_hit_and_atomic_files(client_for, tmp_path):
    with FakeServer([ok('{"pairs": []}')]) as s:
        c = client_for(s)
        assert c.ask("same prompt", QA_SCHEMA) == {"pairs": []}
        assert c.ask("same prompt", QA_SCHEMA) == {
            "pairs": []
        }  # the server has nothing left: must come from disk
        c2 = client_for(s)  # a new client (a rerun) reads the same cache
        assert c2.ask("same prompt", QA_SCHEMA) == {"pairs": []}
    assert (
        len(s.requests) == 1
        and c.stats["cache_hits"] == 1
        and c2.stats["cache_hits"] == 1
    )
    files = list((tmp_path / "llm").rglob("*"))
    assert (
        not [f for f in files if f.suffix == ".tmp"]
        and len([f for f in files if f.is_file()]) == 1
    )
    # the key depends on model and prompt
    other = LLMClient(LLMConfig(s.url, "other-model"), cache_root=tmp_path / "llm")
    assert other.key("same prompt") != c.key("same prompt") and c.key("a") != c.key("b")
    assert other.cached("same prompt") is None


def test_generate_qa_counts_every_failure(client_for):
    good = (
        "What sets the size of a gradient descent step?",
        "The learning rate.",
        ["The size of that step is set by the learning rate"],
    )
    invented = (
        "What does Adam do?",
        "It adapts steps.",
        ["Adam adapts the step of every weight separately."],
    )
    half = (
        "In gradient descent, in which direction does each weight move?",
        "Towards a lower loss.",
        [
            "changes each weight a little in the direction that lowers the loss",
            "Momentum is always 0.9.",
        ],
    )
    pages = {
        "p1": PAGE,
        "p2": "   ",
        "p3": PAGE + " Extra sentence one.",
        "p4": PAGE + " Extra two.",
        "p5": PAGE + " x",
    }
    script = [
        ok(
            qa_reply(good, invented, half)
        ),  # p1: 2 kept, 1 dropped, 2 citations rejected
        ok("not json at all"),  # p3
        (500, b"", 0, {}),
        (500, b"", 0, {}),  # p4: fails after retries=1
        ok('{"pairs": []}'),
    ]  # p5: no pairs
    with FakeServer(script) as s:
        c = client_for(s, retries=1)
        pairs, summ = generate_qa(pages, c, progress=False)

    def g(e):
        return summ["generate", e]

    assert [p.qid for p in pairs] == ["p1_q0", "p1_q2"] and pairs[1].citations == (
        half[2][0],
    )
    assert (
        g("pages") == 5
        and g("empty page (not sent)") == 1
        and g("reply not the JSON asked for") == 1
    )
    assert g("endpoint failed after retries") == 1 and g("page with no pairs") == 1
    assert g("pairs returned") == 3 and g("citation not in page (rejected)") == 2
    assert g("pair with no citation in page (dropped)") == 1 and g("pairs kept") == 2
    assert len(s.requests) == 5  # the empty page was never sent
    assert set(summ.frame().columns) == {"stage", "event", "count", "example"}


def test_citation_score():
    assert (
        citation_score("set by the  learning\nrate", PAGE) == 100
    )  # whitespace differences
    assert (
        citation_score("set by the `learning rate`", PAGE) >= 90
    )  # a stray markdown mark: fuzzy, not exact
    assert citation_score("set by the `learning rate`", PAGE) < 100
    assert citation_score("Convolutions slide a kernel over an image.", PAGE) < 70
    assert citation_score("", PAGE) == 0


def test_parse_json_reply_edges():
    assert parse_json_reply('```json\n{"pairs": []}\n```', QA_SCHEMA) == {"pairs": []}
    for bad in [
        '{"pairs": [], "extra": 1}',
        '{"pairs": [{"question": "What is it?", "answer": "a", "citations": []}]}',
        "[]",
        "",
        "null",
    ]:
        with pytest.raises(LLMReplyError):
            parse_json_reply(bad, QA_SCHEMA)


def test_benchmark_pairs_counts():
    from irbook.course.fastbook import load_questions

    qs = load_questions()
    pairs, summ = benchmark_pairs(qs)
    no_ctx = [q.qid for q in qs if not any(c.contexts for c in q.components)]
    assert len(pairs) == 191 - len(no_ctx) and summ["benchmark", "pairs kept"] == len(
        pairs
    )
    assert summ["benchmark", "question without any cited context (dropped)"] == len(
        no_ctx
    )
    assert all(
        isinstance(p, QAPair) and p.source == "benchmark" and p.citations for p in pairs
    )


def test_connection_refused_is_retried_then_reported(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a port nobody listens on
    waits = []
    c = LLMClient(
        LLMConfig(f"http://127.0.0.1:{port}/v1", "m"),
        retries=2,
        backoff=0.01,
        cache_root=tmp_path,
        sleep=waits.append,
    )
    with pytest.raises(LLMError, match="connection failed.*after 3 attempts"):
        c.ask("p")
    assert c.stats["requests"] == 3 and waits == [0.01, 0.02]
