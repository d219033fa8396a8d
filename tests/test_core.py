"""The one-data-path layout: imports run downward, no private or in-function irbook
imports, every retriever derives from irbook.course.common.Retriever, no old name is
left."""

import ast
import functools
import importlib
from pathlib import Path

import pytest

import irbook.course.common as common

ROOT = Path(__file__).resolve().parents[1]
# the data path, lowest first: a module may import only modules listed before it. The
# evaluator (what `pip install irbook` needs) is every module outside irbook/course; the
# course's code (datasets, search, experiments) is under it and comes after it
EVALUATOR = [
    ["data"],
    ["core"],
    ["metrics.ranx_compat", "metrics.columns", "metrics.io", "metrics.conventions"],
    ["metrics.join", "metrics.registry"],
    ["metrics.sets", "metrics.rank", "metrics.trec", "metrics.positions"],
    ["metrics.graded", "metrics.stream", "metrics.distributed", "metrics", "unjudged"],
    ["stats", "power", "figures", "compare", "ppi"],
    ["ranking", "labelling", "spans"],
    ["cli"],
    ["entry"],
]
COURSE = [
    ["course.common"],
    ["course.search.fulltext", "course.search.dense", "course.fastbook"],
    ["course.chunking", "course.search.colbert", "course.search.fusion"],
    ["course.jqara", "course.japanese", "course.synthetic", "course.noise"],
    ["course.negatives", "course.judges"],
    ["course.finetune"],
    ["course.part2", "course.synthetic_eval", "course.training_filters"],
]
LAYERS = EVALUATOR + COURSE
ORDER = [m for layer in LAYERS for m in layer]
RANK = {m: i for i, m in enumerate(ORDER)}


def modules():
    "(name, path, syntax tree) of every irbook module, parsed once per session."
    yield from _parsed()


@functools.cache
def _parsed() -> tuple:
    out = []
    for p in sorted((ROOT / "irbook").rglob("*.py")):
        if (
            p.name == "_modidx.py"
            or p.name == "__init__.py"
            and p.parent.name == "irbook"
        ):
            continue
        rel = p.relative_to(ROOT / "irbook").with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if name in {"course", "course.search"}:  # package docstrings only
            continue
        out.append((name, p, ast.parse(p.read_text())))
    return tuple(out)


def irbook_imports(name, tree):
    "(node, imported module, imported names) for every import of an irbook module."
    pkg = name.split(".")[:-1] if not name.endswith("metrics") else name.split(".")
    # `if TYPE_CHECKING:` imports never run: they name a type for the documentation
    typing_only = {
        id(sub)
        for n in ast.walk(tree)
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
        for sub in ast.walk(n)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("irbook."):
                mod = node.module[len("irbook.") :]
            else:
                continue
            yield node, mod, [a.name for a in node.names]


def test_every_module_has_a_layer():
    assert {n for n, _, _ in modules()} == set(RANK)


def test_the_folders_say_which_product():
    "Course modules live under irbook/course, the evaluator's everywhere else."
    for n, path, _ in modules():
        under = (ROOT / "irbook" / "course") in path.parents
        assert under == (n in {m for layer in COURSE for m in layer}), path


@pytest.mark.parametrize("name", sorted(m for layer in EVALUATOR for m in layer))
def test_the_evaluator_never_imports_the_course(name):
    tree = next(t for n, _, t in modules() if n == name)
    for node, mod, _ in irbook_imports(name, tree):
        assert not mod.startswith("course"), (
            f"irbook.{name} imports irbook.{mod} (line {node.lineno}): the evaluator "
            "must install and run without the course's code"
        )


@pytest.mark.parametrize("name", sorted(RANK))
def test_imports_run_downward(name):
    tree = next(t for n, _, t in modules() if n == name)
    for node, mod, names in irbook_imports(name, tree):
        assert mod in RANK, (name, mod)
        assert RANK[mod] < RANK[name], (
            f"irbook.{name} imports irbook.{mod}, which comes later on the data "
            f"path (line {node.lineno})"
        )


# the command line's modules import what a command uses when it runs it: `irbook eval`
# on a small file must start in tenths of a second (issue 27), so they are exempt from
# the in-function rule (not from the private-name rule)
LAZY = {"cli", "entry"}


@pytest.mark.parametrize("name", sorted(RANK))
def test_no_private_or_in_function_irbook_imports(name):
    tree = next(t for n, _, t in modules() if n == name)
    inner = {
        id(sub)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for sub in ast.walk(f)
    }
    for node, mod, names in irbook_imports(name, tree):
        private = [a for a in names if a.startswith("_") and not a.startswith("__")]
        assert not private, f"irbook.{name} imports {private} from irbook.{mod}"
        if name not in LAZY:
            assert id(node) not in inner, f"irbook.{name}: irbook import in a function"


def test_every_retriever_derives_from_the_core_base():
    from irbook.course.japanese import E5Retriever, JapaneseBM25
    from irbook.course.search.colbert import ColBERTRetriever, RAGatouilleRetriever
    from irbook.course.search.dense import DenseRetriever
    from irbook.course.search.fulltext import (
        BM25sRetriever,
        FTS5Retriever,
        RankBM25Retriever,
    )
    from irbook.course.search.fusion import FusedRetriever, RerankRetriever

    for cls in (
        FTS5Retriever,
        BM25sRetriever,
        RankBM25Retriever,
        DenseRetriever,
        E5Retriever,
        ColBERTRetriever,
        RAGatouilleRetriever,
        JapaneseBM25,
        FusedRetriever,
        RerankRetriever,
    ):
        assert issubclass(cls, common.Retriever), cls
        assert "search" not in vars(cls) and "index" not in vars(cls), (
            f"{cls.__name__} rewrites index/search instead of the base's hooks"
        )


# names renamed or moved before the first release: the old ones are gone, not aliased
OLD = {
    "irbook.course.search.fulltext": [
        "top_k",
        "check_docs",
        "check_queries",
        "allowed_rows",
    ],
    "irbook.course.fastbook": ["ranked_ids"],
    "irbook.course.search.fusion": [
        "split_questions",
        "cached_run",
        "part2_scores",
        "CHUNKINGS",
    ],
    "irbook.course.search.colbert": ["training_log"],
    "irbook.course.japanese": ["tokenize", "METHODS", "METRICS", "evaluate_runs"],
    "irbook.course.negatives": ["METHODS"],
    "irbook.metrics": ["vs_ranx", "plot_query", "LABEL_COLORS", "TIES"],
    "irbook.metrics.sets": ["RANX_EXAMPLES"],
    "irbook.cli": ["paired_p"],
    "irbook.course.jqara": ["per_query", "versus_best", "significance_matrix"],
    "irbook.core": ["deprecated_names"],
}


@pytest.mark.parametrize("module", sorted(OLD))
def test_old_names_are_gone(module):
    mod = importlib.import_module(module)
    for name in OLD[module]:
        assert not hasattr(mod, name), f"{module}.{name}"
    with pytest.raises(ImportError):
        exec(f"from {module} import {OLD[module][0]}")


@pytest.mark.parametrize("module", ["irbook.plots", "irbook.metrics.runs"])
def test_old_alias_modules_are_gone(module):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)
