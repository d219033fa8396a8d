"""Tests for irbook.course.search.colbert (the offline stand-in MiniLM-LI with PyLate):
cache integrity, training data, retriever shape, IRBOOK_COLBERT."""

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pylate")
import torch
from pylate.scores import colbert_scores

from irbook.course.fastbook import load_questions, normalize
from irbook.course.search.colbert import (
    ColBERTRetriever,
    ColBERTSettings,
    RAGatouilleRetriever,
    agree_up_to_ties,
    check_colbert_ai,
    colbert_ai_complete,
    colbert_ai_metadata,
    colbert_training_log,
    is_complete,
    maxsim,
    new_colbert,
    offline_colbert,
    pseudo_queries,
    to_colbert_ai,
)
from irbook.data import MARKER

TINY = ColBERTSettings(chapters=(1,), n_pairs=16, batch_size=8, steps=3)


@pytest.fixture(scope="module")
def model():
    return new_colbert(seed=0)


DOCS = {
    "a": "The learning rate finder plots loss against learning rate.",
    "b": "Cats and dogs can be told apart from pictures.",
    "c": "Stochastic gradient descent updates the weights with the gradient.",
    "d": "A DataLoader gives mini-batches of items to the model.",
}


@pytest.fixture(scope="module")
def retriever(model):
    return ColBERTRetriever(model, progress=False, candidates=2).index(DOCS)


# ---- training data
# -------------------------------------------------------------------------------
def test_pseudo_queries_seeded_and_not_from_benchmark():
    p1, p2 = pseudo_queries(seed=0), pseudo_queries(seed=0)
    assert p1 == p2 and len(p1) > 100
    assert pseudo_queries(seed=1) != p1
    questions = {normalize(q.text).strip().lower() for q in load_questions()}
    assert not any(normalize(q).strip().lower() in questions for q, _ in p1)
    # inverse cloze: the query sentence is not left inside its positive
    assert sum(q in d for q, d in p1) < 0.05 * len(p1)


# ---- cache integrity
# -----------------------------------------------------------------------------
def _write_marker(folder: Path, settings, files=None):
    files = (
        files
        if files is not None
        else {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.iterdir()
            if p.name != MARKER
        }
    )
    (folder / MARKER).write_text(
        json.dumps({"settings": settings.digest(), "files": files})
    )


def test_is_complete_detects_fake_and_half_written(tmp_path):
    f = tmp_path / "m"
    f.mkdir()
    (f / "model.safetensors").write_bytes(b"weights")
    assert not is_complete(f, TINY)  # no marker
    (f / MARKER).write_text("{not json")
    assert not is_complete(f, TINY)  # corrupt marker
    _write_marker(f, ColBERTSettings())
    assert not is_complete(f, TINY)  # other settings
    _write_marker(f, TINY)
    assert is_complete(f, TINY)  # valid
    (f / "model.safetensors").write_bytes(b"weigh")  # truncated afterwards
    assert not is_complete(f, TINY)
    assert not is_complete(tmp_path / "missing", TINY)


def test_settings_key_changes_with_settings():
    assert TINY.key() != ColBERTSettings().key()
    assert (
        TINY.digest()
        == ColBERTSettings(chapters=(1,), n_pairs=16, batch_size=8, steps=3).digest()
    )


def test_offline_colbert_rebuilds_corrupt_folder_then_reuses(tmp_path):
    f = tmp_path / "model"
    f.mkdir()
    (f / "model.safetensors").write_bytes(b"half")  # a crash mid-save: no marker
    with pytest.warns(UserWarning, match="rebuilding"):
        out = offline_colbert(TINY, root=f, progress=False)
    assert out == f and is_complete(f, TINY)
    assert len(colbert_training_log(f)["losses"]) == TINY.steps
    stamp = (f / MARKER).stat().st_mtime_ns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            offline_colbert(TINY, root=f, progress=False) == f
        )  # reused, not retrained
    assert (f / MARKER).stat().st_mtime_ns == stamp
    assert not list(tmp_path.glob(".model.*"))  # no temp folder left behind
    # the saved model reloads with the trained projection
    from irbook.course.search.colbert import load_colbert

    m = load_colbert(str(f))
    assert m[1].linear.weight.shape == (TINY.dim, 384)


