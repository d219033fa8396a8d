"""irbook.course.noise: citation mapping, near-duplicates, RRF, judges and the
multi-positive filter."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from irbook.course.chunking import Chunk
from irbook.course.noise import (
    ContainmentJudge,
    LLMJudge,
    drop_near_duplicates,
    map_citation,
    map_pairs,
    multi_positive_filter,
    multi_positive_table,
    near_duplicates,
    positive_counts,
    rrf,
)
from irbook.course.synthetic import LLMClient, LLMConfig, LLMReplyError, QAPair

# the test servers' poll interval: shutdown() waits up to one (http.server's default,
# 0.5 s, was most of each test's time)
POLL = 0.01

A = (
    "The learning rate sets how big a step gradient descent takes at every update of "
    "the weights."
)
B = (
    "Overfitting means the model memorises the training set instead of learning "
    "patterns that generalise."
)
C = (
    "A validation set is held out from training so that we can measure how well the "
    "model generalises."
)
CHUNKS = {
    "c01_0000": Chunk("c01_0000", 1, A, None),
    "c01_0001": Chunk("c01_0001", 1, B, None),
    "c01_0002": Chunk("c01_0002", 1, "Training", None),
    "c01_0003": Chunk("c01_0003", 1, C, None),
    "c02_0000": Chunk("c02_0000", 2, A, None),
}


def test_map_citation_exact_fuzzy_spanning_and_missing():
    assert map_citation("how big a step gradient descent takes", CHUNKS, 1) == {
        "c01_0000": 100.0
    }
    assert set(map_citation("how big a step gradient descent takes", CHUNKS)) == {
        "c01_0000",
        "c02_0000",
    }  # no chapter
    fuzzy = map_citation("how big a step `gradient descent` takes", CHUNKS, 1)
    assert list(fuzzy) == ["c01_0000"] and 90 <= fuzzy["c01_0000"] < 100
    span = map_citation(B[40:] + " " + C[:60], CHUNKS, 1)  # runs across two chunks
    assert set(span) == {"c01_0001", "c01_0003"}
    assert "c01_0002" not in map_citation(
        "Training " + B, CHUNKS, 1
    )  # a tiny chunk does not match inside a long citation
    assert (
        map_citation(
            "Convolutional layers slide a small kernel across the image.", CHUNKS, 1
        )
        == {}
    )
    assert map_citation("   ", CHUNKS, 1) == {}


def test_map_pairs_counts_and_flags():
    pairs = [
        QAPair("1_1", 1, "q", "a", (A[:50],)),
        QAPair("1_2", 1, "q", "a", (A[:50], C[:50])),
        QAPair(
            "1_3",
            1,
            "q",
            "a",
            ("Nothing like this sentence appears anywhere in the chunks at all.",),
        ),
        QAPair(
            "1_4",
            1,
            "q",
            "a",
            (B[:50], "Another invented citation that is nowhere in the book."),
        ),
    ]
    df, s = map_pairs(pairs, CHUNKS, progress=False)
    assert df.loc["1_1", "positives"] == ["c01_0000"] and not df.loc["1_1", "multi"]
    assert (
        df.loc["1_2", "positives"] == ["c01_0000", "c01_0003"]
        and df.loc["1_2", "multi"]
    )
    assert (
        df.loc["1_3", "n_pos"] == 0
        and df.loc["1_4", "unmapped"] == 1
        and df.loc["1_4", "n_pos"] == 1
    )
    assert (
        s["map", "citation found nowhere"] == 2
        and s["map", "pair with no positive chunk (dropped)"] == 1
    )
    assert (
        s["map", "pair with several positive chunks (flagged)"] == 1
        and s["map", "pairs"] == 4
    )


def test_near_duplicates_against_brute_force():
    rng = np.random.default_rng(0)
    e = rng.normal(size=(40, 8))
    e[7] = e[3] + 0.01 * rng.normal(size=8)
    e[30] = e[3]
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    ids = [f"q{i}" for i in range(40)]
    for t in (0.5, 0.9, 0.97):
        brute = {
            (ids[i], ids[j])
            for i in range(40)
            for j in range(i + 1, 40)
            if e[i] @ e[j] >= t
        }
        got = near_duplicates(e, ids, t)
        assert set(zip(got.a, got.b)) == brute
        assert list(got.cosine) == sorted(got.cosine, reverse=True)
    pairs = [QAPair(i, 1, "q", "a", ("c",)) for i in ids]
    kept, s = drop_near_duplicates(pairs, e, 0.97)
    assert {p.qid for p in kept} == set(ids) - {
        "q3",
        "q7",
        "q30",
    }  # both (all) members removed
    assert s["dedup", "questions removed (both of each pair)"] == 3
    with pytest.raises(ValueError, match="ids"):
        near_duplicates(e, ids[:-1])


def test_rrf_by_hand():
    r1 = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    r2 = {"q": {"c": 0.9, "a": 0.5}, "q2": {"x": 1.0}}
    f = rrf([r1, r2], rrf_k=60)
    assert f["q"] == pytest.approx(
        {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62}
    )
    assert list(f["q"]) == ["a", "c", "b"] and f["q2"] == {"x": 1 / 61}
    assert list(rrf([{"q": {"b": 1.0, "a": 1.0}}])["q"]) == [
        "a",
        "b",
    ]  # ties by doc id, as irbook.course.fastbook ranks
    assert list(rrf([r1, r2], k=1)["q"]) == ["a"]


def test_containment_judge():
    j = ContainmentJudge()
    p = QAPair(
        "x",
        1,
        "What does the learning rate set?",
        "The learning rate sets the step size of gradient descent.",
        ("c",),
    )
    assert (
        j(p, A) in ("Full", "Unknown")
        and j(p, "Completely unrelated words about cooking pasta.") == "None"
    )
    assert (
        j(p, "learning rates set step sizes in gradient descent") == "Full"
    )  # stemmed
    assert (
        j(QAPair("x", 1, "q", "the of and", ("c",)), A) == "Unknown"
    )  # no content words: cannot judge
    assert (
        j(QAPair("x", 1, "q", "learning rate", ("c",)), A) == "Unknown"
    )  # 2 content words: never Full
    assert (
        ContainmentJudge(min_words=1)(QAPair("x", 1, "q", "learning rate", ("c",)), A)
        == "Full"
    )
    assert "not an LLM" in j.name
    with pytest.raises(ValueError):
        ContainmentJudge(full=0.3, partial=0.6)


class _Judge:
    name = "scripted judge"

    def __init__(self, labels):
        self.labels = labels

    def __call__(self, pair, text):
        lab = self.labels[(pair.qid, text)]
        if lab == "bad":
            raise LLMReplyError("not json", "oops")
        return lab


def test_multi_positive_filter_counts():
    pairs = [
        QAPair("1_1", 1, "q1", "a", ("c",)),
        QAPair("1_2", 1, "q2", "a", ("c",)),
        QAPair("1_3", 1, "", "a", ("c",)),
        QAPair("1_4", 1, "q4", "a", ("c",)),
    ]
    positives = {
        "1_1": ["c01_0000"],
        "1_2": ["c01_0001"],
        "1_3": ["c01_0000"],
        "1_4": ["c01_0000"],
    }
    run = {
        "1_1": {"c01_0000": 3, "c01_0001": 2, "c01_0003": 1},
        "1_2": {"c01_0000": 5, "c01_0001": 4},
        "1_3": {},
        "1_4": {"c01_0003": 1.0, "c01_0001": 2.0},
    }
    labels = {
        ("1_1", B): "None",
        ("1_1", C): "Full",
        ("1_2", A): "Unknown",
        ("1_4", B): "bad",
        ("1_4", C): "None",
    }
    df, s = multi_positive_filter(
        pairs, positives, run, CHUNKS, _Judge(labels), L=5, progress=False
    )
    assert (
        df.loc["1_1", "removed"]
        and df.loc["1_1", "candidates"] == 2
        and df.loc["1_1", "known_in_top"] == 1
    )
    assert not df.loc["1_2", "removed"] and df.loc["1_2", "Unknown"] == 1
    assert df.loc["1_3", "retrieved"] == 0 and not df.loc["1_3", "removed"]
    assert df.loc["1_4", "Unknown"] == 1 and df.loc["1_4", "None"] == 1
    assert df.loc["1_1", "judged"] == {"c01_0001": "None", "c01_0003": "Full"}
    st = "multi-positive"
    assert s[st, "query with no retrieved chunk (kept, not judged)"] == 1
    assert s[st, "judge reply not the JSON asked for (Unknown)"] == 1
    assert (
        s[st, "pairs removed (another chunk answers)"] == 1 and s[st, "pairs kept"] == 3
    )
    # L cuts the candidate list before the positives are removed
    df1, _ = multi_positive_filter(
        pairs[:1], positives, run, CHUNKS, _Judge(labels), L=1, progress=False
    )
    assert df1.loc["1_1", "candidates"] == 0 and not df1.loc["1_1", "removed"]


def test_llm_judge_against_fake_server(tmp_path):
    replies = [
        json.dumps({"label": "Full", "reason": "it says so"}),
        "Full",
        json.dumps({"label": "Maybe"}),
    ]

    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps(
                {"choices": [{"message": {"content": replies.pop(0)}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, args=(POLL,), daemon=True).start()
    try:
        judge = LLMJudge(
            LLMClient(
                LLMConfig(f"http://127.0.0.1:{srv.server_port}/v1", "m"),
                cache_root=tmp_path,
                retries=0,
            )
        )
        p = QAPair("x", 1, "What sets the step size?", "the learning rate", ("c",))
        assert judge(p, A) == "Full"
        pairs = [
            QAPair("1_1", 1, "q1", "a", ("c",)),
            QAPair("1_2", 1, "q2", "a", ("c",)),
        ]
        df, s = multi_positive_filter(
            pairs,
            {},
            {"1_1": {"c01_0000": 1.0}, "1_2": {"c01_0001": 1.0}},
            CHUNKS,
            judge,
            progress=False,
        )
    finally:
        srv.shutdown()
        srv.server_close()
    assert (
        s["multi-positive", "judge reply not the JSON asked for (Unknown)"] == 2
        and not df.removed.any()
    )
    assert "Full" in judge.prompt(p, A) and A in judge.prompt(p, A)


def test_positive_counts_against_qrels():
    from irbook.course.chunking import chunk_book
    from irbook.course.fastbook import contexts_to_qrels, load_questions

    qs = load_questions()
    chunks = chunk_book("tokens", size=2000)
    pc = positive_counts(qs, chunks)
    qrels = contexts_to_qrels(qs, chunks)
    assert {q: n for q, n in pc.n_pos.items() if n} == {
        q: len(v) for q, v in qrels.items()
    }
    t = multi_positive_table(qs, {"t2000": chunks})
    assert t.loc["t2000", ["no positive", "one positive", "> 1 positive"]].sum() == len(
        qs
    )
