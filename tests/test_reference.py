"""The Reference reads as API documentation (issue 35, item 8).

Static: every public function and class of the modules below has a docstring and a
documented parameter (a docment: `x: int,  # what x is`) for every parameter, which
nbdev's `show_doc` prints in the signature. On the built site (IRBOOK_SITE set, as
`make site-check` does; see tests/test_site.py): each reference page shows its
`show_doc` output and folds the source of every exported cell under a toggle "Source"
(book/_ext/irbook_sphinx.py)."""

import importlib
import inspect
import json
import os
import re
from pathlib import Path

import pytest
from fastcore.docments import docments

ROOT = Path(__file__).resolve().parents[1]
SITE = os.environ.get("IRBOOK_SITE")

# reference notebook -> the module it exports
MODULES = {
    "core": "irbook.core",
    "metrics_columns": "irbook.metrics.columns",
    "metrics_io": "irbook.metrics.io",
    "metrics_join": "irbook.metrics.join",
    "metrics_registry": "irbook.metrics.registry",
    "metrics_stream": "irbook.metrics.stream",
    "metrics_positions": "irbook.metrics.positions",
    "metrics_distributed": "irbook.metrics.distributed",
    "stats": "irbook.stats",
    "compare": "irbook.compare",
    "unjudged": "irbook.unjudged",
    "power": "irbook.power",
    "figures": "irbook.figures",
    "cli": "irbook.cli",
    "entry": "irbook.entry",
    "ppi": "irbook.ppi",
    "ranking": "irbook.ranking",
    "labelling": "irbook.labelling",
    "data": "irbook.data",
    "fastbook": "irbook.course.fastbook",
    "chunking": "irbook.course.chunking",
    "spans": "irbook.spans",
    "search_fulltext": "irbook.course.search.fulltext",
    "search_fusion": "irbook.course.search.fusion",
    "jqara": "irbook.course.jqara",
    "japanese": "irbook.course.japanese",
    "search_dense": "irbook.course.search.dense",
    "search_colbert": "irbook.course.search.colbert",
    "finetune": "irbook.course.finetune",
    "synthetic": "irbook.course.synthetic",
    "noise": "irbook.course.noise",
    "negatives": "irbook.course.negatives",
    "synthetic_eval": "irbook.course.synthetic_eval",
    "training_filters": "irbook.course.training_filters",
    "judges": "irbook.course.judges",
    "part2": "irbook.course.part2",
    "metrics_conventions": "irbook.metrics.conventions",
    "metrics_ranx_compat": "irbook.metrics.ranx_compat",
    "metrics_trec": "irbook.metrics.trec",
    "common": "irbook.course.common",
}
# modules whose parameters are not all documented yet: each is expected to fail, and
# fails this test the day it passes (strict), so that it leaves this list
NOT_YET: set = set()


def _public(module):
    "The public functions and classes `module` defines (its `__all__`)."
    mod = importlib.import_module(module)
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and (
            obj.__module__ == module
        ):
            yield name, obj


def _undocumented(module) -> list:
    "'name' without a docstring, 'name(param)' for each parameter without a docment."
    out = []
    for name, obj in _public(module):
        if not (obj.__doc__ or "").strip():
            out.append(name)
        if inspect.isclass(obj) and "__dataclass_fields__" not in vars(obj):
            continue  # a plain class: its methods are documented where they are shown
        for p, d in docments(obj, full=True, args_kwargs=True).items():
            if p not in ("return", "self") and not d["docment"]:
                out.append(f"{name}({p})")
    return out


@pytest.mark.parametrize(
    "nb",
    [
        pytest.param(nb, marks=pytest.mark.xfail(strict=True, reason="not yet"))
        if nb in NOT_YET
        else nb
        for nb in MODULES
    ],
)
def test_public_names_are_documented(nb):
    missing = _undocumented(MODULES[nb])
    assert not missing, f"{MODULES[nb]}: undocumented: {', '.join(missing)}"


# --- the built site --------------------------------------------------------------

EXPORT = re.compile(r"^\s*#\s?\|\s*exports?\s*$", re.M)
DIRECTIVE = re.compile(r"^\s*#\s?\|")
SHOW_DOC = re.compile(r"^show_doc\((\w[\w.]*)")


def _cells(nb):
    cells = json.loads((ROOT / f"nbs/api/{nb}.ipynb").read_text(encoding="utf-8"))
    for c in cells["cells"]:
        if c["cell_type"] == "code":
            yield "".join(c["source"]), c["metadata"].get("tags", [])


def _first_line(code: str) -> str:
    lines = [ln for ln in code.splitlines() if ln.strip() and not DIRECTIVE.match(ln)]
    return lines[0].strip() if lines else ""


@pytest.mark.skipif(not SITE, reason="site checks run after `make book`")
@pytest.mark.parametrize("nb", list(MODULES))
def test_reference_page_shows_docs_and_folds_source(nb):
    from bs4 import BeautifulSoup

    page = Path(SITE) / f"nbs/api/{nb}.html"
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    folded, shown = set(), set()
    for box in soup.select("div.cell_input"):
        first = _first_line(box.get_text())
        details = box.find_parent("details")
        title = details.find("summary").get_text(" ", strip=True) if details else ""
        (folded if title.startswith("Source") else shown).add(first)
    headings = {
        h.get_text(strip=True)
        for out in soup.select("div.cell_output")
        for h in out.find_all(re.compile("^h[1-6]$"))
    }
    for code, tags in _cells(nb):
        if {"remove-cell", "remove-input"} & set(tags):
            continue
        if EXPORT.search(code) and _first_line(code):
            assert _first_line(code) in folded, f"{nb}: not folded: {_first_line(code)}"
        for ln in code.splitlines():
            if m := SHOW_DOC.match(ln.strip()):
                name = m.group(1).rsplit(".", 1)[-1]
                assert any(h.endswith(name) for h in headings), f"{nb}: no doc: {name}"
