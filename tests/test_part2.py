"""irbook.course.part2's comparison helpers (chapter 16) on made-up per-question
scores: the verdicts they give turn when the numbers turn."""

import numpy as np
import pandas as pd
import pytest

from irbook.compare import compare
from irbook.course.part2 import against_published, chunking_table, versus_best_single

N = 95  # questions in the report half


def _scores(gain: float, seed: int = 0, n: int = N) -> pd.DataFrame:
    "Long per-question scores of one chunking: single, fusion (single + gain), ceiling."
    rng = np.random.default_rng(seed)
    single = rng.uniform(0.2, 0.8, n)
    fusion = np.clip(single + gain + rng.normal(0, 0.15, n), 0, 1)
    rows = []
    for system, mrr in (("single", single), ("fusion", fusion), ("ceiling", 1.0)):
        rows.append(
            pd.DataFrame(
                {
                    "chunking": "toy",
                    "system": system,
                    "qid": [f"q{i}" for i in range(n)],
                    "modified_mrr": mrr,
                    "modified_recall": np.minimum(1.0, np.asarray(mrr) + 0.3),
                }
            )
        )
    other = rows[0].assign(chunking="other", modified_mrr=0.0)  # must be left out
    return pd.concat([*rows, other], ignore_index=True)


def test_chunking_table_is_questions_by_system_and_metric():
    t = chunking_table(_scores(0.1), "toy")
    assert t.shape == (N, 6) and t.columns.names == ["run", "metric"]
    assert list(dict.fromkeys(t.columns.get_level_values("run"))) == [
        "single",
        "fusion",
        "ceiling",
    ]
    assert (t[("ceiling", "modified_mrr")] == 1).all()


@pytest.mark.parametrize(
    "gain, words",
    [(0.08, "higher by"), (0.0, "not separable"), (-0.08, "lower by")],
)
def test_versus_best_single_verdict_turns_with_the_gain(gain, words):
    c = versus_best_single(_scores(gain), "toy", "single")
    t = c.tested
    assert list(t.run) == ["fusion", "fusion"] and set(t.baseline) == {"single"}
    assert c.test == "bootstrap" and (t.p_holm >= t.p).all()
    mrr = c.sentences()[list(t.metric).index("modified_mrr")]
    assert mrr.startswith("fusion vs single, modified_mrr: " + words), mrr


def test_versus_best_single_is_the_engine_on_the_table():
    s = _scores(0.05)
    got = versus_best_single(s, "toy", "single", B=500, seed=3).table
    want = compare(
        chunking_table(s, "toy"),
        test="bootstrap",
        B=500,
        seed=3,
        pairs=[("fusion", "single")],
    ).table
    pd.testing.assert_frame_equal(got, want)


@pytest.mark.parametrize(
    "pub, status",
    [
        ({"mrr": 0.40, "recall": 0.60}, "met"),  # both below our intervals
        ({"mrr": 0.50, "recall": 0.60}, "not separable"),  # mrr inside
        ({"mrr": 0.40, "recall": 0.80}, "not separable"),  # recall inside
        ({"mrr": 0.60, "recall": 0.60}, "not met"),  # mrr above our interval
        ({"mrr": 0.50, "recall": 0.95}, "not met"),  # one above beats one inside
    ],
)
def test_against_published_turns_with_the_published_number(pub, status):
    rng = np.random.default_rng(0)
    ours = pd.DataFrame(
        {"mrr": rng.uniform(0.3, 0.7, 191), "recall": rng.random(191) < 0.8}
    )
    got, vs = against_published(ours, pub, n_published=191)
    assert got == status
    for m, v in vs.items():
        assert v.n == 191 and v.same_questions and v.published == pub[m]
        assert ("consistent with it" in v.sentence()) == v.inside


def test_against_published_says_when_the_questions_differ():
    ours = pd.DataFrame({"mrr": np.linspace(0.3, 0.7, 95)})
    _, vs = against_published(ours, {"mrr": 0.5}, n_published=191)
    assert not vs["mrr"].same_questions
    assert "from other questions (n = 191)" in vs["mrr"].sentence()
