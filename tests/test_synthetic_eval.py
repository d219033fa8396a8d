"""irbook.course.synthetic_eval without models or data: agreement statistics on made-up
score tables, gold labels, and the LLM query path against the fake server of
test_synthetic."""

import numpy as np
import pandas as pd
import pytest
from test_synthetic import FakeServer, ok, qa_reply

from irbook.course.chunking import Chunk
from irbook.course.synthetic import LLMClient, LLMConfig
from irbook.course.synthetic_eval import SynthQuery, agreement, gold_qrels, llm_queries


def table(means, n=200, seed=0):
    "A queries x systems table of 0/1 hits with the given success rates."
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {f"s{i}": (rng.random(n) < m).astype(float) for i, m in enumerate(means)}
    )


def test_same_set_agrees_perfectly():
    t = table([0.2, 0.5, 0.8, 0.6])
    a = agreement(t, t, B=200)
    assert a.r == pytest.approx(1) and a.tau == pytest.approx(1)
    assert (a.table.deviation == 0).all() and a.same_best
    assert a.r_ci[0] <= a.r_ci[1] <= 1 + 1e-12 and a.r_ci[0] > 0.9
    assert a.n_human == a.n_synthetic == 200


def test_reversed_order_and_deviation():
    h, s = table([0.2, 0.5, 0.8]), table([0.8, 0.5, 0.2], seed=1)
    a = agreement(h, s, B=200, seed=3)
    assert a.r < 0 and a.tau == pytest.approx(-1) and not a.same_best
    assert a.table.deviation["s0"] == pytest.approx(
        (s.s0.mean() - h.s0.mean()) / h.s0.mean()
    )
    assert a.same_best_share < 0.5
    # seeded: the same call gives the same intervals
    assert agreement(h, s, B=200, seed=3).r_ci == a.r_ci


def test_a_tie_at_the_top_is_not_the_same_best():
    h = pd.DataFrame({"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [0.0, 0.0]})
    s = pd.DataFrame({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [0.0, 1.0]})
    a = agreement(h, s, B=50)
    assert a.best == (("b",), ("a", "b"))  # the means
    assert set(a.top[1]) >= {"a", "b"} and not a.same_best  # two queries: no choice


def test_a_tie_at_the_ceiling_is_not_agreement():
    h = table([0.3, 0.5, 0.9, 0.6], n=300)  # the human set singles out s2
    s = pd.DataFrame(1.0, index=range(300), columns=h.columns)
    s["s0"] = (np.arange(300) % 2).astype(float)  # only s0 falls below
    a = agreement(h, s, B=50, metric="hit_rate@5")
    assert (
        a.top[0] == ("s2",)
        and a.top[1][0] == "s1"
        and set(a.top[1])
        == {
            "s1",
            "s2",
            "s3",
        }
    )
    assert a.best[1] == ("s1", "s2", "s3") and not a.same_best
    said = a.synthetic_top.sentences()
    assert sum("tied at the ceiling" in x for x in said) == 2
    assert any(x.startswith("s0 vs s1, hit_rate@5: lower by") for x in said)
    row = a.row()
    assert (row["top (human)"], row["top (synthetic)"], row["same best"]) == (
        1,
        3,
        False,
    )


def test_the_same_single_best_agrees():
    h = table([0.3, 0.5, 0.9, 0.6], n=300)
    s = table([0.2, 0.4, 0.7, 0.45], n=300, seed=5)
    a = agreement(h, s, B=50)
    assert a.top == (("s2",), ("s2",)) and a.same_best


def test_bad_tables():
    t = table([0.2, 0.5])
    with pytest.raises(ValueError, match="3 systems"):
        agreement(t, t)
    flat = pd.DataFrame({"a": [1.0] * 5, "b": [1.0] * 5, "c": [1.0] * 5})
    a = agreement(flat, flat, B=20)  # constant scores: r and tau undefined, no crash
    assert np.isnan(a.r) and np.isnan(a.tau)


def test_gold_qrels_counts_queries_without_gold():
    qs = [
        SynthQuery("a", 1, "x y", ("c01_0000",), "inverse cloze"),
        SynthQuery("b", 1, "x y", (), "inverse cloze"),
    ]
    from irbook.course.common import Summary

    s = Summary()
    assert gold_qrels(qs, {}, s) == {"a": {"c01_0000": 1}}
    assert s["gold chunks", "query with no gold chunk (not scored)"] == 1


PAGE = (
    "Gradient descent changes each weight a little in the direction that lowers the "
    "loss. The size of that step is set by the learning rate, a number we choose "
    "before training."
)


def test_llm_queries_against_fake_server(tmp_path):
    chunks = {"c01_0000": Chunk("c01_0000", 1, PAGE)}
    reply = qa_reply(
        ("What sets the step size?", "the learning rate", ["set by the learning rate"]),
        ("Invented?", "no", ["a sentence that is nowhere in the page at all"]),
    )
    with FakeServer([ok(reply)]) as srv:
        client = LLMClient(
            LLMConfig(srv.url, "fake-model"), cache_root=tmp_path, retries=0
        )
        got, s = llm_queries({"p1": chunks["c01_0000"]}, chunks, client)
    assert [q.positives for q in got] == [("c01_0000",)]
    assert (
        got[0].generator == "LLM (fake-model)" and got[0].answer == "the learning rate"
    )
    assert s["generate", "pair with no citation in page (dropped)"] == 1
