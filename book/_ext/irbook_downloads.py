"""The ".ipynb" download of every page is the notebook a learner wants to open.

sphinx-book-theme's download button links `_sources/<page>.ipynb`, which Sphinx copies
from the source notebook: no outputs, and every hidden check of the chapter. When the
build finishes, each such file is replaced by the *executed* notebook (myst-nb writes it
to `_build/jupyter_execute/`) as `for_download` turns it:

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


def replace_downloads(app, exception):
    "Write the download form of every executed notebook over `_sources/<page>.ipynb`."
    if exception is not None or app.builder.format != "html":
        return
    executed = Path(app.outdir).parent / "jupyter_execute"
    for src in sorted(executed.rglob("*.ipynb")):
        dest = Path(app.outdir) / "_sources" / src.relative_to(executed)
        if dest.is_file():  # only pages whose download button exists
            nb = json.loads(src.read_text(encoding="utf-8"))
            dest.write_text(
                json.dumps(for_download(nb), indent=1, ensure_ascii=False) + "\n",
                encoding="utf-8",
            )


def setup(app):
    app.connect("build-finished", replace_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
