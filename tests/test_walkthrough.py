"""The published examples shown in chapters 2-4 (`ranx_examples()`, transcribed once in
the data file irbook/metrics/ranx_examples.json): every example of kun432's walkthrough
(https://zenn.dev/kun432/scraps/0f1577a6988558) and the Usage example of ranx's
documentation. irbook gives every value the pages print, and so does ranx, which checks
that the examples were copied right."""

import warnings

import pytest

from irbook.metrics import evaluate
from irbook.metrics.registry import (
    WALKTHROUGH,
    agrees_printed,
    printed_beside,
    ranx_examples,
)

RANX_EXAMPLES = ranx_examples()

CASES = [
    (name, metric, printed)
    for name, ex in RANX_EXAMPLES.items()
    for metric, printed in ex["printed"].items()
]
IDS = [f"{name} {metric}" for name, metric, _ in CASES]


def test_every_example_names_its_page():
    for name, ex in RANX_EXAMPLES.items():
        assert ex["source"].startswith("https://"), name
        assert ex["printed"] and set(ex) == {
            "source",
            "digits",
            "qrels",
            "run",
            "printed",
        }, name
        assert ex["digits"] in (3, 4), name


def test_the_whole_walkthrough_is_transcribed():
    walk = [ex for ex in RANX_EXAMPLES.values() if ex["source"] == WALKTHROUGH]
    assert len(walk) == 33
    assert sum(len(ex["printed"]) for ex in walk) == 61
    bases = {m.split("@")[0].split(".")[0] for ex in walk for m in ex["printed"]}
    assert bases == {
        "hits", "hit_rate", "precision", "recall", "f1", "r-precision", "bpref",
        "rbp", "mrr", "map", "dcg", "ndcg", "dcg_burges", "ndcg_burges",
    }  # fmt: skip


@pytest.mark.parametrize("name,metric,printed", CASES, ids=IDS)
def test_irbook_gives_the_printed_value(name, metric, printed):
    ex = RANX_EXAMPLES[name]
    got = evaluate(ex["qrels"], ex["run"], [metric])[metric]
    assert agrees_printed(got, printed, ex["digits"]), (name, metric, got, printed)


@pytest.mark.parametrize("name,metric,printed", CASES, ids=IDS)
def test_ranx_gives_the_printed_value(name, metric, printed):
    ranx = pytest.importorskip("ranx")
    ex = RANX_EXAMPLES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's cast warning inside ranx's bpref
        q, r = ranx.Qrels(ex["qrels"]), ranx.Run(ex["run"])
        got = float(ranx.evaluate(q, r, metric))
    assert agrees_printed(got, printed, ex["digits"]), (name, metric, got, printed)


def test_the_walkthrough_rounds_to_its_digits():
    "ranx's report rounds (not cuts): every walkthrough value is the rounded one."
    for name, metric, printed in CASES:
        ex = RANX_EXAMPLES[name]
        if ex["source"] == WALKTHROUGH:
            got = evaluate(ex["qrels"], ex["run"], [metric])[metric]
            assert round(got, 3) == printed, (name, metric, got, printed)


def test_the_check_can_fail():
    ex = RANX_EXAMPLES["ranx documentation: usage"]
    got = evaluate(ex["qrels"], ex["run"], ["map@5"])["map@5"]
    assert not agrees_printed(got, 0.6414, 4) and not agrees_printed(got, 0.6419, 4)
    wrong = {"x": dict(RANX_EXAMPLES["walkthrough: mrr 2"], printed={"mrr": 0.5})}
    assert (printed_beside(["mrr"], wrong)["equal?"] == "NO").all()


def test_the_examples_are_data_not_engine_code():
    "The examples live in a data file the package ships; the engine module holds none."
    import irbook.metrics.registry as registry

    assert not hasattr(registry, "RANX_EXAMPLES")
    src = open(registry.__file__, encoding="utf-8").read()
    assert "walkthrough: hits 1" not in src
    assert ranx_examples() == RANX_EXAMPLES and ranx_examples() is not RANX_EXAMPLES
