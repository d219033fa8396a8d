"""Tests for irbook.course.finetune: held-out split never leaks, filters, model cache
integrity, seeded tiny training runs."""

import hashlib

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from irbook.course.chunking import chunk_book
from irbook.course.fastbook import load_questions, normalize
from irbook.course.finetune import (
    FinetuneSettings,
    filter_pairs,
    finetuned_model,
    pseudo_pairs,
    question_pairs,
    split_questions,
    train,
    training_log,
    training_set,
)
from irbook.course.search.dense import Encoder
from irbook.data import folder_is_complete

TINY = dict(max_pairs=16, batch_size=8, max_seq_length=32)


@pytest.fixture(scope="module")
def questions():
    return load_questions()


@pytest.fixture(scope="module")
def chunks():
    return chunk_book("group", n=3)


# ---- the held-out split
# ------------------------------------------------------------------------------
@pytest.mark.parametrize("held_out", [(9, 10, 13), (1,), (2, 4)])
def test_training_set_never_holds_a_held_out_question(questions, chunks, held_out):
    s = FinetuneSettings(held_out=held_out, pseudo=50)
    pairs, summary = training_set(s, questions, chunks)
    held_q = [q for q in questions if q.chapter in held_out]
    held_texts = {normalize(q.text).strip().lower() for q in held_q}
    assert len(pairs) > 0 and summary["pairs", "training pairs"] == len(pairs)
    assert set(pairs.chapter).isdisjoint(held_out)
    assert not set(pairs.qid) & {q.qid for q in held_q}
    assert not any(normalize(a).strip().lower() in held_texts for a in pairs.anchor)
    assert all(chunks[p].chapter not in held_out for p in pairs.pos_id)
    assert set(pairs.source) == {"benchmark", "pseudo"}


def test_training_set_also_safe_when_given_only_held_out_chunks(questions, chunks):
    # chunks passed in are cut to the training chapters, whatever the caller gives
    s = FinetuneSettings(held_out=(9, 10, 13), pseudo=20)
    pairs, _ = training_set(s, questions, chunks)
    assert {chunks[p].chapter for p in pairs.pos_id} <= set(s.train_chapters)


def test_split_questions(questions):
    train_qs, test_qs = split_questions(questions, (9, 10, 13))
    assert {q.chapter for q in test_qs} == {9, 10, 13} and not {
        q.chapter for q in train_qs
    } & {9, 10, 13}
    assert len(train_qs) + len(test_qs) == len(questions)
    for bad in [(), (3,), (1, 2, 4, 8, 9, 10, 13)]:
        with pytest.raises(ValueError):
            split_questions(questions, bad)


# ---- pairs and filters
# -------------------------------------------------------------------------------
def test_question_pairs_one_per_positive(questions, chunks):
    qs = [q for q in questions if q.chapter == 1]
    pairs = question_pairs(qs, chunks)
    counts = pairs.groupby("qid").size()
    assert (pairs.set_index("qid").n_pos.groupby(level=0).first() == counts).all()
    assert (counts > 1).any()  # chapter 1 has multi-positive questions
    assert all(chunks[c].text == t for c, t in zip(pairs.pos_id, pairs.positive))


def test_pseudo_pairs_are_corpus_sentences_not_questions(questions, chunks):
    p = pseudo_pairs([1, 2], chunks, n=40)
    assert len(p) == 40 and set(p.chapter) <= {1, 2}
    texts = {normalize(q.text).strip().lower() for q in questions}
    assert not any(normalize(a).strip().lower() in texts for a in p.anchor)

    def flat(t):
        return " ".join(normalize(t).split())

    assert all(flat(a) in flat(chunks[c].text) for a, c in zip(p.anchor, p.pos_id))
    assert pseudo_pairs([1, 2], chunks, n=0).empty


def _hashed(texts):
    """A fake encoder: the same text gives the same random vector, different texts
    nearly orthogonal ones."""
    return np.stack(
        [
            np.random.default_rng(
                int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
            ).normal(size=256)
            for t in texts
        ]
    )


