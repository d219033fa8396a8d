"""irbook.course.training_filters: each filter's verdict on a made-up chapter, pairs per
kept query, the filter-vs-none statistics on made-up scores, the validation split, a
bench record read back (its sweep too), the epoch chain, the re-run configuration
built from its description, the LLM pool against the fake server, and (slow) a model
trained on given pairs and cached by them, one stopped early on validation, and the
epoch curve."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_synthetic import FakeServer, ok, qa_reply

from irbook.course.chunking import Chunk
from irbook.course.common import Summary
from irbook.course.noise import ContainmentJudge
from irbook.course.synthetic import LLMClient, LLMConfig
from irbook.course.synthetic_eval import SynthQuery
from irbook.course.training_filters import (
    TRAIN_FILTERS,
    early_stopped_model,
    epoch_curve,
    epoch_models,
    filter_effects,
    filter_pairs_by,
    filter_table,
    record_scores,
    sweep_curve,
    training_queries,
    unfiltered_scores,
    validation_split,
)

TEXTS = [
    "The learning rate sets how big a step gradient descent takes at each update.",
    "Overfitting means the model memorises the training set instead of patterns.",
    "A validation set is held out so we can measure how well the model generalises.",
    "Data augmentation creates new training images by flipping and cropping them.",
    "Transfer learning starts from weights trained on a large dataset like ImageNet.",
    "Embeddings map each category of a tabular column to a vector of numbers.",
    "Random forests average many decision trees trained on bootstrap samples.",
    "Tokenization splits raw text into words or subword pieces before numbering.",
]
# c01_0008 repeats c01_0000's sentence word for word: another chunk that answers it
CHUNKS = {f"c01_{i:04d}": Chunk(f"c01_{i:04d}", 1, t) for i, t in enumerate(TEXTS)}
CHUNKS["c01_0008"] = Chunk("c01_0008", 1, "In short: " + TEXTS[0])


def q(qid, text, pos, answer=None):
    return SynthQuery(
        qid, 1, text, (pos,), "inverse cloze", text if answer is None else answer
    )


QUERIES = [
    q("lr", TEXTS[0], "c01_0000"),  # its sentence is also in c01_0008
    q("over", TEXTS[1], "c01_0001"),
    q("val", "how well does the model generalise on held out data", "c01_0002"),
    q("aug1", "flipping and cropping images", "c01_0003"),
    q("aug2", "flipping and cropping images", "c01_0003"),  # a duplicate of aug1
    q("wrong", "subword pieces of raw text", "c01_0006"),  # gold is the forest chunk
]


@pytest.fixture(scope="module")
def verdicts():
    return filter_table(QUERIES, CHUNKS, ContainmentJudge(), L=5, percentile=70)


def test_each_filter_reads_its_evidence(verdicts):
    t, s = verdicts
    assert list(t.index) == [x.qid for x in QUERIES] and t["none"].all()
    assert not t.loc["aug1", "near-duplicates"] and not t.loc["aug2", "near-duplicates"]
    assert t.loc[["lr", "over", "val", "wrong"], "near-duplicates"].all()
    # the forest chunk is nowhere near the top for a tokenization query
    assert not t.loc["wrong", "top-1"] and t.loc["over", "top-1"]
    assert (t["top-1"] <= t["top-5"]).all()
    assert ((t["rank"] == 1) == t["top-1"]).all()
    # another chunk holds all of lr's sentence: the judge says Full, the pair goes
    assert (
        not t.loc["lr", "multi-positive"]
        and t.loc["lr", "other chunks judged Full"] >= 1
    )
    assert t.loc["over", "multi-positive"]
    # 70th percentile of six cosines: the easiest pair(s) above it are dropped
    assert 1 <= (~t["easiness"]).sum() <= 2
    assert s["near-duplicates", "anchors removed (both of each pair)"] == 2
    assert (
        s["multi-positive", "pairs removed (another chunk answers)"]
        == (~t["multi-positive"]).sum()
    )


def test_pairs_follow_the_verdicts(verdicts):
    t, _ = verdicts
    multi = QUERIES + [
        SynthQuery("sec", 1, "Training", ("c01_0001", "c01_0002"), "header → section")
    ]
    t2 = pd.concat([t, t.loc[["over"]].rename(index={"over": "sec"})])
    pairs = filter_pairs_by(t2, multi, CHUNKS)
    assert list(pairs) == list(TRAIN_FILTERS)
    for f, p in pairs.items():
        assert set(p.qid) == set(t2.index[t2[f]])
        assert (p.positive == [CHUNKS[c].text for c in p.pos_id]).all()
    none = pairs["none"]
    assert len(none) == len(multi) + 1  # the section query gives one pair per chunk
    assert list(none[none.qid == "sec"].pos_id) == ["c01_0001", "c01_0002"]
    assert set(none.source) == {"inverse cloze", "header → section"}


def test_filter_table_refuses_an_empty_pool():
    with pytest.raises(ValueError, match="no queries"):
        filter_table([], CHUNKS, ContainmentJudge())


def scores_for(shift, n=50, seeds=(0, 1, 2), seed=0):
    "{(filter, seed): per-question scores}: 'a' beats 'none' by `shift` everywhere."
    rng = np.random.default_rng(seed)
    out = {}
    for s in seeds:
        base = pd.DataFrame(
            {"m": rng.random(n).round(2)}, index=[f"q{i}" for i in range(n)]
        )
        out["none", s] = base
        out["a", s] = base + shift
        out["b", s] = base + shift * (s - 1)  # +, 0, - by seed: mean 0, wide spread
    return out


def test_effects_paired_and_seed_spread():
    e = filter_effects(scores_for(0.1), metrics=["m"], B=2000)
    a, b = e.loc[("a", "m")], e.loc[("b", "m")]
    assert a["diff"] == pytest.approx(0.1) and a.low == pytest.approx(0.1)
    assert a.high == pytest.approx(0.1) and a.p < 0.01 and a.p_holm < 0.01
    assert a.significant and a.baseline == "none"
    assert a["seed min"] == pytest.approx(0.1) == a["seed max"]
    assert [b[f"seed {s}"] for s in (0, 1, 2)] == pytest.approx([-0.1, 0.0, 0.1])
    assert b["diff"] == pytest.approx(0.0, abs=1e-12)
    assert b["seed min"] == pytest.approx(-0.1) and b["seed max"] == pytest.approx(0.1)
    assert a["mean"] - a.baseline_mean == pytest.approx(0.1)
    # Holm over both filters: b's p is adjusted upwards, never down
    assert b.p_holm >= b.p and list(e.index.names) == ["filter", "metric"]


def test_effects_refuse_missing_runs():
    s = scores_for(0.1)
    del s["a", 2]
    with pytest.raises(ValueError, match="every filter"):
        filter_effects(s, metrics=["m"])
    with pytest.raises(ValueError, match="every filter"):
        filter_effects(scores_for(0.1), base="nothing", metrics=["m"])


def test_offline_pool_is_seeded_and_counted():
    from irbook.course.chunking import chunk_book

    chunks = chunk_book("group", chapters=[1], n=3)
    s = Summary()
    everything, s = training_queries(chunks, seed=3, summary=s)
    few, _ = training_queries(chunks, n=5, seed=3)  # the seed picks sentences too
    assert len(few) == 5 and {x.qid for x in few} <= {x.qid for x in everything}
    assert [x.qid for x in training_queries(chunks, n=5, seed=3)[0]] == [
        x.qid for x in few
    ]
    assert [x.qid for x in training_queries(chunks, n=5, seed=4)[0]] != [
        x.qid for x in few
    ]
    assert s["pool", "queries in the pool"] == len(everything) > 20
    assert s["pool", "synthetic queries made"] == len(everything)
    assert {x.chapter for x in everything} == {1}


def test_llm_pool_against_fake_server(tmp_path, monkeypatch):
    page = (
        "Gradient descent changes each weight a little in the direction that lowers "
        "the loss. The size of that step is set by the learning rate."
    )
    chunks = {"c01_0000": Chunk("c01_0000", 1, page)}
    monkeypatch.setattr(
        "irbook.course.training_filters.book_pages",
        lambda chapters: {"p": chunks["c01_0000"]},
    )
    reply = qa_reply(
        ("What sets the step size?", "the learning rate", ["set by the learning rate"])
    )
    with FakeServer([ok(reply)]) as srv:
        client = LLMClient(
            LLMConfig(srv.url, "fake-model"), cache_root=tmp_path, retries=0
        )
        got, s = training_queries(chunks, client=client)
    assert [(x.generator, x.positives) for x in got] == [
        ("LLM (fake-model)", ("c01_0000",))
    ]
    assert s["pool", "queries in the pool"] == 1


@pytest.mark.slow  # training: `make test-slow`
def test_model_trained_on_given_pairs_is_cached_by_them(tmp_path, monkeypatch):
    from irbook.course.finetune import FinetuneSettings, finetuned_model, training_log

    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path))
    t, _ = filter_table(QUERIES, CHUNKS, ContainmentJudge())
    pairs = filter_pairs_by(t, QUERIES, CHUNKS)
    s = FinetuneSettings(batch_size=4, max_seq_length=32)
    a = finetuned_model(s, pairs=pairs["none"], progress=False)
    log = training_log(a)
    assert log["pairs"] == len(pairs["none"]) and log["train_qids"] == sorted(
        set(pairs["none"].qid)
    )
    assert finetuned_model(s, pairs=pairs["none"], progress=False) == a
    b = finetuned_model(s, pairs=pairs["top-1"], progress=False)
    assert b != a and b.parent == a.parent and "-pairs-" in a.name
    assert training_log(b)["pairs"] == len(pairs["top-1"])


def test_validation_split_is_seeded_and_disjoint():
    train, val = validation_split(QUERIES, share=0.5, seed=0)
    assert len(val) == 3 and len(train) == 3
    assert {q.qid for q in train} | {q.qid for q in val} == {q.qid for q in QUERIES}
    assert not {q.qid for q in train} & {q.qid for q in val}
    assert [q.qid for q in train] == [q.qid for q in QUERIES if q in train]  # order
    assert validation_split(QUERIES, 0.5, seed=0) == (train, val)
    assert any(validation_split(QUERIES, 0.5, seed=s)[1] != val for s in range(1, 5))
    for bad in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match="strictly between"):
            validation_split(QUERIES, bad)
    with pytest.raises(ValueError, match="cannot give"):
        validation_split(QUERIES, 0.01)  # rounds to no validation query


def test_early_stopping_refuses_bad_arguments():
    from irbook.course.finetune import FinetuneSettings

    pairs = pd.DataFrame({"anchor": ["a", "b"], "positive": ["x", "y"]})
    s = FinetuneSettings()
    with pytest.raises(ValueError, match="max_epochs"):
        early_stopped_model(s, pairs, QUERIES, CHUNKS, max_epochs=0)
    with pytest.raises(ValueError, match="patience"):
        early_stopped_model(s, pairs, QUERIES, CHUNKS, patience=0)
    with pytest.raises(ValueError, match="no validation"):
        early_stopped_model(s, pairs, [], CHUNKS)


def test_record_scores_keeps_whole_seeds():
    col = {"m": {"q1": 0.5, "q2": 1.0}}
    record = {
        "settings": {"filters": ["none", "a"], "seeds": [0, 1]},
        "scores": {
            "base": col,
            "none|0": col,
            "a|0": {"m": {"q1": 0.0, "q2": 1.0}},
            "none|1": col,  # seed 1 has no model of filter a: left out
        },
    }
    base, scores, seeds = record_scores(record)
    assert seeds == [0] and set(scores) == {("none", 0), ("a", 0)}
    assert list(base.index) == ["q1", "q2"] and base.m.mean() == 0.75
    assert scores["a", 0].m.tolist() == [0.0, 1.0]
    record["scores"]["a|1"] = col
    assert record_scores(record)[2] == [0, 1]


@pytest.mark.slow  # training: `make test-slow`
def test_early_stopping_keeps_the_best_epoch(tmp_path, monkeypatch):
    from irbook.course.finetune import FinetuneSettings

    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path))
    t, _ = filter_table(QUERIES, CHUNKS, ContainmentJudge())
    train, val = validation_split(QUERIES, share=0.5, seed=0)
    pairs = filter_pairs_by(t.loc[[q.qid for q in train]], train, CHUNKS)["none"]
    s = FinetuneSettings(batch_size=2, max_seq_length=32, loss="cached", mini_batch=1)
    folder, curve = early_stopped_model(
        s, pairs, val, CHUNKS, max_epochs=3, patience=1, root=tmp_path / "m"
    )
    score = curve["validation MRR@10"]
    assert list(curve.index[:2]) == [0, 1] and curve.chosen.sum() == 1
    kept = curve.index[curve.chosen][0]
    assert kept >= 1 and score[kept] == score.loc[1:].max()
    # stopped after the first epoch without improvement, or at max_epochs
    last = curve.index.max()
    assert last == 3 or score[last] <= score.loc[1 : last - 1].max()
    assert folder.parent == tmp_path / "m"
    again, curve2 = early_stopped_model(
        s, pairs, val, CHUNKS, max_epochs=3, patience=1, root=tmp_path / "m"
    )
    assert again == folder and curve2.equals(curve)  # every epoch cached
    # the epoch curve trains on regardless: the same chain, its validation scores
    import irbook.course.training_filters as tf

    monkeypatch.setattr(tf, "held_out_scores", lambda f, *a, **k: f.name)
    scores, val = epoch_curve(s, pairs, [], CHUNKS, val, 2, root=tmp_path / "m")
    assert list(scores) == [1, 2] and list(val.index) == [1, 2]
    np.testing.assert_allclose(val.to_numpy(), score.loc[1:2].to_numpy())
    if kept <= 2:  # the kept epoch's model is the curve's model of that epoch
        assert scores[kept] == folder.name


def test_epoch_models_chain_and_stop_when_asked(monkeypatch):
    from irbook.course.finetune import FinetuneSettings

    calls = []

    def fake(s, root=None, pairs=None, progress=False):
        calls.append((s.base, s.seed, root))
        return Path(root or "/cache") / f"m{len(calls)}"

    monkeypatch.setattr("irbook.course.training_filters.finetuned_model", fake)
    pairs = pd.DataFrame({"anchor": ["a"], "positive": ["b"]})
    s = FinetuneSettings(seed=3)
    chain = epoch_models(s, pairs, 3, root="/r")
    first = next(chain)
    assert first[0] == 1 and len(calls) == 1  # lazy: nothing trained past what is read
    rest = list(chain)
    assert [e for e, _ in [first, *rest]] == [1, 2, 3]
    # each epoch starts from the one before, its pairs shuffled by another seed
    assert [c[1] for c in calls] == [3, 1003, 2003]
    assert calls[0][0] == s.base and calls[1][0] == str(first[1])
    assert calls[2][0] == str(rest[0][1])
    assert len({c[2] for c in calls}) == 3  # one folder per epoch's settings


def test_sweep_curve_reads_every_epoch_with_base_as_epoch_0():
    base = {"m": {"q1": 0.5, "q2": 1.0}}
    record = {
        "settings": {"filters": ["none"], "seeds": [0], "metrics": ["m"]},
        "jobs": [{"validation MRR@10 by epoch": [0.4, 0.6]}],
        "scores": {"base": base, "none|0": base},
        "sweep": {
            "epochs": 2,
            "lrs": {
                "5e-05": {
                    "validation MRR@10": [0.6, 0.7],
                    "scores": {
                        "1": {"m": {"q1": 0.0, "q2": 1.0}},
                        "2": {"m": {"q1": 1.0, "q2": 1.0}},
                    },
                }
            },
        },
    }
    t = sweep_curve(record)
    assert list(t.index) == [(5e-05, 0), (5e-05, 1), (5e-05, 2)]
    assert t["m"].tolist() == [0.75, 0.5, 1.0]
    assert t["validation MRR@10"].tolist() == [0.4, 0.6, 0.7]


def test_unfiltered_scores_builds_the_described_configuration(monkeypatch):
    from irbook.course.chunking import chunk_book

    chunks = chunk_book("group", chapters=[1], n=3)
    seen = {}

    def fake(pairs, questions, chunks, settings, seeds, eval_seq, **kw):
        seen.update(pairs=pairs["none"], settings=settings, seeds=seeds, **kw)
        idx = pd.MultiIndex.from_tuples([("none", seeds[0])])
        log = pd.DataFrame({"epoch kept": [1]}, index=idx)
        return {("none", seeds[0]): pd.DataFrame({"m": [1.0]})}, log

    monkeypatch.setattr("irbook.course.training_filters.filter_scores", fake)
    spec = {
        "pool": 30,
        "val_share": 0.2,
        "held_out": [9],
        "finetune": {"batch_size": 4, "lr": 1e-4, "held_out": [9]},
        "seed": 2,
        "eval_seq": 32,
        "max_epochs": 3,
        "patience": 1,
    }
    sc, log, pairs = unfiltered_scores(spec, [], chunks)
    pool, _ = training_queries(chunks, n=30)
    train, val = validation_split(pool, 0.2, seed=0)
    assert set(pairs.qid) == {q.qid for q in train}  # every training query, no filter
    assert not set(pairs.qid) & {q.qid for q in seen["val_queries"]}
    assert [q.qid for q in seen["val_queries"]] == [q.qid for q in val]
    assert seen["settings"].batch_size == 4 and seen["settings"].held_out == (9,)
    assert seen["seeds"] == (2,) and seen["max_epochs"] == 3
    assert log["epoch kept"] == 1 and sc.m.tolist() == [1.0]