# ---- untrained models are random
# -----------------------------------------------------------------
def test_untrained_projection_random_unless_seeded(model):
    w = model[1].linear.weight
    assert not torch.equal(
        new_colbert()[1].linear.weight, new_colbert()[1].linear.weight
    )
    assert torch.equal(new_colbert(seed=0)[1].linear.weight, w)


# ---- retriever
# -----------------------------------------------------------------------------------
def test_maxsim_equals_pylate(model):
    q = model.encode(["how to choose a learning rate"], is_query=True)[0]
    ds = model.encode(list(DOCS.values()), is_query=False)
    ours = [maxsim(q, d) for d in ds]
    ref = [
        float(colbert_scores(torch.tensor(q)[None], torch.tensor(d)[None])[0, 0])
        for d in ds
    ]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_search_shape_filter_and_exact_scores(retriever, model):
    qs = {"q1": "learning rate finder", "q2": "pictures of pets", "q3": "   "}
    flt = {"q1": {"b", "c", "d"}, "q2": {"a", "b"}, "q3": {"a"}}
    run = retriever.search(qs, k=2, filter=flt)
    assert set(run) == set(qs) and run["q3"] == {}
    assert (
        set(run["q1"]) <= flt["q1"]
        and set(run["q2"]) <= flt["q2"]
        and len(run["q1"]) == 2
    )
    # scores are exact MaxSim, computed independently
    qe = model.encode([qs["q1"]], is_query=True)[0]
    de = dict(zip(DOCS, model.encode(list(DOCS.values()), is_query=False)))
    ref = {d: float((qe @ de[d].T).max(1).sum()) for d in flt["q1"]}
    best = sorted(ref, key=lambda d: -ref[d])[:2]
    assert list(run["q1"]) == best
    for d in best:
        assert run["q1"][d] == pytest.approx(ref[d], rel=1e-5)
    # without a filter: every doc is reachable, k larger than the corpus is fine
    full = retriever.search({"q1": qs["q1"]}, k=10)["q1"]
    assert len(full) == len(DOCS)


def test_search_errors_and_long_query(retriever):
    with pytest.raises(ValueError, match="q9"):
        retriever.search({"q9": "x"}, k=2, filter={"q1": {"a"}})
    with pytest.raises(ValueError, match="zz"):
        retriever.search({"q1": "x"}, k=2, filter={"q1": {"zz"}})
    with pytest.raises(ValueError):
        retriever.search({"q1": "x"}, k=0)
    with pytest.warns(UserWarning, match="truncated"):
        run = retriever.search({"long": "learning rate " * 200}, k=2)
    assert len(run["long"]) == 2


def test_empty_index(model):
    r = ColBERTRetriever(model, progress=False).index({})
    assert r.search({"q": "anything"}, k=3) == {"q": {}}


def test_length_options_validated(model):
    for bad in (10_000, 0, "512", True):
        with pytest.raises(ValueError, match="document_length"):
            ColBERTRetriever(model, progress=False, document_length=bad)
    assert model.document_length == 180  # a rejected option leaves the model alone


# ---- colbert-ai conversion (RAGatouille's format)
# ----------------------------------------


def test_module_imports_without_ragatouille_or_colbert_ai():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['ragatouille'] = sys.modules['colbert'] = None; "
        "import irbook.course.search.colbert as m; assert m.RAGatouilleRetriever and "
        "m.to_colbert_ai"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_agree_up_to_ties():
    a = {"d1": 3.0, "d2": 2.5, "d3": 2.0}
    assert agree_up_to_ties(a, dict(a))
    assert agree_up_to_ties(
        a, {"d2": 2.5, "d1": 3.0, "d3": 2.0 + 1e-6}
    )  # order of the dict does not matter, scores do
    assert agree_up_to_ties(a, {"d1": 3.0, "d2": 2.5, "d4": 2.0})  # tie at the cut-off
    assert not agree_up_to_ties(
        a, {"d1": 3.0, "d3": 2.5, "d2": 2.0}
    )  # swapped, not tied
    assert not agree_up_to_ties(
        a, {"d1": 3.0, "d2": 2.5, "d4": 1.9}
    )  # another doc, lower score
    assert not agree_up_to_ties(a, {"d1": 3.0, "d2": 2.5})  # shorter


