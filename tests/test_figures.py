"""Figures apart from kernels: the metrics and statistics hold no plotting code, and
evaluating never loads matplotlib; the figures live in irbook.figures."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the modules that compute numbers: every metric, the engine under them, the statistics
KERNELS = sorted((ROOT / "irbook" / "metrics").glob("*.py")) + [
    ROOT / "irbook" / "stats.py",
    ROOT / "irbook" / "compare.py",
]


def _imported(path):
    "Every module a file imports, at any depth (inside functions too)."
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module or ""


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: p.stem)
def test_kernels_hold_no_plotting_code(path):
    plotting = [m for m in _imported(path) if m.split(".")[0] == "matplotlib"]
    assert not plotting, (
        f"{path.name} imports {plotting}: plots belong in irbook.figures"
    )


def test_evaluating_loads_no_matplotlib():
    probe = (
        "import sys\n"
        "import irbook.metrics as M, irbook.stats, irbook.compare, irbook.figures\n"
        "M.evaluate({'q': {'a': 1}}, {'q': {'a': 1.0, 'b': 0.5}}, ['ndcg@10', 'map'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_the_probe_sees_matplotlib_when_a_figure_is_drawn():
    "The check above can fail: drawing one figure loads matplotlib."
    probe = (
        "import sys, matplotlib; matplotlib.use('Agg')\n"
        "from irbook.figures import plot_gains\n"
        "plot_gains(2)\n"
        "print('matplotlib.pyplot' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
