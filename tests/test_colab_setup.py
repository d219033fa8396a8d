"""A chapter opened the way "Open in Colab" opens it: a Python with a Jupyter kernel and
nothing of irbook, where the chapter's own first cell must install what it needs.

A fresh venv gets only what a Colab-like runtime has for this (ipykernel, nbclient);
git is told that https://github.com/irbook/irbook is this checkout (`insteadOf`), so
the set-up cell's `pip install "irbook[...] @ git+https://github.com/irbook/irbook"`
installs the committed code from here, its dependencies from the package index. Then
the chapter runs top to bottom in that kernel, hidden checks included."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import setup_cells  # noqa: E402

CHAPTER = ROOT / "nbs" / "02_set_metrics.ipynb"


def test_every_chapter_opens_with_its_setup_cell():
    for p in sorted((ROOT / "nbs").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(p.read_text(encoding="utf-8"))
        changed, _ = setup_cells.setup_cell(nb, int(p.name[:2]))
        assert not changed, f"{p.name}: run python tools/setup_cells.py --write"
        title = next(
            i
            for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("# ")
        )
        first = nb["cells"][title + 1]
        assert "".join(first["source"]).startswith(setup_cells.FIRST), p.name


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("git"), reason="needs git")
@pytest.mark.skipif(
    not os.environ.get("IRBOOK_DATA"),
    reason="the chapter reads JQaRA: set IRBOOK_DATA (Colab downloads it)",
)
def test_a_chapter_sets_itself_up_in_a_fresh_runtime(tmp_path):
    py = shutil.which("python3.11") or sys.executable
    venv = tmp_path / "runtime"
    subprocess.run([py, "-m", "venv", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    # from a folder outside the checkout: `python -c` puts the current folder on the
    # path, and the checkout's own irbook/ must not be found
    run = dict(capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    r = subprocess.run(
        [vpy, "-m", "pip", "install", "-q", "ipykernel", "nbclient"], **run
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # before: the runtime has no irbook
    assert subprocess.run([vpy, "-c", "import irbook"], **run).returncode != 0
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(
        f'[url "file://{ROOT}"]\n\tinsteadOf = https://github.com/irbook/irbook\n'
        "[safe]\n\tdirectory = *\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER", "MPLBACKEND"))
    }
    env.update(
        GIT_CONFIG_GLOBAL=str(gitconfig),
        PATH=f"{venv / 'bin'}:/usr/bin:/bin",
        IRBOOK_CACHE=str(tmp_path / "cache"),
        HOME=str(tmp_path / "home"),
    )
    nb = tmp_path / CHAPTER.name
    shutil.copy(CHAPTER, nb)
    r = subprocess.run(
        [
            vpy,
            "-c",
            "import sys, nbformat; from nbclient import NotebookClient; "
            "nb = nbformat.read(sys.argv[1], 4); "
            "NotebookClient(nb, timeout=900, kernel_name='python3').execute(); "
            "nbformat.write(nb, sys.argv[1])",
            str(nb),
        ],
        env=env,
        **run,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    # after: irbook came from the repository's code, installed by the first cell
    shown = subprocess.run([vpy, "-m", "pip", "show", "irbook"], **run).stdout
    assert "Location: " + str(venv) in shown, shown
    out = json.loads(nb.read_text())
    assert sum(len(c.get("outputs", [])) for c in out["cells"]) >= 10
