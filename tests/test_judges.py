"""irbook.course.judges: each judge on toy data with known answers; threshold
calibration against a brute-force search; fill_holes' counts; the LLM judge against a
stand-in OpenAI-compatible server on 127.0.0.1 (no network); and judged_eval end to
end: equal to ppi-python's `ppi_mean_ci` on the same arrays, and a coverage simulation
where the all-human truth is known."""

import json

import numpy as np
import pytest
from ppi_py import ppi_mean_ci
from scipy import stats
from test_synthetic import FakeServer, ok

from irbook.course.judges import (
    GRADE_SCHEMA,
    Judgments,
    answer_judge,
    fill_holes,
    judge_pairs,
    judge_prompt,
    llm_judge,
    threshold_judge,
)
from irbook.course.search.dense import Encoder
from irbook.course.synthetic import LLMClient, LLMConfig, LLMReplyError
from irbook.metrics import evaluate, read_qrels
from irbook.ppi import human_interval, judged_eval, judged_report, ppi_interval

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
    j = threshold_judge(scores, human, name="r", folds=None)  # one judged question
    assert j.threshold == pytest.approx(0.5) and j.agreement == 1.0
    assert j.qrels == {"q1": {"a": 1, "b": 1, "c": 0}, "q2": {"d": 1, "e": 0}}
    assert j.source == "threshold:r" and j.scores is scores
    # graded labels: with relevant=2 only b counts, and it is not the top score
    j2 = threshold_judge(scores, human, relevant=2, folds=None)
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
    j = threshold_judge(scores, {"q1": {"a": 1, "b": 0}}, folds=None)
    assert j.threshold == pytest.approx(0.55)
    assert j.info["calibration_pairs"] == 2
    with pytest.raises(ValueError, match="not finite"):
        threshold_judge({"q1": {"a": float("nan")}}, {"q1": {"a": 1}})


def _scored(seed, n_questions=30, labelled=12, docs=8):
    "A re-ranker's noisy scores on every question; human labels on the first few."
    rng = np.random.default_rng(seed)
    qids = [f"q{i:02d}" for i in range(n_questions)]
    truth = {q: {f"d{k}": int(rng.random() < 0.35) for k in range(docs)} for q in qids}
    scores = {q: {d: round(v + rng.normal(0, 0.8), 2) for d, v in t.items()}
              for q, t in truth.items()}  # fmt: skip
    return scores, {q: truth[q] for q in qids[:labelled]}


def _pairs_of(scores, human, questions):
    "(scores, relevant?) of the human-labelled pairs of `questions`, as arrays."
    cal = [(v, human[q][d] >= 1) for q in questions for d, v in scores[q].items()]
    s, y = (np.array(x) for x in zip(*cal))
    return s, y


def _midpoints(s):
    u = np.unique(s)
    return np.concatenate([u[:1], (u[1:] + u[:-1]) / 2])


def test_threshold_folds_none_is_one_threshold_fitted_on_all():
    # the old rule: every pair, judged or not, cut at the brute-force best threshold
    scores, human = _scored(1)
    s, y = _pairs_of(scores, human, list(human))
    t, v = _brute(s, y, _midpoints(s), "f1")
    j = threshold_judge(scores, human, folds=None)
    assert j.threshold == pytest.approx(t) and j.agreement == pytest.approx(v)
    want = {q: {d: int(x >= t) for d, x in ds.items()} for q, ds in scores.items()}
    assert j.qrels == want and j.info["folds"] is None
    assert "fold_of" not in j.info


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("folds", [2, 5])
def test_threshold_cross_fitted_by_question(seed, folds):
    scores, human = _scored(seed)
    j = threshold_judge(scores, human, folds=folds, seed=seed)
    fold_of, cuts = j.info["fold_of"], j.info["fold_thresholds"]
    # every human-judged question in exactly one fold, folds of near-equal size
    assert sorted(fold_of) == sorted(human) and j.info["folds"] == folds == len(cuts)
    sizes = np.bincount(list(fold_of.values()), minlength=folds)
    assert sizes.max() - sizes.min() <= 1
    for f in range(folds):
        # fold f's threshold: the brute-force best on the OTHER folds' questions only
        others = [q for q in human if fold_of[q] != f]
        s, y = _pairs_of(scores, human, others)
        assert cuts[f] == pytest.approx(_brute(s, y, _midpoints(s), "f1")[0])
    for q, ds in scores.items():  # a whole question cut at one threshold
        t = cuts[fold_of[q]] if q in human else j.threshold
        assert j.qrels[q] == {d: int(v >= t) for d, v in ds.items()}, q
    # the judge-only questions: the threshold fitted on all the human labels
    assert j.threshold == threshold_judge(scores, human, folds=None).threshold
    # the held-out F1: each human-labelled pair against its cross-fitted label
    s, y = _pairs_of(scores, human, list(human))
    lab = np.array([j.qrels[q][d] for q in human for d in scores[q]], bool)
    f1 = 2 * np.sum(lab & y) / (lab.sum() + y.sum())
    assert j.info["held_out_agreement"] == pytest.approx(f1)


