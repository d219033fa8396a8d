"""Sphinx glue for the irbook site.

- nbdev's `show_doc` output (our API reference) is Markdown that opens with a horizontal
  rule. Inside a notebook output docutils cannot place a transition and aborts the
  build, so rules that do not sit directly under a section or the document are dropped
  before docutils checks them.
- nbdev directives (`#| export`, `#| hide`, `#| slow`, ...) are instructions to nbdev,
  not lesson code: they are stripped from every rendered code cell.
- A cell that only calls `show_doc(...)` shows its output (the API reference), not its
  input.
- A link to a notebook inside generated prose points at the page it becomes.
- The names a `show_doc` cell documents go into the site's index (genindex.html).
- `#| fig-alt: text` (Quarto's cell option) gives the alt text of the figure the cell
  draws; a cell drawing several figures has one line for each, in order. It holds for
  a `remove-input` cell too: the texts are read from the notebook before its source is
  dropped.
- On a reference page (a notebook under nbs/api/), a cell exported by nbdev
  (`#| export`, `#| exports`) is folded: the reader sees a "Source" toggle and the
  `show_doc` output below it, the API documentation; the source is one click away.
- A folded solution (`hide-cell`, first line `# Exercise N: ...`) shows "Solution to
  exercise N" on its toggle; a chapter's folded set-up cell (tools/setup_cells.py) says
  so on its own.
- static/irbook.css sizes code so that 88 columns fit the article at the default page
  width.
"""

import json
import re
from pathlib import Path

from docutils import nodes
from docutils.transforms import Transform
from sphinx import addnodes

DIRECTIVE = re.compile(r"^\s*#\s?\|")
SHOW_DOC = re.compile(r"^show_doc\(.*\)\s*$")
NB_LINK = re.compile(r"^(?![a-z]+:)[^#]*\.ipynb(#.*)?$")
FIG_ALT = re.compile(r"^\s*#\s?\|\s*fig-alt:\s*(.+?)\s*$")
EXPORT = re.compile(r"^\s*#\s?\|\s*exports?\s*$")
REFERENCE = "nbs/api/"  # docnames of the reference pages start with this
_ALTS: dict = {}  # docname -> {cell index: alt texts}, filled as each notebook is read


def is_exported(code: str) -> bool:
    "True if `code` carries nbdev's `#| export` or `#| exports` directive."
    return any(EXPORT.match(ln) for ln in code.splitlines())


def cell_alts(nb: dict) -> dict:
    "The `#| fig-alt:` texts of notebook `nb`'s code cells, by cell index."
    out = {}
    for i, cell in enumerate(nb.get("cells", [])):
        src = cell.get("source", "")
        code = src if isinstance(src, str) else "".join(src)
        if cell.get("cell_type") == "code" and (alts := fig_alts(code)):
            out[i] = alts
    return out


def fig_alts(code: str) -> list[str]:
    "The `#| fig-alt:` texts of a cell's source, in order."
    return [m.group(1) for ln in code.splitlines() if (m := FIG_ALT.match(ln))]


def strip_directives(code: str) -> str:
    "`code` without its nbdev directive lines (`#| ...`)."
    return "\n".join(ln for ln in code.splitlines() if not DIRECTIVE.match(ln)).strip(
        "\n"
    )


def only_show_doc(code: str) -> bool:
    "True if every non-blank line of `code` is a one-line `show_doc(...)` call."
    lines = [ln.strip() for ln in code.splitlines() if ln.strip()]
    return bool(lines) and all(SHOW_DOC.match(ln) for ln in lines)


class DropNestedTransitions(Transform):
    default_priority = 800  # before docutils' misc.Transitions (830)

    def apply(self, **kwargs):
        for node in list(self.document.findall(nodes.transition)):
            if not isinstance(node.parent, (nodes.document, nodes.section)):
                node.parent.remove(node)


