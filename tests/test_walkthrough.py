"""The published examples shown in chapters 2-4 (`RANX_EXAMPLES`, defined once in
chapter 2): irbook gives every value their pages print, and so does ranx, which checks
that the examples were copied right."""

import pytest

from irbook.metrics import evaluate
from irbook.metrics.sets import RANX_EXAMPLES

CASES = [
    (name, metric, printed)
    for name, ex in RANX_EXAMPLES.items()
    for metric, printed in ex["printed"].items()
]
IDS = [f"{name} {metric}" for name, metric, _ in CASES]


def _agrees(value, printed):
    "Equal to the digits printed: one unit in the last printed decimal (pages cut)."
    return abs(value - printed) < 1e-4


def test_every_example_names_its_page():
    for name, ex in RANX_EXAMPLES.items():
        assert ex["source"].startswith("https://"), name
        assert ex["printed"] and set(ex) == {"source", "qrels", "run", "printed"}, name


@pytest.mark.parametrize("name,metric,printed", CASES, ids=IDS)
def test_irbook_gives_the_printed_value(name, metric, printed):
    ex = RANX_EXAMPLES[name]
    got = evaluate(ex["qrels"], ex["run"], [metric])[metric]
    assert _agrees(got, printed), (name, metric, got, printed)


@pytest.mark.parametrize("name,metric,printed", CASES, ids=IDS)
def test_ranx_gives_the_printed_value(name, metric, printed):
    ranx = pytest.importorskip("ranx")
    ex = RANX_EXAMPLES[name]
    got = float(ranx.evaluate(ranx.Qrels(ex["qrels"]), ranx.Run(ex["run"]), metric))
    assert _agrees(got, printed), (name, metric, got, printed)


def test_the_check_can_fail():
    ex = RANX_EXAMPLES["ranx documentation: usage"]
    got = evaluate(ex["qrels"], ex["run"], ["map@5"])["map@5"]
    assert not _agrees(got, 0.6414) and not _agrees(got, 0.6418)