@pytest.fixture(scope="module")
def pylate_dir(model, tmp_path_factory):
    d = tmp_path_factory.mktemp("pylate") / "model"
    model.save(str(d))  # seeded random projection: conversion does not need training
    return d


@pytest.fixture(scope="module")
def converted(pylate_dir, tmp_path_factory):
    pytest.importorskip("colbert")
    return to_colbert_ai(pylate_dir, tmp_path_factory.mktemp("colbert-ai") / "ckpt")


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_conversion_layout_and_round_trip(pylate_dir, converted):
    from safetensors.torch import load_file

    assert colbert_ai_complete(converted, pylate_dir)
    w = load_file(converted / "model.safetensors")
    assert "linear.weight" in w and all(
        k.startswith("bert.") for k in w if k != "linear.weight"
    )
    src = load_file(pylate_dir / "model.safetensors")
    assert torch.equal(
        w["bert.embeddings.word_embeddings.weight"],
        src["embeddings.word_embeddings.weight"],
    )
    meta = json.loads((converted / "artifact.metadata").read_text())
    assert (
        meta == colbert_ai_metadata(pylate_dir)
        and meta["query_maxlen"] == 32
        and meta["doc_maxlen"] == 180
    )
    assert check_colbert_ai(pylate_dir, converted) <= 1e-4


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_check_catches_a_wrong_conversion(pylate_dir, converted, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    bad = tmp_path / "bad"
    shutil.copytree(converted, bad)
    cfg = json.loads((bad / "special_tokens_map.json").read_text())
    cfg["pad_token"] = "[MASK]"  # PyLate's pad token kept
    (bad / "special_tokens_map.json").write_text(json.dumps(cfg))
    cfg = json.loads((bad / "tokenizer_config.json").read_text())
    cfg["pad_token"] = "[MASK]"
    (bad / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="differs"):
        check_colbert_ai(pylate_dir, bad)
    worse = tmp_path / "worse"
    shutil.copytree(converted, worse)
    w = load_file(worse / "model.safetensors")
    w["linear.weight"] = w["linear.weight"] * 1.01 + 0.01
    save_file(w, worse / "model.safetensors")
    with pytest.raises(ValueError, match="differs"):
        check_colbert_ai(pylate_dir, worse)


@pytest.mark.slow  # compiles colbert-ai's extensions on first use: `make test-slow`
def test_half_written_conversion_is_rebuilt_then_reused(pylate_dir, tmp_path):
    pytest.importorskip("colbert")
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"half")  # crash mid-conversion: no marker
    assert not colbert_ai_complete(out, pylate_dir)
    with pytest.warns(UserWarning, match="rebuilding"):
        assert to_colbert_ai(pylate_dir, out) == out
    assert colbert_ai_complete(out, pylate_dir)
    stamp = (out / MARKER).stat().st_mtime_ns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert to_colbert_ai(pylate_dir, out) == out  # reused
    assert (out / MARKER).stat().st_mtime_ns == stamp
    assert not list(tmp_path.glob(".ckpt.*"))  # no temp folder left
    with open(out / "model.safetensors", "r+b") as f:
        f.truncate(1000)  # damaged afterwards
    assert not colbert_ai_complete(out, pylate_dir)
    with pytest.warns(UserWarning, match="rebuilding"):
        to_colbert_ai(pylate_dir, out)
    assert colbert_ai_complete(out, pylate_dir)


def test_conversion_refuses_what_colbert_ai_cannot_express(pylate_dir, tmp_path):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(pylate_dir, other)
    st = json.loads((other / "config_sentence_transformers.json").read_text())
    st["skiplist_words"] = ["!"]
    (other / "config_sentence_transformers.json").write_text(json.dumps(st))
    with pytest.raises(ValueError, match="skiplist"):
        to_colbert_ai(other, tmp_path / "out", check=False)
    assert not (tmp_path / "out").exists()


