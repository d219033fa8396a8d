"""The one-data-path layout: imports run downward, no private or in-function irbook
imports, every retriever derives from irbook.core.Retriever, old names still resolve."""

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import irbook.core as core

ROOT = Path(__file__).resolve().parents[1]
# the data path, lowest first: a module may import only modules listed before it
LAYERS = [
    ["data"],
    ["core"],
    ["metrics.ranx_compat", "metrics.columns", "metrics.io", "metrics.conventions"],
    ["metrics.join", "metrics.registry"],
    ["metrics.sets", "metrics.rank"],
    ["metrics.graded", "metrics.stream", "metrics", "metrics.distributed", "unjudged"],
    ["stats", "power", "figures", "compare", "ppi"],
    ["ranking", "labelling"],
    ["search.fulltext", "search.dense", "fastbook", "chunking", "spans"],
    ["search.colbert", "search.fusion", "plots", "metrics.runs"],
    ["jqara", "japanese", "synthetic", "noise", "negatives", "judges"],
    ["finetune"],
    ["part2", "synthetic_eval", "training_filters", "cli"],
    ["entry"],
]
ORDER = [m for layer in LAYERS for m in layer]
RANK = {m: i for i, m in enumerate(ORDER)}


def modules():
    for p in sorted((ROOT / "irbook").rglob("*.py")):
        if (
            p.name == "_modidx.py"
            or p.name == "__init__.py"
            and p.parent.name == "irbook"
        ):
            continue
        rel = p.relative_to(ROOT / "irbook").with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if name == "search":
            continue
        yield name, p, ast.parse(p.read_text())


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
    from irbook.japanese import E5Retriever, JapaneseBM25
    from irbook.search.colbert import ColBERTRetriever, RAGatouilleRetriever
    from irbook.search.dense import DenseRetriever
    from irbook.search.fulltext import BM25sRetriever, FTS5Retriever, RankBM25Retriever
    from irbook.search.fusion import FusedRetriever, RerankRetriever

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
        assert issubclass(cls, core.Retriever), cls
        assert "search" not in vars(cls) and "index" not in vars(cls), (
            f"{cls.__name__} rewrites index/search instead of the base's hooks"
        )


OLD = {
    "irbook.search.fulltext.top_k": "irbook.core.top_k",
    "irbook.search.fulltext.check_docs": "irbook.core.check_docs",
    "irbook.fastbook.ranked_ids": "irbook.core.ranking",
    "irbook.search.fusion.split_questions": "irbook.search.fusion.split_tune_report",
    "irbook.search.fusion.cached_run": "irbook.part2.cached_run",
    "irbook.search.fusion.part2_scores": "irbook.part2.part2_scores",
    "irbook.search.fusion.CHUNKINGS": "irbook.part2.CHUNKINGS",
    "irbook.search.colbert.training_log": "irbook.search.colbert.colbert_training_log",
    "irbook.japanese.tokenize": "irbook.japanese.tokenize_ja",
    "irbook.japanese.METHODS": "irbook.japanese.TOKENIZERS",
    "irbook.japanese.METRICS": "irbook.japanese.JSQUAD_METRICS",
    "irbook.japanese.evaluate_runs": "irbook.compare.per_query_table",
    "irbook.negatives.METHODS": "irbook.negatives.MINING_METHODS",
    "irbook.metrics.vs_ranx": "irbook.stats.vs_ranx",
    "irbook.cli.paired_p": "irbook.compare.paired_p",
    "irbook.jqara.per_query": "irbook.compare.per_query_table",
    "irbook.jqara.versus_best": "irbook.compare.compare",
    "irbook.jqara.significance_matrix": "irbook.compare.compare",
}


def _get(path):
    mod, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


@pytest.mark.parametrize("old", sorted(OLD))
def test_old_names_warn_and_resolve(old):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _get(old)
    assert got is _get(OLD[old])
    assert any(issubclass(w.category, DeprecationWarning) for w in caught), old


def test_unknown_names_still_fail():
    import irbook.search.fusion as F

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        F.nope  # noqa: B018


def test_plots_alias_module_warns():
    import sys

    sys.modules.pop("irbook.plots", None)
    with pytest.warns(DeprecationWarning, match="irbook.plots is deprecated"):
        plots = importlib.import_module("irbook.plots")
    from irbook.figures import plot_forest, plot_ranking

    assert plots.plot_ranking is plot_ranking and plots.plot_forest is plot_forest


def test_metrics_runs_alias_module_warns():
    "The old engine module still imports, warns, and gives the layers' objects."
    import sys

    import irbook.metrics as M

    sys.modules.pop("irbook.metrics.runs", None)
    with pytest.warns(DeprecationWarning, match="irbook.metrics.runs is deprecated"):
        runs = importlib.import_module("irbook.metrics.runs")
    assert runs.evaluate is M.evaluate and runs.read_columns is M.read_columns
    assert runs.Columns is M.Columns and runs.to_ranked is M.to_ranked