def test_filter_drops_multi_positive_and_both_near_duplicates(
    questions, chunks, tmp_path
):
    qs = [q for q in questions if q.chapter in (1, 2)]
    pairs = question_pairs(qs, chunks)
    single = pairs[pairs.n_pos == 1].drop_duplicates("qid")
    a, b = single.qid.iloc[0], single.qid.iloc[1]
    twin = pairs[pairs.qid == a].assign(
        qid="twin"
    )  # the same question under another id
    fake = type(qs[0])(
        "twin",
        qs[0].chapter,
        999,
        pairs[pairs.qid == a].anchor.iloc[0],
        "",
        qs[[q.qid for q in qs].index(a)].components,
    )
    enc = Encoder("hashed", fn=_hashed, cache=False, progress=False)
    kept, summary = filter_pairs(
        pd.concat([pairs, twin], ignore_index=True), qs + [fake], chunks, encoder=enc
    )
    assert not (kept.n_pos > 1).any()
    assert a not in set(kept.qid) and "twin" not in set(
        kept.qid
    )  # both members of the duplicate pair go
    assert b in set(kept.qid)
    multi = pairs[pairs.n_pos > 1].qid.nunique()
    assert (
        summary["filter", "questions with > 1 positive chunk (all their pairs dropped)"]
        == multi
    )
    assert summary["filter", "pairs kept"] == len(kept)


def test_settings_digest():
    assert FinetuneSettings().digest() == FinetuneSettings().digest()
    assert FinetuneSettings(filtered=True).key() != FinetuneSettings().key()
    assert (
        FinetuneSettings(held_out=(13, 9, 10)).digest()
        == FinetuneSettings(held_out=(9, 10, 13)).digest()
    )
    assert FinetuneSettings().train_chapters == (1, 2, 4, 8)


# ---- tiny seeded training runs
# -----------------------------------------------------------------------
def _embed(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu").encode(
        ["How do I pick a learning rate?", "What is a DataLoader?"]
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, questions, chunks):
    f = tmp_path_factory.mktemp("ft") / "tiny"
    return finetuned_model(
        FinetuneSettings(**TINY),
        root=f,
        progress=False,
        questions=questions,
        chunks=chunks,
    )


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_tiny_run_is_seeded_and_reproducible(tiny_model, tmp_path, questions, chunks):
    again = finetuned_model(
        FinetuneSettings(**TINY),
        root=tmp_path / "again",
        progress=False,
        questions=questions,
        chunks=chunks,
    )
    other = finetuned_model(
        FinetuneSettings(**TINY, seed=1),
        root=tmp_path / "other",
        progress=False,
        questions=questions,
        chunks=chunks,
    )
    a, b, c = _embed(tiny_model), _embed(again), _embed(other)
    assert training_log(tiny_model)["losses"] == training_log(again)["losses"]
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(a, c, atol=1e-4)  # the seed matters
    from sentence_transformers import SentenceTransformer

    from irbook.course.search.dense import MINILM, resolve_model

    base = SentenceTransformer(resolve_model(MINILM), device="cpu").encode(
        ["How do I pick a learning rate?", "What is a DataLoader?"]
    )
    assert not np.allclose(a, base, atol=1e-4)  # training changed the weights


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_half_written_model_is_rebuilt_not_loaded(
    tiny_model, tmp_path, questions, chunks
):
    import shutil

    f = tmp_path / "copy"
    shutil.copytree(tiny_model, f)
    ref = _embed(f)
    w = f / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])  # a crash mid-save
    assert not folder_is_complete(f, FinetuneSettings(**TINY).digest())
    with pytest.warns(UserWarning, match="rebuilding"):
        out = finetuned_model(
            FinetuneSettings(**TINY),
            root=f,
            progress=False,
            questions=questions,
            chunks=chunks,
        )
    assert folder_is_complete(out, FinetuneSettings(**TINY).digest())
    np.testing.assert_allclose(_embed(out), ref, atol=1e-6)
    log = training_log(out)
    assert (
        log["steps"] == 2
        and log["pairs"] == 16
        and set(log["train_qids"]).isdisjoint(
            {q.qid for q in questions if q.chapter in (9, 10, 13)}
        )
    )


@pytest.mark.slow  # training / encoding: `make test-slow`
def test_cached_loss_trains(tmp_path, questions, chunks):
    s = FinetuneSettings(**TINY, loss="cached", mini_batch=4)
    pairs, _ = training_set(s, questions, chunks)
    log = train(s, pairs, tmp_path / "m", progress=False)
    assert (
        log["steps"] == 2
        and all(np.isfinite(log["losses"]))
        and (tmp_path / "m" / "model.safetensors").exists()
    )
    with pytest.raises(ValueError, match="loss"):
        train(FinetuneSettings(loss="triplet"), pairs, tmp_path / "x", progress=False)