# ---- RAGatouille gives PyLate's top results
# ------------------------------------------------------
@pytest.fixture(scope="module")
def small_corpus():
    from irbook.course.chunking import chunk_book

    ch = {c: x.text for c, x in chunk_book("group", n=3).items() if x.chapter == 8}
    docs = dict(list(ch.items())[:40])
    qs = {q.qid: q.text for q in load_questions() if q.chapter == 8}
    return docs, dict(list(qs.items())[:6])


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_ragatouille_same_top_results_as_pylate(
    model, converted, small_corpus, tmp_path
):
    pytest.importorskip("ragatouille")
    docs, qs = small_corpus
    ids = list(docs)
    flt = {
        q: set(ids[::2]) if j % 2 else set(ids) for j, q in enumerate(qs)
    }  # half the queries see every other doc
    ref = (
        ColBERTRetriever(model, progress=False).index(docs).search(qs, k=10, filter=flt)
    )
    rag = RAGatouilleRetriever(converted, index_root=tmp_path / "idx").index(docs)
    run = rag.search(qs, k=10, filter=flt)
    assert set(run) == set(qs)
    for q in qs:
        assert set(run[q]) <= flt[q] and len(run[q]) == 10
        assert agree_up_to_ties(ref[q], run[q]), (q, ref[q], run[q])
    rag.exact = False  # RAGatouille's own compressed scores: same filter, close scores
    plaid = rag.search(qs, k=10, filter=flt)
    for q in qs:
        assert set(plaid[q]) <= flt[q] and len(plaid[q]) == 10
        assert max(abs(ref[q][d] - s) for d, s in plaid[q].items() if d in ref[q]) < 0.5
    assert rag.search({"blank": "  "}, k=3) == {"blank": {}}
    with pytest.raises(ValueError, match="zz"):
        rag.search({"q": "x"}, k=2, filter={"q": {"zz"}})


def test_voyager_inserts_on_one_thread():
    "Voyager's threaded insertion races (different graphs, different runs): one thread."
    from irbook.course.search.colbert import _OneThread

    calls = []

    class FakeIndex:
        size = 3

        def add_items(self, vectors, ids=None, num_threads=-1):
            calls.append(num_threads)
            return list(range(len(vectors)))

    index = _OneThread(FakeIndex())
    assert index.add_items([[0.0], [1.0]]) == [0, 1]
    assert calls == [1] and index.size == 3


def test_index_cache_reused_for_the_same_model_and_texts(model, tmp_path, monkeypatch):
    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path))
    qs = {"q1": "how do I pick a learning rate?", "q2": "pictures of pets"}
    model.irbook_identity = "test-model-1"
    try:
        first = ColBERTRetriever(model, progress=False).index(DOCS)
        folders = list((tmp_path / "indexes").iterdir())
        assert len(folders) == 1 and (folders[0] / MARKER).is_file()
        stamp = (folders[0] / "emb.npz").stat().st_mtime_ns
        again = ColBERTRetriever(model, progress=False).index(DOCS)
        assert (folders[0] / "emb.npz").stat().st_mtime_ns == stamp  # loaded, not built
        assert again.search(qs, k=3) == first.search(qs, k=3)
        # no filter: Voyager's graph, built once beside the vectors, then loaded
        graphs = [f for f in (tmp_path / "indexes").iterdir() if f not in folders]
        assert [f.name for f in graphs] == [folders[0].name + "-voyager"]
        assert (graphs[0] / MARKER).is_file()
        for e1, e2 in zip(first.emb, again.emb):
            np.testing.assert_array_equal(e1, e2)
        # other texts, another model, or cache=False: a new build
        ColBERTRetriever(model, progress=False).index({**DOCS, "e": "new text"})
        ColBERTRetriever(model, progress=False, cache=False).index(DOCS)
        model.irbook_identity = "test-model-2"
        ColBERTRetriever(model, progress=False).index(DOCS)
        assert len(vectors(tmp_path)) == 3
    finally:
        del model.irbook_identity
    ColBERTRetriever(model, progress=False).index(DOCS)  # no identity: never cached
    assert len(vectors(tmp_path)) == 3


