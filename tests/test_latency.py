"""A small file is scored in a few tenths of a second (issue 27): `irbook eval` imports
only what the command uses. The CI machine is loaded, so these tests check what is
imported, in a fresh process, rather than the wall time.

Run: python -m pytest tests/test_latency.py -q
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE = ["torch", "sentence_transformers", "transformers", "ranx", "numba", "scipy"]
COURSE += ["matplotlib", "dask", "distributed", "sklearn", "ftfy"]
HEAVY = ["pandas", "tqdm", "jinja2"]  # fine when used, not on the default command


def loaded(code: str, tmp_path) -> set:
    "The top-level modules a fresh process holds after running `code`."
    code += (
        "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {m.split(".")[0] for m in json.loads(r.stderr.splitlines()[-1])}


def small_files(tmp_path) -> tuple:
    "bench/latency.py's qrels and 100-line run, written to `tmp_path`: their names."
    spec = importlib.util.spec_from_file_location("latency", ROOT / "bench/latency.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return tuple(p.name for p in bench.small_files(tmp_path))


def test_import_cli_loads_no_course_dependency(tmp_path):
    got = loaded("import irbook.cli", tmp_path)
    assert not got & set(COURSE + HEAVY), got & set(COURSE + HEAVY)


def test_entry_loads_nothing(tmp_path):
    "The console script's own module: the standard library only."
    assert "numpy" not in loaded("import irbook.entry", tmp_path)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_default_command_loads_only_what_it_uses(tmp_path, fmt):
    "`irbook eval qrels run -m ndcg@10` on small files: numpy and irbook's evaluator."
    q, r = small_files(tmp_path)
    code = "from irbook.cli import main\n"
    code += f"main(['eval', {q!r}, {r!r}, '-m', 'ndcg@10', '--format', {fmt!r}])"
    got = loaded(code, tmp_path)
    # pyarrow (0.1 s to import) reads large files; the line reader reads small ones
    assert not got & set(COURSE + HEAVY + ["pyarrow"]), got & set(COURSE + HEAVY)


def test_means_text_is_pandas_layout():
    "The one-run table printed without pandas is the table `render` prints with it."
    import pandas as pd

    from irbook.cli import _means_text
    from irbook.compare import compare, render

    rng = np.random.default_rng(0)
    names = ["run", "r", "bm25", "a-much-longer-run-name", "63", "検索", "x y"]
    metrics = ["ndcg@10", "P_5", "map", "num_ret", "recall@1000", "m", "gm_map"]
    for name in names:
        for k in (1, 2, 4, 7):
            ms = list(rng.choice(metrics, k, replace=False))
            scale = rng.choice([1, 100, 10_000])
            v = rng.random((5, k)) * scale
            cols = pd.MultiIndex.from_tuples([(name, m) for m in ms])
            table = pd.DataFrame(v, columns=cols, index=[f"q{i}" for i in range(5)])
            means = {m: float(compare(table).means().loc[name, m]) for m in ms}
            assert _means_text(name, means) == render(compare(table)), (name, ms)


@pytest.mark.parametrize("flags", [[], ["-q"], ["-q", "-c", "-m", "all_trec"]])
def test_trec_eval_layout_loads_no_pandas(tmp_path, flags):
    "trec_eval's own lines (its convention and layout) are made without pandas."
    q, r = small_files(tmp_path)
    code = "from irbook.cli import main\n"
    code += f"main(['eval', {q!r}, {r!r}, *{flags!r}, '--convention', 'trec_eval', "
    code += "'--format', 'trec'])"
    got = loaded(code, tmp_path)
    assert not got & set(COURSE + HEAVY), got & set(COURSE + HEAVY)
