"""The ".ipynb" download of every page is the notebook a learner wants to open.

sphinx-book-theme's download button links `_sources/<page>.ipynb`, which Sphinx copies
from the source notebook: no outputs, and every hidden check of the chapter. When the
build finishes, each such file is replaced by the *executed* notebook (its outputs from
the jupyter cache the build renders from, else from `_build/jupyter_execute/`) as
`for_download` turns it:

- cells the page removes (`remove-cell`: the chapter's hidden checks) are dropped;
- cells the page folds (`hide-input`, `hide-cell`: solutions, set-up) stay, folded in
  Jupyter too (`metadata.jupyter.source_hidden`);
- nbdev's directive lines (`#| hide`, `#| fig-alt: ...`) are left out of the code;
- outputs stay, so the notebook reads like the page before it is run again.
"""

import copy
import json
import re
from pathlib import Path

DIRECTIVE = re.compile(r"^\s*#\s?\|")


def _source(cell) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


def for_download(nb: dict) -> dict:
    "Executed notebook `nb` as a learner downloads it (see the module's docstring)."
    out = copy.deepcopy(nb)
    cells = []
    for cell in out.get("cells", []):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "remove-cell" in tags:
            continue
        if cell.get("cell_type") == "code":
            lines = _source(cell).splitlines(keepends=True)
            cell["source"] = "".join(ln for ln in lines if not DIRECTIVE.match(ln))
            if tags & {"hide-input", "hide-cell"}:
                jup = cell.setdefault("metadata", {}).setdefault("jupyter", {})
                jup["source_hidden"] = True
                if "hide-cell" in tags:
                    jup["outputs_hidden"] = True
        cells.append(cell)
    out["cells"] = cells
    out.get("metadata", {}).pop("widgets", None)
    return out


def _executed(app, docname: str) -> dict | None:
    "Page `docname`'s notebook with the outputs of its execution, or None."
    import nbformat
    from jupyter_cache import get_cache

    source = Path(app.env.doc2path(docname))
    cache_dir = Path(app.outdir).parent / ".jupyter_cache"
    if cache_dir.is_dir():  # `execute_notebooks: cache`: the outputs are in the cache
        try:
            nb = nbformat.read(source, as_version=4)
            _, merged = get_cache(str(cache_dir)).merge_match_into_notebook(nb)
            return json.loads(nbformat.writes(merged))
        except KeyError:  # not in the cache: executed during the build instead
            pass
    done = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    return json.loads(done.read_text(encoding="utf-8")) if done.is_file() else None


def replace_downloads(app, exception):
    "Write the download form of every executed page over `_sources/<page>.ipynb`."
    if exception is not None or app.builder.format != "html":
        return
    for docname in sorted(app.env.found_docs):
        dest = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
        if dest.is_file() and (nb := _executed(app, docname)) is not None:
            dest.write_text(
                json.dumps(for_download(nb), indent=1, ensure_ascii=False) + "\n",
                encoding="utf-8",
            )


def setup(app):
    app.connect("build-finished", replace_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
