"""Run every notebook in nbs/ through nbdev's executor: the notebooks' own asserts are
the lesson tests.

Cells flagged with a flag from settings.ini's `tst_flags` (e.g. `#| slow`) are skipped
unless that flag is listed in IRBOOK_TEST_FLAGS (e.g. IRBOOK_TEST_FLAGS=slow make test);
`#| eval: false` cells never run."""

import os
from pathlib import Path

import pytest
from nbdev.config import get_config
from nbdev.test import test_nb as run_notebook  # renamed so pytest does not collect it

ROOT = Path(__file__).resolve().parents[1]
# the chapters and the api/ reference notebooks
NOTEBOOKS = sorted(
    p for p in (ROOT / "nbs").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)
# Chapters that encode, train or score dozens of runs even with their `#| slow` cells
# skipped. `make test-slow` runs them here; `make book` executes every cell of every
# chapter anyway.
HEAVY = {
    "15_colbert_search",
    "16_fusion_and_rerank",
    "18_jqara",
    "19_japanese_search",
    "21_label_noise",  # encodes every chunk of the book with MiniLM on a cold cache
    # the same: mines negatives from MiniLM embeddings of every chunk
    "22_hard_negatives",
    "23_finetuning",
    "24_synthetic_vs_human",  # indexes every chunk with ColBERT on a cold cache
    "25_training_filters",  # fine-tunes MiniLM
    "training_filters",  # the reference page re-runs a small configuration
    "finetune",  # the reference page trains small models
    # Monte Carlo demonstrations of the prose (issue 37: `make test` under 3 minutes):
    # 10,000-set power simulations; what irbook.power computes is tests/test_power.py's
    "08_power",
    # interval coverage of irbook against ppi-python over 32 settings x 500 draws; the
    # intervals' coverage is tests/test_coverage.py's and api/ppi's hidden tests'
    "26_judge_assisted",
    # its coverage, width and power tables (~12 s of CPU); its unit checks are
    # tests/test_labelling.py's
    "labelling",
}


def _flags():
    cfg = get_config(path=ROOT)
    known = cfg.get("tst_flags", "").split()
    force = os.environ.get("IRBOOK_TEST_FLAGS", "").split()
    unknown = set(force) - set(known)
    assert not unknown, (
        f"IRBOOK_TEST_FLAGS has flags not in settings.ini tst_flags: {unknown}"
    )
    return [f for f in known if f not in force], force


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2, NOTEBOOKS
    assert HEAVY <= {nb.stem for nb in NOTEBOOKS}, HEAVY


@pytest.mark.parametrize(
    "nb",
    [
        pytest.param(
            nb, marks=[pytest.mark.slow, pytest.mark.book] * (nb.stem in HEAVY)
        )
        for nb in NOTEBOOKS
    ],
    ids=lambda p: p.stem,
)
def test_notebook(nb):
    skip, force = _flags()
    ok, secs = run_notebook(
        nb,
        skip_flags=skip,
        force_flags=force,
        do_print=False,
        showerr=True,
        basepath=ROOT,
    )
    assert ok, f"{nb.name} failed (see the traceback printed above)"