def test_threshold_folds_are_seeded():
    scores, human = _scored(3)
    a, b = (threshold_judge(scores, human, seed=7) for _ in range(2))
    assert a.info["fold_of"] == b.info["fold_of"] and a.qrels == b.qrels
    c = threshold_judge(scores, human, seed=8)
    assert c.info["fold_of"] != a.info["fold_of"]


def test_threshold_own_labels_do_not_set_their_threshold():
    # q4's relevant g scores 0.35, under the other questions' irrelevant 0.3 gap: fitted
    # on all four questions the threshold drops to 0.325 to take g in; without q4's own
    # labels it stays at 0.5, so cross-fitted g is labelled 0. q5 (judge only) is cut
    # at the threshold fitted on all: 0.4 >= 0.325
    scores = {
        "q1": {"a": 0.9, "b": 0.2},
        "q2": {"c": 0.8, "d": 0.3},
        "q3": {"e": 0.7, "f": 0.25},
        "q4": {"g": 0.35, "h": 0.1},
        "q5": {"i": 0.4},
    }
    human = {
        q: {d: int(i == 0) for i, d in enumerate(ds)}
        for q, ds in scores.items()
        if q != "q5"
    }
    fitted = threshold_judge(scores, human, folds=None)
    cross = threshold_judge(scores, human, folds=4)  # one question a fold
    assert fitted.threshold == pytest.approx(0.325) == cross.threshold
    assert fitted.qrels["q4"]["g"] == 1 and cross.qrels["q4"]["g"] == 0
    assert cross.info["fold_thresholds"][cross.info["fold_of"]["q4"]] == 0.5
    assert cross.qrels["q5"] == fitted.qrels["q5"] == {"i": 1}
    assert fitted.agreement == 1.0 and cross.info["held_out_agreement"] < 1.0


def test_threshold_folds_need_questions():
    scores, human = _scored(2, labelled=3)
    assert threshold_judge(scores, human, folds=5).info["folds"] == 3  # one a fold
    one = {"q00": human["q00"]}
    with pytest.raises(ValueError, match="2 questions or more, got 1: pass folds=None"):
        threshold_judge(scores, one)
    for bad in (1, 0, 2.5, True, "5"):
        with pytest.raises(ValueError, match="folds must be an integer of 2 or more"):
            threshold_judge(scores, human, folds=bad)
    # two questions, one with no relevant label: its fold's complement is one class
    two = {"q1": {"a": 0.9, "b": 0.1}, "q2": {"c": 0.5, "d": 0.4}}
    lab = {"q1": {"a": 1, "b": 0}, "q2": {"c": 0, "d": 0}}
    with pytest.raises(ValueError, match="all irrelevant.*pass fewer folds"):
        threshold_judge(two, lab, folds=2)
    assert threshold_judge(two, lab, folds=None).threshold == pytest.approx(0.7)


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
    t = threshold_judge(j.scores, {"q1": {"a": 1, "b": 0, "c": 0}}, folds=None)
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
    """Each run's values under both qrels, computed here, give judged_eval's intervals
    through irbook.ppi's interval functions; with lambda = 1 its estimate is
    ppi-python's (the widths differ: Student's t, n - 1, the metric's range)."""
    qids, truth, judge, runs = _world(0)
    labeled = qids[::4]
    human = {q: truth[q] for q in labeled}
    t = judged_eval(human, judge, runs, ["ndcg@5", "recall@3"], 0.1, power_tuned)
    assert t.attrs["human_questions"] == labeled
    method = "ppi++" if power_tuned else "ppi"
    for (run, metric), row in t.set_index(["run", "metric"]).iterrows():
        sub = {q: runs[run][q] for q in labeled}
        y = evaluate(human, sub, metric, per_query=True)[metric].to_numpy()
        f = evaluate(judge, runs[run], metric, per_query=True)[metric]
        fl, fu = f[labeled].to_numpy(), f.drop(labeled).to_numpy()
        iv = ppi_interval(y, fl, fu, alpha=0.1, method=method)
        np.testing.assert_allclose(
            [row["mean"], row.mean_low, row.mean_high], [iv.estimate, iv.low, iv.high],
            atol=1e-10,
        )  # fmt: skip
        if not power_tuned:
            ref = np.ravel(ppi_mean_ci(y, fl, fu, alpha=0.1, lam=1))
            assert row["mean"] == pytest.approx(ref.mean(), abs=1e-10)
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
        iv = ppi_interval(
            (ya - yb).to_numpy(), dl.to_numpy(), du.to_numpy(), 0.1, method,
            bounds=(-1, 1),
        )  # fmt: skip
        np.testing.assert_allclose([row.low, row.high], [iv.low, iv.high], atol=1e-10)
        assert row.p == pytest.approx(iv.p, abs=1e-12)
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
    with pytest.raises(ValueError, match="with the judge's labels only"):
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
    finite-population correction, so they may over-cover), and PPI++ is narrower
    (by less than before its lambda was cross-fitted and its quantile Student's t)."""
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
    assert np.mean(width["ppi"]) < 0.85 * np.mean(width["human"]), width
