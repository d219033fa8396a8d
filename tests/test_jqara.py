"""irbook.course.jqara: the JQaRA leaderboard reproduced with both engines, and the
helpers' behaviour on bad input."""

import math
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from irbook.compare import compare, per_query_table
from irbook.core import QueryMismatch
from irbook.course import jqara as J
from irbook.data import (
    JQARA_RUNS,
    DataError,
    DataNotFound,
    load_jqara_leaderboard,
    load_jqara_qrels,
)
from irbook.stats import holm

SHARED = Path(
    os.environ.get("IRBOOK_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)
pytestmark = pytest.mark.skipif(
    not (SHARED / "jqara" / "qrels.trec").is_file(),
    reason="needs the offline JQaRA mirror (set IRBOOK_DATA)",
)

ranx = pytest.importorskip("ranx")

warnings.filterwarnings("ignore", message=".*unsafe cast.*")

MIDDLE = ["multilingual-e5-large", "bge-m3+dense", "ruri-small"]


@pytest.fixture(scope="module", autouse=True)
def _offline_data(tmp_path_factory):
    """Read the offline mirror, never download, and keep any cache in a temporary
    directory."""
    mp = pytest.MonkeyPatch()
    mp.setenv("IRBOOK_DATA", str(SHARED))
    mp.setenv("IRBOOK_OFFLINE", "1")
    mp.setenv("IRBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def qrels(_offline_data):
    return load_jqara_qrels()


class _Runs(dict):
    "The published runs, each read the first time a test asks for it."

    def __missing__(self, name):
        self[name] = J.load_runs([name])[name]
        return self[name]


@pytest.fixture(scope="module")
def runs(_offline_data):
    return _Runs()


def _toy():
    q = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}, "q3": {"d": 1}}
    r = {
        "q1": {"a": 0.9, "x": 0.8, "b": 0.1},
        "q2": {"y": 0.5, "c": 0.4},
        "q3": {"d": 0.3, "z": 0.2},
    }
    return q, r


# ---- the leaderboard itself
# reads all 39 runs; chapter 20 makes the same check in every book build
@pytest.mark.slow
def test_leaderboard_reproduces_published_values_with_both_engines(qrels):
    """Every row of the README's leaderboard, from the 39 runs, with irbook and with
    ranx."""
    runs = J.load_runs()
    board = load_jqara_leaderboard()
    ours = J.leaderboard(runs, qrels, published=board)
    theirs = J.leaderboard(runs, qrels, engine="ranx")
    assert set(ours.index) == set(JQARA_RUNS) == set(theirs.index)
    assert len(board) == 37 and set(JQARA_RUNS) - set(board.index) == {
        "random",
        "minhash",
    }
    for name in board.index:
        for m in J.LEADERBOARD_METRICS:
            pub = board.loc[name, m]
            for table in (ours, theirs):
                assert abs(table.loc[name, m] - pub) <= 5e-5 + 1e-12, (name, m, pub)
            assert abs(ours.loc[name, m] - theirs.loc[name, m]) < 1e-9, (name, m)
            assert ours.loc[name, f"{m} published"] == pub
    assert (ours.loc[board.index, "max |diff|"] <= 5e-5 + 1e-12).all()
    assert ours.loc[["random", "minhash"], "max |diff|"].isna().all()  # not published
    # sorted best first by the first metric, as documented
    assert list(ours["ndcg@10"]) == sorted(ours["ndcg@10"], reverse=True)
    assert ours.index[0] == board["ndcg@10"].idxmax() and ours.index[-1] == "random"


def test_leaderboard_published_needs_a_shared_metric(qrels, runs):
    board = load_jqara_leaderboard()
    with pytest.raises(ValueError, match="published has none"):
        J.leaderboard({"bm25": runs["bm25"]}, qrels, ["ndcg@100"], published=board)


# ---------------------------------------------------------------- family leaders
def _ndcg(qrels, runs, names):
    "Per-question nDCG@10 of `names` through the engine: questions x runs."
    table = per_query_table(qrels, {n: runs[n] for n in names}, "ndcg@10")
    return table, table.xs("ndcg@10", axis=1, level="metric")


def test_family_leaders_are_a_paired_t_test_with_holm(qrels, runs):
    """Chapter 20's "each run against its family leader", on the engine."""
    names = ["bm25", "japanese-splade-base-v1", "ruri-small", "ruri-base", "ruri-large"]
    table, pq = _ndcg(qrels, runs, names)
    groups = pd.Series(["sparse", "sparse", "dense", "dense", "dense"], index=names)
    leader = {g: pq[list(groups[groups == g].index)].mean().idxmax() for g in groups}
    pairs = [(n, leader[g]) for n, g in groups.items() if n != leader[g]]
    vs = compare(table, test="t", pairs=pairs).tested.set_index("run")
    assert set(vs.index) == set(names) - set(leader.values())
    for n, row in vs.iterrows():
        assert row["baseline"] == leader[groups[n]]
        assert row["diff"] == pytest.approx(pq[n].mean() - pq[row["baseline"]].mean())
        assert row["p"] == pytest.approx(
            sps.ttest_rel(pq[row["baseline"]], pq[n]).pvalue
        )
    assert np.allclose(vs["p_holm"], holm(list(vs["p"])))  # holm: tests/test_stats.py


def test_leaderboard_single_metric_and_list_of_runs(qrels, runs):
    named = [runs["bm25"], runs["random"]]  # ranx Runs carry their names
    for engine in ("irbook", "ranx"):
        t = J.leaderboard(named, qrels, "mrr@10", engine=engine)
        assert list(t.columns) == ["mrr@10"] and list(t.index) == ["bm25", "random"]
        assert t.loc["bm25", "mrr@10"] == pytest.approx(
            ranx.evaluate(qrels, runs["bm25"], "mrr@10"), abs=1e-12
        )


def test_per_query_table_matches_ranx(qrels, runs):
    table, pq = _ndcg(qrels, runs, ["bm25", "ruri-small"])
    assert list(pq.columns) == ["bm25", "ruri-small"] and len(pq) == len(qrels.keys())
    for n in pq.columns:
        ref = ranx.evaluate(qrels, runs[n], ["ndcg@10", "mrr@10"], return_mean=False)[
            "ndcg@10"
        ]
        assert np.allclose(pq[n].to_numpy(), ref, atol=1e-12)


# ---------------------------------------------------------------- significance
def test_all_pairs_t_test_equals_ranx_compare_and_scipy(qrels, runs):
    """The engine's p-values are ranx.compare's "student" ones in their score form
    (the t statistic shrunk by sqrt(1 - diff^2): irbook.stats.diff_interval)."""
    table, pq = _ndcg(qrels, runs, MIDDLE)
    p = compare(table, pairs="all", test="t").matrix("ndcg@10", "p")
    assert list(p.index) == MIDDLE == list(p.columns)
    assert np.isnan(np.diag(p.to_numpy())).all()
    assert np.allclose(p.to_numpy(), p.to_numpy().T, equal_nan=True)
    rep = ranx.compare(
        qrels, [runs[n] for n in MIDDLE], metrics=["ndcg@10"], stat_test="student"
    )
    for a in MIDDLE:
        for b in MIDDLE:
            if a != b:
                ranx_p = float(rep.comparisons[a, b]["ndcg@10"]["p_value"])
                t = sps.ttest_rel(pq[a], pq[b])
                assert ranx_p == pytest.approx(t.pvalue, rel=1e-6, abs=1e-12)
                shrunk = abs(t.statistic) * np.sqrt(1 - np.mean(pq[a] - pq[b]) ** 2)
                ref = 2 * sps.t.sf(shrunk, len(pq[a]) - 1)
                assert p.loc[a, b] == pytest.approx(ref, rel=1e-6, abs=1e-12)
                assert p.loc[a, b] >= ranx_p  # never bolder than Student's t


def test_all_pairs_fisher_is_a_valid_p_value(qrels, runs):
    table, _ = _ndcg(qrels, runs, ["bge-m3+dense", "ruri-small", "random"])
    p = compare(table, pairs="all", test="fisher", permutations=200).matrix(
        "ndcg@10", "p"
    )
    # p = (hits + 1) / 201; the close pair is far from significant, random is far
    # from both (no permutation reaches its gap: the smallest p there is)
    assert p.loc["bge-m3+dense", "ruri-small"] > 0.2
    assert p.loc["random", "ruri-small"] == pytest.approx(1 / 201)
    x = p.fillna(0).to_numpy() * 201
    assert np.allclose(x, np.round(x))


def test_engine_bad_input_names_the_run(qrels, runs):
    q, r = _toy()
    short = {k: v for k, v in r.items() if k != "q3"}
    with pytest.raises(QueryMismatch, match=r"run 'short'.*'q3'"):
        per_query_table(q, {"full": r, "short": short}, "ndcg@10")
    one, _ = _ndcg(qrels, runs, ["bm25"])
    with pytest.raises(ValueError, match="nothing was tested"):
        compare(one, pairs="all").matrix()


@pytest.mark.parametrize(
    "gap, words", [(0.02, "higher by"), (0.0005, "not separable"), (-0.02, "lower by")]
)
def test_fusion_verdict_turns_with_the_numbers(gap, words):
    """Chapter 20's "the score fusion beats RRF" is the engine's verdict: made-up
    per-question scores whose gap turns give the other words."""
    rng = np.random.default_rng(0)
    rrf = rng.uniform(0.3, 0.9, 1667)
    wsum = np.clip(rrf + gap + rng.normal(0, 0.05, 1667), 0, 1)
    c = compare({"rrf": {"ndcg@10": rrf}, "sum": {"ndcg@10": wsum}}, test="t")
    assert c.sentences()[0].startswith("sum vs rrf, ndcg@10: " + words)


# ---- query ids that do not match the qrels
@pytest.mark.parametrize("engine", ["irbook", "ranx"])
def test_query_mismatch_is_reported_with_the_run_name(engine):
    q, r = _toy()
    short = {k: v for k, v in r.items() if k != "q2"}
    qr, sr = ranx.Qrels(q), ranx.Run(short, name="short")
    with pytest.raises(QueryMismatch, match="run 'short'") as e:
        J.leaderboard({"short": sr}, qr, ["ndcg@10"], engine=engine)
    assert isinstance(e.value, ValueError) and isinstance(
        e.value, AssertionError
    )  # what irbook and ranx raise
    if engine == "irbook":
        assert "'q2'" in str(e.value)
    # make_comparable behaves as in ranx: the missing query scores 0
    t = J.leaderboard(
        {"short": ranx.Run(short)},
        ranx.Qrels(q),
        ["ndcg@10"],
        engine=engine,
        make_comparable=True,
    )
    ref = ranx.evaluate(ranx.Qrels(q), ranx.Run(short), "ndcg@10", make_comparable=True)
    assert t.loc["short", "ndcg@10"] == pytest.approx(ref, abs=1e-12)
    assert ref < ranx.evaluate(ranx.Qrels(q), ranx.Run(r), "ndcg@10")


def test_half_qrels_against_full_runs_mismatch(qrels, runs):
    tune, test = J.split_qrels(seed=0)
    with pytest.raises(QueryMismatch, match="run 'bm25'"):
        J.leaderboard({"bm25": runs["bm25"]}, tune, ["ndcg@10"])
    with pytest.raises(QueryMismatch, match="run 'bm25'"):
        per_query_table(tune, {"bm25": runs["bm25"]}, "ndcg@10")


def test_bad_scores_name_the_run():
    q, r = _toy()
    r["q2"]["c"] = math.nan
    with pytest.raises(ValueError, match=r"run 'nanny'.*q2"):
        J.leaderboard({"nanny": r}, q, ["ndcg@10"])


def test_leaderboard_argument_checks(runs, qrels):
    with pytest.raises(ValueError, match="engine"):
        J.leaderboard({"bm25": runs["bm25"]}, qrels, engine="trec_eval")
    a, b = (
        ranx.Run({"q1": {"a": 1.0}}, name="same"),
        ranx.Run({"q1": {"b": 1.0}}, name="same"),
    )
    with pytest.raises(ValueError, match="two runs are named 'same'"):
        J.leaderboard([a, b], {"q1": {"a": 1}})


# ---- run names, local runs, loading
def _partial_mirror(tmp_path, monkeypatch, names):
    """An offline dir holding the qrels and only the runs `names` (symlinks into the
    mirror)."""
    (tmp_path / "jqara" / "runs").mkdir(parents=True)
    for rel in ["jqara/qrels.trec", *(f"jqara/runs/{n}.lz4" for n in names)]:
        (tmp_path / rel).symlink_to(SHARED / rel)
    monkeypatch.setenv("IRBOOK_DATA", str(tmp_path))
    monkeypatch.setenv("IRBOOK_CACHE", str(tmp_path / "cache"))


def test_local_runs_are_the_runs_on_disk(tmp_path, monkeypatch):
    assert set(J.local_runs()) == set(JQARA_RUNS)  # the offline copy holds all 39
    _partial_mirror(tmp_path, monkeypatch, ["random", "bm25"])
    assert J.local_runs() == ["bm25", "random"]


def test_unknown_run_names_fail_before_loading(monkeypatch):
    loaded = []
    monkeypatch.setattr(J, "load_jqara_run", lambda name: loaded.append(name))
    with pytest.raises(
        ValueError, match=r"unknown JQaRA runs 'nope', 'bm26'.*published runs:.*bm25"
    ):
        J.load_runs(["bm25", "nope", "bm26"])
    with pytest.raises(ValueError, match="unknown JQaRA run 'BM25'"):
        J.load_runs("BM25")
    assert loaded == []
    with pytest.raises(ValueError, match="missing must be"):
        J.load_runs(["bm25"], missing="ignore")


def test_runs_that_cannot_be_fetched_raise_or_are_skipped(tmp_path, monkeypatch):
    _partial_mirror(tmp_path, monkeypatch, ["random"])
    # offline (IRBOOK_OFFLINE=1), a published run that is not on disk cannot be fetched
    with pytest.raises(DataNotFound, match=re.escape("bm25")):
        J.load_runs(["bm25"])
    with pytest.warns(UserWarning, match="skipped 1 JQaRA runs.*bm25"):
        got = J.load_runs(["random", "bm25"], missing="skip")
    assert list(got) == ["random"] and got["random"].name == "random"


def test_split_qrels_and_restricted_runs(qrels, runs):
    tune, test = J.split_qrels(seed=0)
    t, s, full = set(tune.keys()), set(test.keys()), set(qrels.keys())
    assert t.isdisjoint(s) and t | s == full and abs(len(t) - len(s)) <= 1
    assert (
        set(J.split_qrels(seed=0)[0].keys()) == t
        and set(J.split_qrels(seed=1)[0].keys()) != t
    )
    assert len(J.split_qrels(frac=0.25)[0].keys()) == round(0.25 * len(full))
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError, match="frac"):
            J.split_qrels(frac=bad)
    half = J.load_runs(["bm25"], restrict_to=tune)["bm25"]
    assert set(half.keys()) == t
    pq = _ndcg(qrels, runs, ["bm25"])[1]["bm25"]
    assert J.leaderboard({"bm25": half}, tune, ["ndcg@10"]).iloc[0, 0] == pytest.approx(
        pq.loc[sorted(t)].mean(), abs=1e-12
    )
    assert ranx.evaluate(tune, half, "ndcg@10") == pytest.approx(
        pq.loc[sorted(t)].mean(), abs=1e-12
    )
    assert (
        set(runs["bm25"].keys()) == full
    )  # the shared run was not restricted in place