class CleanCellSources(Transform):
    """Strip nbdev directives from cell sources; drop inputs that are empty or only
    show_doc calls; on a reference page, fold the source of exported cells."""

    default_priority = 801

    def apply(self, **kwargs):
        reference = _docname(self.document).startswith(REFERENCE)
        for box in list(self.document.findall(nodes.container)):
            if box.get("nb_element") != "cell_code_source":
                continue
            cell = box.parent
            for block in list(box.findall(nodes.literal_block)):
                if reference and is_exported(block.astext()):
                    fold(cell)
                code = strip_directives(block.astext())
                name_toggle(cell, code)
                if not code.strip() or only_show_doc(code):
                    if code.strip():
                        _index_show_doc(self.document, cell)
                    cell.remove(box)
                    break
                new = nodes.literal_block(code, code, **block.attributes)
                block.replace_self(new)


def fold(cell):
    "Fold `cell`'s source under a toggle \"Source\" (what myst-nb's `hide-input` does)."
    if not cell.get("hide_mode"):
        cell["hide_mode"] = "input"
        cell["classes"].append("tag_hide-input")
    if cell["hide_mode"] == "input":  # a cell tagged hide-input in the notebook too
        cell["prompt_show"], cell["prompt_hide"] = "Source", "Hide source"


EXERCISE = re.compile(r"^# Exercise (\d+):")
SETUP = "# Set-up on Colab"  # tools/setup_cells.py writes it


def name_toggle(cell, code: str):
    "A folded solution or set-up cell says what it holds on its toggle."
    if not cell.get("hide_mode"):
        return
    if m := EXERCISE.match(code):
        cell["prompt_show"] = f"Solution to exercise {m.group(1)}"
        cell["prompt_hide"] = "Hide the solution"
    elif code.startswith(SETUP):
        cell["prompt_show"] = "Set-up for Colab, Binder or a fresh machine"
        cell["prompt_hide"] = "Hide the set-up"


class FigureAlts(Transform):
    """Alt texts from `#| fig-alt:` lines, read from the notebook file as it is read
    (`_read_notebook`), so they hold when the cell's source is not rendered
    (`remove-input`)."""

    default_priority = 803

    def apply(self, **kwargs):
        alts = _ALTS.get(_docname(self.document), {})
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") == "cell_code":
                _set_alts(cell, alts.get(cell.get("cell_index"), []))


class NotebookLinksInOutputs(Transform):
    """A link to a notebook in generated prose (a Markdown output) is not resolved by
    MyST as one in a markdown cell is: point it at the page the notebook becomes."""

    default_priority = 802

    def apply(self, **kwargs):
        for ref in self.document.findall(nodes.reference):
            uri = ref.get("refuri", "")
            if NB_LINK.match(uri):
                ref["refuri"] = re.sub(r"\.ipynb(?=$|#)", ".html", uri, count=1)


def _index_show_doc(document, cell):
    "Put the names a show_doc cell documents into the site's index (genindex.html)."
    for heading in list(cell.findall(nodes.rubric)) + list(cell.findall(nodes.title)):
        name = heading.astext().strip()
        if not name or " " in name:
            continue
        target_id = "api-" + nodes.make_id(name)
        if target_id in document.ids:
            continue
        target = nodes.target("", "", ids=[target_id])
        document.note_explicit_target(target)
        entry = addnodes.index(entries=[("single", name, target_id, "", None)])
        heading.parent.insert(heading.parent.index(heading), [entry, target])


def _set_alts(cell, alts):
    "Give the images of `cell`'s outputs the alt texts `alts`, in order."
    if not alts:
        return
    images = list(cell.findall(nodes.image))
    for image, alt in zip(images, alts):
        image["alt"] = alt


def _docname(document) -> str:
    "The docname of the page `document` is (empty outside a Sphinx build)."
    env = getattr(document.settings, "env", None)
    return env.docname if env else ""


def _read_notebook(app, docname, source):
    "Note a notebook's `#| fig-alt:` texts as it is read (its source is left as is)."
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    try:
        _ALTS[docname] = cell_alts(json.loads(source[0]))
    except ValueError:
        _ALTS.pop(docname, None)


def _add_static(app):
    "Serve this extension's stylesheet (static/irbook.css) with the site."
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


def setup(app):
    app.add_transform(DropNestedTransitions)
    app.add_transform(CleanCellSources)
    app.add_transform(FigureAlts)
    app.add_transform(NotebookLinksInOutputs)
    app.connect("source-read", _read_notebook)
    app.connect("builder-inited", _add_static)
    app.add_css_file("irbook.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