def vectors(cache) -> list:
    "The cached token-vector folders (each Voyager graph sits beside its vectors)."
    return [
        f for f in (cache / "indexes").iterdir() if f.name.endswith("-voyager") is False
    ]


# ---- the stand-in's name and the one setting for a real checkpoint (IRBOOK_COLBERT)
# ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    "Two tiny stand-ins: one for IRBOOK_COLBERT to point at, one as the default."
    root = tmp_path_factory.mktemp("standins")
    return (
        offline_colbert(TINY, root=root / "pointed", progress=False),
        offline_colbert(
            ColBERTSettings(chapters=(1,), n_pairs=16, batch_size=8, steps=3, seed=1),
            root=root / "default",
            progress=False,
        ),
    )


def test_standin_is_named_for_what_it_is(tiny_dirs):
    from irbook.course.search.colbert import STANDIN, STANDIN_ABOUT, load_colbert

    assert STANDIN == "MiniLM-LI" and "not ColBERTv2" in STANDIN_ABOUT
    s = ColBERTSettings()
    assert f"{s.dim}-d" in STANDIN_ABOUT and f"{s.steps} steps" in STANDIN_ABOUT
    assert f"{s.n_pairs} pseudo-queries" in STANDIN_ABOUT
    assert load_colbert(str(tiny_dirs[0])).irbook_name == STANDIN


def test_irbook_colbert_folder_is_the_model_loaded(tiny_dirs, tmp_path, monkeypatch):
    import irbook.course.search.colbert as cb

    pointed, default = tiny_dirs
    monkeypatch.setattr(cb, "offline_colbert", lambda **kw: default)
    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path))
    monkeypatch.delenv(cb.COLBERT_ENV, raising=False)
    plain = ColBERTRetriever(progress=False).index(DOCS)
    assert plain.model.irbook_identity == cb.model_identity(default)
    monkeypatch.setenv(cb.COLBERT_ENV, str(pointed))
    chosen = ColBERTRetriever(progress=False).index(DOCS)
    assert chosen.model.irbook_identity == cb.model_identity(pointed)
    assert chosen.key != plain.key  # the index cache tells the two apart
    assert chosen.key == ColBERTRetriever(str(pointed), progress=False).index(DOCS).key
    w1, w2 = (r.model[1].linear.weight for r in (chosen, plain))
    assert not torch.equal(w1, w2)  # really the other model's weights


def test_irbook_colbert_hub_name_reaches_pylate(monkeypatch):
    import pylate.models

    import irbook.course.search.colbert as cb

    asked = []

    class Hub:
        def __init__(self, name, device=None, **kw):
            asked.append((name, device))

    monkeypatch.setattr(pylate.models, "ColBERT", Hub)
    monkeypatch.setattr(cb, "offline_colbert", lambda **kw: pytest.fail("trained"))
    monkeypatch.setenv(cb.COLBERT_ENV, cb.ANSWERAI_SMALL)
    m = cb.load_colbert(device="cpu")
    assert asked == [(cb.ANSWERAI_SMALL, "cpu")]
    assert m.irbook_identity == f"hub:{cb.ANSWERAI_SMALL}"
    assert m.irbook_name == cb.ANSWERAI_SMALL


def test_hub_out_of_reach_names_the_setting(monkeypatch):
    import pylate.models

    import irbook.course.search.colbert as cb

    def offline(name, **kw):
        raise OSError("We couldn't connect to 'https://huggingface.co'")

    monkeypatch.setattr(pylate.models, "ColBERT", offline)
    monkeypatch.setenv(cb.COLBERT_ENV, cb.COLBERTV2)
    with pytest.raises(OSError, match=r"set by IRBOOK_COLBERT.*unset it.*MiniLM-LI"):
        cb.load_colbert(device="cpu")
    monkeypatch.delenv(cb.COLBERT_ENV)
    with pytest.raises(OSError, match=r"load_colbert\(None\) \(MiniLM-LI\)") as e:
        cb.load_colbert(cb.COLBERTV2, device="cpu")
    assert "IRBOOK_COLBERT" not in str(e.value)