# scoring your own model (chapter 20, "Your own model on JQaRA"); the download and the
# scores themselves are tested through the network stand-in in tests/test_network.py


def _split():
    return pd.DataFrame(
        {
            "q_id": ["a", "a", "b", "b"],
            "question": ["xy", "xy", "z", "z"],
            "passage_row_id": [1, 2, 3, 4],
            "title": ["x", "q", "z", "w"],
            "text": ["y", "r", "z", "v"],
            "label": [1, 0, 0, 1],
        }
    )


class _Both:
    def encode(self, texts):
        return np.ones((len(texts), 2))

    def predict(self, pairs):
        return np.zeros(len(pairs))


class _Scores:
    "A re-ranker returning whatever scores it was given."

    def __init__(self, scores):
        self.scores = scores

    def predict(self, pairs):
        return self.scores


def test_model_kind_is_detected_or_refused():
    data = _split()
    with pytest.raises(TypeError, match="both"):
        J.model_run(_Both(), data)
    with pytest.raises(TypeError, match="neither"):
        J.model_run(object(), data)
    with pytest.raises(TypeError, match="needs .predict"):
        J.model_run(pd.DataFrame(), data, kind="reranker")  # no .predict
    with pytest.raises(ValueError, match="kind must be"):
        J.model_run(_Both(), data, kind="dense")
    # told which, a model with both methods works either way
    enc = J.model_run(_Both(), data, kind="encoder", name="e").to_dict()
    assert enc["a"] == pytest.approx({"1": 1.0, "2": 1.0})
    rer = J.model_run(_Both(), data, kind="reranker", name="r").to_dict()
    assert rer["b"] == {"3": 0.0, "4": 0.0}


