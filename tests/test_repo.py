"""Repository hygiene that protects users and licences."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(
    p for p in (ROOT / "nbs").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
)


def test_notebooks_are_committed_without_outputs():
    # outputs are produced by the book build; committed outputs could carry fastbook
    # prose (not redistributable)
    dirty = [
        nb.name
        for nb in NOTEBOOKS
        if any(
            c.get("outputs")
            for c in json.loads(nb.read_text())["cells"]
            if c["cell_type"] == "code"
        )
    ]
    assert not dirty, f"notebooks with outputs: {dirty}"


def test_nbdev_tags_are_mirrored_for_jupyter_book():
    # jupyter-book ignores nbdev directives: a hidden cell must be removed and an
    # eval:false cell skipped
    bad = []
    for nb in NOTEBOOKS:
        for i, c in enumerate(json.loads(nb.read_text())["cells"]):
            src, tags = "".join(c["source"]), c.get("metadata", {}).get("tags", [])
            if c["cell_type"] != "code":
                continue
            if ("#| hide" in src or "#|hide" in src) and "remove-cell" not in tags:
                bad.append((nb.name, i, "hide"))
            if "#| eval: false" in src and "skip-execution" not in tags:
                bad.append((nb.name, i, "eval"))
    assert not bad, bad


def test_book_skips_only_hidden_unit_tests_that_make_test_runs(tmp_path):
    "tools/book_skips.py: the `skip-execution` tags are exactly what it derives."
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "book_skips", ROOT / "tools" / "book_skips.py"
    )
    bs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bs)
    assert not bs.differences(), "run: python tools/book_skips.py --write"
    # the rule itself: a test that binds a name a later executed cell reads runs;
    # one whose names nobody reads is skipped; patches and flagged cells always run
    cells = [
        "#| hide\nfrom fastcore.test import test_eq\nimport numpy as np",
        "#| hide\nx = np.arange(3)\ntest_eq(len(x), 3)",  # x is read below: runs
        "#| hide\ny = [v for v in x]\nassert y",  # nobody reads y: skipped
        "#| hide\nimport irbook.core as C\nC.THING = 1",  # a patch: runs
        "#| hide\n#| slow\nassert x.sum() == 3",  # the book alone runs it
        "#| export\ndef f(v):\n    return v",
        "show_doc(f)\nx.max()",
    ]
    nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}} for c in cells]}
    path = tmp_path / "api" / "toy.ipynb"  # a reference notebook
    path.parent.mkdir()
    path.write_text(json.dumps(nb))
    assert bs.book_skips(path, set(), {"slow"}) == [2]
    assert bs.book_skips(path, {"toy"}, {"slow"}) == []  # only the book runs it


def test_toc_lists_every_notebook():
    toc = (ROOT / "book" / "_toc.yml").read_text()
    missing = [
        nb for nb in NOTEBOOKS if f"{nb.relative_to(ROOT).with_suffix('')}" not in toc
    ]
    assert not missing, f"notebooks not in book/_toc.yml: {missing}"


def test_package_imports_and_has_version():
    out = subprocess.run(
        [sys.executable, "-c", "import irbook; print(irbook.__version__)"],
        capture_output=True,
        text=True,
        cwd=ROOT / "tests",
    )
    assert out.returncode == 0 and out.stdout.strip(), out.stderr


def _written_lines(path):
    "(number, line) of a module's lines, without the `__all__` list nbdev generates."
    lines = path.read_text().splitlines()
    skip = set()
    for i, line in enumerate(lines):
        if line.startswith("__all__ = ["):
            j = i
            while "]" not in lines[j]:
                j += 1
            skip |= set(range(i, j + 1))
    return [(i + 1, x) for i, x in enumerate(lines) if i not in skip]


def test_library_lines_fit_88_columns():
    # exported code is read on the website and in editors: no line wider than ruff's
    # limit
    wide = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "irbook").rglob("*.py"))
        if p.name != "_modidx.py"
        for i, line in _written_lines(p)
        if len(line) > 88
    ]
    assert not wide, f"{len(wide)} lines over 88 characters: {wide[:10]}"
