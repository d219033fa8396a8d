"""irbook.judges: each judge on toy data with known answers; threshold calibration
against a brute-force search; fill_holes' counts; the LLM judge against a stand-in
OpenAI-compatible server on 127.0.0.1 (no network); and judged_eval end to end: equal
to ppi-python's `ppi_mean_ci` on the same arrays, and a coverage simulation where the
all-human truth is known."""

import json

import numpy as np
import pytest
from ppi_py import ppi_mean_ci
from scipy import stats
from test_synthetic import FakeServer, ok

from irbook.judges import (
    GRADE_SCHEMA,
    Judgments,
    answer_judge,
    fill_holes,
    judge_pairs,
    judge_prompt,
    llm_judge,
    threshold_judge,
)
from irbook.metrics import evaluate, read_qrels
from irbook.ppi import human_interval, judged_eval, judged_report, ppi_interval
from irbook.search.dense import Encoder
from irbook.synthetic import LLMClient, LLMConfig, LLMReplyError

# --- Judgments and judge_pairs -----------------------------------------------------


def test_judge_pairs_labels_and_writes_qrels(tmp_path):
    j = judge_pairs(
        [("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("q1", "d1")],
        lambda q, d: int(d != "d2") + (q == "q2"),
    )
    assert j.qrels == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    assert j.source == "function:<lambda>" and len(j) == 3
    assert "3 pairs on 2 questions, 2 relevant" in repr(j)
    assert read_qrels(j.write(tmp_path / "judge.qrels")) == j.qrels
    with pytest.raises(ValueError, match="not an integer"):
        judge_pairs([("q", "d")], lambda q, d: 0.5)


# --- threshold_judge -----------------------------------------------------------------


def test_threshold_on_a_separable_case_is_the_midpoint():
    scores = {"q1": {"a": 0.9, "b": 0.6, "c": 0.4}, "q2": {"d": 0.55, "e": 0.1}}
    human = {"q1": {"a": 1, "b": 2, "c": 0}}
    j = threshold_judge(scores, human, name="r")
    assert j.threshold == pytest.approx(0.5) and j.agreement == 1.0
    assert j.qrels == {"q1": {"a": 1, "b": 1, "c": 0}, "q2": {"d": 1, "e": 0}}
    assert j.source == "threshold:r" and j.scores is scores
    # graded labels: with relevant=2 only b counts, and it is not the top score
    j2 = threshold_judge(scores, human, relevant=2)
    assert j2.agreement == pytest.approx(2 / 3)  # F1 at 0.5: b right, a wrong


def _brute(s, y, cuts, criterion):
    best = None
    for t in cuts:  # the lowest threshold wins a tie: strict >
        pred = s >= t
        tp = np.sum(pred & y)
        v = 2 * tp / (pred.sum() + y.sum()) if criterion == "f1" else np.mean(pred == y)
        if best is None or v > best[1] + 1e-12:
            best = (t, v)
    return best


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("criterion", ["f1", "accuracy"])
def test_threshold_equals_a_brute_force_search(seed, criterion):
    rng = np.random.default_rng(seed)
    n = 60
    y = rng.random(n) < 0.3
    s = np.round(y * 0.3 + rng.random(n), 2)  # rounded: tied scores too
    scores = {f"q{i // 10}": {} for i in range(n)}
    human = {}
    for i in range(n):
        scores[f"q{i // 10}"][f"d{i}"] = float(s[i])
        human.setdefault(f"q{i // 10}", {})[f"d{i}"] = int(y[i])
    u = np.unique(s)
    cuts = np.concatenate([u[:1], (u[1:] + u[:-1]) / 2])
    t, v = _brute(s, y, cuts, criterion)
    j = threshold_judge(scores, human, criterion=criterion)
    assert j.threshold == pytest.approx(t) and j.agreement == pytest.approx(v)
    grid = np.linspace(0, 1.3, 14)
    t, v = _brute(s, y, grid, criterion)
    j = threshold_judge(scores, human, grid=grid, criterion=criterion)
    assert j.threshold == pytest.approx(t) and j.agreement == pytest.approx(v)


def test_threshold_uses_only_pairs_with_a_human_label():
    # d9 scores highest but no human judged it: it must not move the threshold
    scores = {"q1": {"a": 0.9, "b": 0.2, "d9": 5.0}, "q2": {"c": 0.8}}
    j = threshold_judge(scores, {"q1": {"a": 1, "b": 0}})
    assert j.threshold == pytest.approx(0.55)
    assert j.info["calibration_pairs"] == 2
    with pytest.raises(ValueError, match="not finite"):
        threshold_judge({"q1": {"a": float("nan")}}, {"q1": {"a": 1}})


# --- answer_judge --------------------------------------------------------------------

VOCAB = ["learning", "rate", "step", "batch", "data", "loss"]


def bag_of_words(texts):
    "A stand-in embedding: counts of six words (known cosines, no model)."
    return np.array([[t.lower().split().count(w) for w in VOCAB] for t in texts])


def test_answer_judge_cosines_labels_and_cache(tmp_path):
    enc = Encoder("bow", fn=bag_of_words, cache_root=tmp_path, progress=False)
    answers = {"q1": "learning rate step", "q2": "batch data"}
    texts = {
        "a": "the learning rate sets the step",
        "b": "data data batch",
        "c": "loss",
    }
    j = answer_judge(answers, texts, threshold=0.5, encoder=enc)
    assert j.source == "answer:bow" and j.threshold == 0.5
    assert j.scores["q1"]["a"] == pytest.approx(1.0)
    assert j.scores["q2"]["b"] == pytest.approx(3 / np.sqrt(10))
    assert j.scores["q1"]["c"] == pytest.approx(0.0)
    assert j.qrels == {"q1": {"a": 1, "b": 0, "c": 0}, "q2": {"a": 0, "b": 1, "c": 0}}
    assert enc.misses == 3  # texts, after the answers
    again = answer_judge(answers, texts, encoder=enc, pairs=[("q2", "b")])
    assert (enc.hits, enc.misses) == (1, 0)  # judged again: all from the cache
    assert again.qrels == {"q2": {"b": 1}}
    # the cosines calibrate like any score
    t = threshold_judge(j.scores, {"q1": {"a": 1, "b": 0, "c": 0}})
    assert 0 < t.threshold <= 1
    with pytest.raises(ValueError, match="no text for 'z'"):
        answer_judge(answers, texts, encoder=enc, pairs=[("q1", "z")])


# --- llm_judge against a stand-in server --------------------------------------------

QUERIES = {"q1": "What does the learning rate set?"}
TEXTS = {
    "a": "The learning rate sets the size of each step.",
    "b": "A DataLoader yields batches.",
}


def _client(server, tmp_path, **kw):
    cfg = LLMConfig(server.url, "judge-model", "sk-test")
    return LLMClient(cfg, cache_root=tmp_path, backoff=0, **kw)


def test_llm_judge_sends_the_prompt_and_parses_grades(tmp_path):
    with FakeServer([ok('{"grade": 3}'), ok('```json\n{"grade": 0}\n```')]) as s:
        j = llm_judge({"q1": ["a", "b"]}, TEXTS, QUERIES, client=_client(s, tmp_path))
    assert j.qrels == {"q1": {"a": 3, "b": 0}} and j.source == "llm:judge-model"
    assert [r["path"] for r in s.requests] == ["/v1/chat/completions"] * 2
    body = s.requests[0]["body"]
    assert body["model"] == "judge-model" and s.requests[0]["auth"] == "Bearer sk-test"
    prompt = body["messages"][-1]["content"]
    assert prompt == judge_prompt(QUERIES["q1"], TEXTS["a"])
    for part in (QUERIES["q1"], TEXTS["a"], "3 =", "0 =", '{"grade": G}'):
        assert part in prompt
    # cached: the same pair again, with a new client on the same cache, sends nothing
    with FakeServer([]) as s2:
        j2 = llm_judge([("q1", "a")], TEXTS, QUERIES, client=_client(s2, tmp_path))
    assert j2.qrels == {"q1": {"a": 3}} and j2.info["stats"]["cache_hits"] == 1
    assert s2.requests == []


@pytest.mark.parametrize(
    "reply, why",
    [
        ("I think it is quite relevant.", "not JSON"),
        ('{"grade": 5}', "schema"),
        ('{"relevance": 2}', "schema"),
    ],
)
def test_llm_judge_bad_reply_is_a_clear_error(tmp_path, reply, why):
    with FakeServer([ok(reply)]) as s:
        with pytest.raises(LLMReplyError, match=rf"pair \('q1', 'b'\): .*{why}") as e:
            llm_judge([("q1", "b")], TEXTS, QUERIES, client=_client(s, tmp_path))
    assert e.value.raw == reply
    with FakeServer([ok(reply), ok('{"grade": 2}')]) as s:
        j = llm_judge(
            [("q1", "b"), ("q1", "a")],
            TEXTS,
            QUERIES,
            client=_client(s, tmp_path / "2"),
            errors="skip",
        )
    assert j.qrels == {"q1": {"a": 2}} and j.info["skipped"] == [("q1", "b")]


def test_llm_judge_checks_its_inputs():
    with pytest.raises(ValueError, match="question 'q9'"):
        llm_judge([("q9", "a")], TEXTS, QUERIES, LLMConfig("http://127.0.0.1:9", "m"))
    with pytest.raises(ValueError, match="errors"):
        llm_judge([("q1", "a")], TEXTS, QUERIES, errors="ignore")
    assert GRADE_SCHEMA["properties"]["grade"]["maximum"] == 3


# --- fill_holes -----------------------------------------------------------------


def test_fill_holes_counts():
    human = {"q1": {"a": 1, "b": 0}, "q2": {"e": 0}}
    judge = {"q1": {"a": 0, "c": 1, "d": 0}, "q2": {"f": 1}, "q3": {"g": 1}}
    run1 = {
        "q1": {"a": 5, "c": 4, "x": 3, "b": 2, "d": 1},
        "q2": {"f": 2, "e": 1},
        "q3": {"g": 1},
    }
    run2 = {"q1": {"d": 9, "c": 8}, "q2": {"e": 1}}
    j = fill_holes([run1, run2], human, Judgments(judge, "llm:m"), k=3)
    # run1's top 3: q1 a (human) c (filled) x (no judge label); q2 f; q3 g
    # run2's top 3: q1 d (filled), c (already filled); q2 e (human)
    assert j.qrels == {
        "q1": {"a": 1, "b": 0, "c": 1, "d": 0},
        "q2": {"e": 0, "f": 1},
        "q3": {"g": 1},
    }
    assert j.filled == 4 and j.info["per_run"] == {"run_1": 3, "run_2": 1}
    assert j.info["unlabelled"] == [("q1", "x")]
    assert j.source == "human + llm:m in the top 3"
    assert human == {"q1": {"a": 1, "b": 0}, "q2": {"e": 0}}  # not changed
    # human labels win over the judge's, at any depth
    assert fill_holes(run1, human, judge, k=5).qrels["q1"]["a"] == 1


# --- judged_eval, end to end --------------------------------------------------------


def _world(seed, n_q=80, n_d=8, flip=0.1):
    "Questions with known labels, a judge that flips some, two runs."
    rng = np.random.default_rng(seed)
    qids, docs = [f"q{i:03d}" for i in range(n_q)], [f"d{j}" for j in range(n_d)]
    truth = {q: {d: int(rng.random() < 0.35) for d in docs} for q in qids}
    judge = {
        q: {d: int(v ^ (rng.random() < flip)) for d, v in lab.items()}
        for q, lab in truth.items()
    }
    runs = {
        name: {q: {d: rng.random() + w * truth[q][d] for d in docs} for q in qids}
        for name, w in (("A", 0.6), ("B", 0.4))
    }
    return qids, truth, judge, runs


@pytest.mark.parametrize("power_tuned", [True, False])
def test_judged_eval_equals_ppi_python(power_tuned):
    qids, truth, judge, runs = _world(0)
    labeled = qids[::4]
    human = {q: truth[q] for q in labeled}
    t = judged_eval(human, judge, runs, ["ndcg@5", "recall@3"], 0.1, power_tuned)
    assert t.attrs["human_questions"] == labeled
    for (run, metric), row in t.set_index(["run", "metric"]).iterrows():
        sub = {q: runs[run][q] for q in labeled}
        y = evaluate(human, sub, metric, per_query=True)[metric].to_numpy()
        f = evaluate(judge, runs[run], metric, per_query=True)[metric]
        fl, fu = f[labeled].to_numpy(), f.drop(labeled).to_numpy()
        ref = ppi_mean_ci(y, fl, fu, alpha=0.1, lam=None if power_tuned else 1)
        np.testing.assert_allclose(
            [row.mean_low, row.mean_high], np.ravel(ref), atol=1e-10
        )
        assert (row.n, row.N) == (20, 80)
    d = t[t.baseline.notna()]
    assert list(d.run) == ["B", "B"] and list(d.baseline) == ["A", "A"]
    for m, row in d.set_index("metric").iterrows():
        ya, yb = (
            evaluate(human, {q: runs[r][q] for q in labeled}, m, per_query=True)[m]
            for r in ("B", "A")
        )
        fa, fb = (evaluate(judge, runs[r], m, per_query=True)[m] for r in ("B", "A"))
        dl, du = (fa - fb)[labeled], (fa - fb).drop(labeled)
        ref = ppi_mean_ci(
            (ya - yb).to_numpy(),
            dl.to_numpy(),
            du.to_numpy(),
            alpha=0.1,
            lam=None if power_tuned else 1,
        )
        np.testing.assert_allclose([row.low, row.high], np.ravel(ref), atol=1e-10)
        # the p-value and the interval agree: p < alpha exactly when 0 is outside
        assert (row.p < 0.1) == (not row.low <= 0 <= row.high)


def test_judged_eval_checks_and_report():
    qids, truth, judge, runs = _world(1, n_q=30)
    human = {q: truth[q] for q in qids[:10]}
    t = judged_eval(human, Judgments(judge, "llm:m"), runs["A"], "ndcg@5")
    assert list(t.run) == ["run"] and t.baseline.isna().all()  # one run
    text = judged_report(t)
    assert "judge labels from llm:m on all 30 questions" in text
    assert "human labels on 10 of them: q000, q001," in text and "q009" in text
    assert json.loads(judged_report(t, "json"))[0]["N"] == 30
    with pytest.raises(ValueError, match="no --format trec"):
        judged_report(t, "trec")
    t = judged_eval(human, judge, runs, "ndcg@5", pairs="all")
    assert "B vs A, ndcg@5: " in judged_report(t)
    with pytest.raises(ValueError, match="no judge labels"):
        judged_eval({"zz": {"d0": 1}, **human}, judge, runs, "ndcg@5")
    with pytest.raises(ValueError, match="at least one question"):
        judged_eval(truth, judge, runs, "ndcg@5")
    short = {"A": {q: r for q, r in runs["A"].items() if q != "q029"}}
    with pytest.raises(ValueError, match="run 'A'"):
        judged_eval(human, judge, short, "ndcg@5")
    t = judged_eval(human, judge, short, "ndcg@5", make_comparable=True)
    assert t.N.iloc[0] == 30


def test_judged_eval_human_questions_after_fill_holes():
    qids, truth, judge, runs = _world(2, n_q=40)
    shallow = {q: {d: v for d, v in list(truth[q].items())[:2]} for q in qids}
    filled = fill_holes(runs, shallow, judge, k=5)
    deep = qids[:10]  # people judged these questions' holes too
    human = {**shallow, **{q: truth[q] for q in deep}}
    t = judged_eval(human, filled, runs, "ndcg@5", human_questions=deep)
    assert (t.n.iloc[0], t.N.iloc[0]) == (10, 40)


def test_coverage_of_the_all_human_mean():
    """Truth known: the mean over all N questions under the true labels. Humans label
    n random questions, the judge (one label in ten flipped) all N. Over many draws the
    95% intervals cover the truth at least as often as promised (they ignore the
    finite-population correction, so they may over-cover), and PPI++ is narrower."""
    qids, truth, judge, runs = _world(3, n_q=300, n_d=6)
    metric, alpha, draws, n = "ndcg@5", 0.1, 300, 40
    true = evaluate(truth, runs["A"], metric)
    y_all = evaluate(truth, runs["A"], metric, per_query=True)[metric]
    f_all = evaluate(judge, runs["A"], metric, per_query=True)[metric]
    rng = np.random.default_rng(0)
    hits = {"ppi": 0, "human": 0}
    width = {"ppi": [], "human": []}
    for i in range(draws):
        labeled = sorted(rng.choice(qids, n, replace=False))
        if i < 5:  # the whole path through judged_eval on a few draws
            t = judged_eval({q: truth[q] for q in labeled}, judge, runs["A"], metric)
            row = t.iloc[0]
            sub = np.isin(qids, labeled)
            iv = ppi_interval(y_all[sub], f_all[sub], f_all[~sub], alpha=0.05)
            assert (row.mean_low, row.mean_high) == pytest.approx((iv.low, iv.high))
        sub = np.isin(qids, labeled)
        iv = ppi_interval(y_all[sub], f_all[sub], f_all[~sub], alpha=alpha)
        h = human_interval(y_all[sub], alpha=alpha)
        for k, x in (("ppi", iv), ("human", h)):
            hits[k] += true in x
            width[k].append(x.width)
    for k, h in hits.items():  # not below 1 - alpha beyond Monte Carlo error
        assert stats.binomtest(h, draws, 1 - alpha, "less").pvalue > 1e-3, (k, h)
    assert np.mean(width["ppi"]) < 0.8 * np.mean(width["human"]), width