def test_model_run_refuses_bad_scores_and_bad_splits():
    data = _split()
    with pytest.raises(ValueError, match="3 scores for 4 candidates"):
        J.model_run(_Scores([1, 2, 3]), data)
    with pytest.raises(ValueError, match="1 of them not finite"):
        J.model_run(_Scores([1, 2, float("nan"), 3]), data)
    with pytest.raises(ValueError, match="encode returned shape"):
        J.model_run(type("E", (), {"encode": lambda s, t: np.ones(3)})(), data)
    with pytest.raises(ValueError, match="lacks the columns"):
        J.model_run(_Scores([1, 2, 3, 4]), data.drop(columns="title"))
    twice = data.assign(passage_row_id=[1, 1, 3, 4])
    with pytest.raises(ValueError, match="twice"):
        J.model_run(_Scores([1, 2, 3, 4]), twice)


def test_model_run_feeds_the_model_what_the_evaluator_does():
    seen = []

    class Spy:
        def predict(self, pairs, **kw):
            seen.append((pairs, kw))
            return [0.0] * len(pairs)

    J.model_run(Spy(), _split(), query_prefix="Q: ", batch_size=2)
    J.model_run(Spy(), _split(), with_title=False, passage_prefix="P: ")
    assert seen[0] == (
        [["Q: xy", "x y"], ["Q: xy", "q r"], ["Q: z", "z z"], ["Q: z", "w v"]],
        {"batch_size": 2},
    )
    assert seen[1][0][0] == ["xy", "P: y"]


def test_jqara_split_needs_a_well_formed_sha256(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="64 lowercase hex"):
        J.load_jqara_test(sha256="ABC")
    if J.JQARA_TEST_SHA256 is None:  # no pointer to read the hash from: refused
        from irbook import data as D

        monkeypatch.setenv(D.ENV_CACHE, str(tmp_path))
        monkeypatch.setenv(D.ENV_URL_HOST, "http://127.0.0.1:9")  # nothing listens
        with pytest.raises(DataError, match="LFS pointer"):
            J.load_jqara_test()
    # the pinned URL is a full commit of the Hugging Face dataset
    assert re.fullmatch(
        r"https://huggingface\.co/datasets/hotchpotch/JQaRA/resolve/[0-9a-f]{40}/"
        r"data/test-00000-of-00001\.parquet",
        J.JQARA_TEST_URL,
    )
