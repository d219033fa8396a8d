"""What a learner can rely on in every chapter, read from the notebooks themselves.

- every question has an answer (a folded "Answers" box right after the questions);
- every exercise has a solution the reader can unfold (a `hide-cell` code cell that
  starts `# Exercise N:`), executed with the chapter;
- no visible cell reads a name that only hidden code defines;
- "chapter N" is always a link to the course's chapter N; the fastbook's chapters are
  "fastbook ch. N";
- a lesson holds no build machinery (test helpers, source-checkout paths).
"""

import ast
import builtins
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "nbs").glob("[0-9][0-9]_*.ipynb"))
HIDDEN = {"remove-cell", "remove-input"}
DIRECTIVE = re.compile(r"^\s*#\s*\|.*$", re.M)


def _cells(nb):
    return json.loads(nb.read_text(encoding="utf-8"))["cells"]


def _src(cell):
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def _tags(cell):
    return set(cell.get("metadata", {}).get("tags", []))


def _items(text):
    "The numbers of a markdown numbered list's top-level items."
    return [int(m) for m in re.findall(r"^(\d+)\.\s", text, re.M)]


def _section(cells, head):
    "Index of the markdown cell holding the level-2 heading `head`."
    for i, c in enumerate(cells):
        if c["cell_type"] == "markdown" and re.search(
            rf"^##\s+{head}\s*$", _src(c), re.M
        ):
            return i
    raise AssertionError(f"no '## {head}' heading")


def _after(text, head):
    "The part of a markdown cell after its `## head` line, up to the next heading."
    part = re.split(rf"^##\s+{head}\s*$", text, flags=re.M)[1]
    return re.split(r"^#{1,2}\s", part, flags=re.M)[0]


ids = [p.stem for p in CHAPTERS]


def test_there_are_chapters():
    assert len(CHAPTERS) >= 26, CHAPTERS


@pytest.mark.parametrize("nb", CHAPTERS, ids=ids)
def test_every_question_has_a_folded_answer(nb):
    cells = _cells(nb)
    i = _section(cells, "Questions")
    questions = _items(_after(_src(cells[i]), "Questions"))
    assert questions == list(range(1, len(questions) + 1)) and questions, questions
    box = _src(cells[i + 1]) if i + 1 < len(cells) else ""
    m = re.search(
        r"^:::\{admonition\} Answers\s*\n:class: dropdown\s*\n(.*?)^:::\s*$",
        box,
        re.M | re.S,
    )
    assert cells[i + 1]["cell_type"] == "markdown" and m, (
        "the cell after the questions must be a folded Answers box "
        "(:::{admonition} Answers / :class: dropdown)"
    )
    answers = _items(m.group(1))
    assert answers == questions, f"{len(questions)} questions, answers {answers}"


@pytest.mark.parametrize("nb", CHAPTERS, ids=ids)
def test_every_exercise_has_a_folded_solution(nb):
    cells = _cells(nb)
    i = _section(cells, "Exercises")
    exercises = _items(_after(_src(cells[i]), "Exercises"))
    assert exercises, "no numbered exercises"
    solved = []
    for c in cells[i + 1 :]:
        if c["cell_type"] != "code" or "hide-cell" not in _tags(c):
            continue
        src = _src(c)
        # the site and the download drop `#|` lines; a shown solution is never
        # `#| hide`, but may be `#| slow` (the tests run it with the slow cells)
        assert not re.search(r"^\s*#\s*\|\s*hide\b", src, re.M), (
            "a shown solution carries no `#| hide`"
        )
        solved += [int(n) for n in re.findall(r"^# Exercise (\d+):", src, re.M)]
    assert sorted(set(solved)) == exercises, (
        f"exercises {exercises}, folded solutions for {sorted(set(solved))}"
    )


class _Names(ast.NodeVisitor):
    "Names a cell binds and names it reads before binding them itself."

    def __init__(self):
        self.bound, self.read = set(), set()

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.bound:
                self.read.add(node.id)
        else:
            self.bound.add(node.id)

    def _bind_args(self, args):
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            self.bound.add(a.arg)
        for a in (args.vararg, args.kwarg):
            if a:
                self.bound.add(a.arg)

    def visit_FunctionDef(self, node):
        self.bound.add(node.name)
        for d in node.decorator_list:
            self.visit(d)
        inner = _Names()
        inner.bound = set(self.bound)
        inner._bind_args(node.args)
        for s in node.body:
            inner.visit(s)
        self.read |= inner.read - self.bound

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        inner = _Names()
        inner.bound = set(self.bound)
        inner._bind_args(node.args)
        inner.visit(node.body)
        self.read |= inner.read - self.bound

    def visit_ClassDef(self, node):
        self.bound.add(node.name)
        self.generic_visit(node)

    def _comp(self, node):
        inner = _Names()
        inner.bound = set(self.bound)
        for g in node.generators:
            inner.visit(g.iter)
            inner.visit(g.target)
            for cond in g.ifs:
                inner.visit(cond)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                inner.visit(getattr(node, part))
        self.read |= inner.read - self.bound

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comp

    def visit_Import(self, node):
        for a in node.names:
            self.bound.add((a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node):
        for a in node.names:
            self.bound.add(a.asname or a.name)

    def visit_ExceptHandler(self, node):
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)


def _python(src):
    "A code cell as Python: magics and shell lines dropped."
    lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _star_names(src):
    "Names `from irbook... import *` brings in."
    import importlib

    names = set()
    for m in re.finditer(r"^from\s+([\w.]+)\s+import\s+\*", src, re.M):
        mod = importlib.import_module(m.group(1))
        names |= set(getattr(mod, "__all__", [n for n in dir(mod) if n[0] != "_"]))
    return names


IPYTHON = {"display", "get_ipython", "In", "Out", "_", "__", "___"}


@pytest.mark.parametrize("nb", CHAPTERS, ids=ids)
def test_no_visible_cell_reads_a_name_only_hidden_code_defines(nb):
    visible_bound, hidden_bound, reads = set(dir(builtins)) | IPYTHON, set(), []
    for c in _cells(nb):
        if c["cell_type"] != "code":
            continue
        src = _src(c)
        try:
            tree = _python(src)
        except SyntaxError:
            continue
        v = _Names()
        v.visit(tree)
        star = _star_names(src)
        code = [ln for ln in DIRECTIVE.sub("", src).splitlines() if ln.strip()]
        if code and all(ln.startswith("show_doc(") for ln in code):
            continue  # the site shows a show_doc cell's output, not its input
        if _tags(c) & HIDDEN:
            hidden_bound |= v.bound | star
        else:
            reads += [(n, src.splitlines()[0][:50]) for n in v.read]
            visible_bound |= v.bound | star
    bad = sorted(
        {(n, where) for n, where in reads if n in hidden_bound - visible_bound}
    )
    assert not bad, f"visible cells read names bound only in hidden cells: {bad[:8]}"


BARE_CHAPTER = re.compile(r"\b[Cc]hapters?\s+(\d+)\b(?!\]\()")


@pytest.mark.parametrize(
    "nb", [ROOT / "nbs/index.ipynb", *CHAPTERS], ids=["index", *ids]
)
def test_chapter_numbers_are_links_and_fastbook_chapters_say_so(nb):
    bad = []
    for c in _cells(nb):
        if c["cell_type"] != "markdown":
            continue
        text = re.sub(r"`[^`]*`", "", _src(c))  # code spans are not prose
        for m in BARE_CHAPTER.finditer(text):
            # "chapter [5](05_x.ipynb)" is the linked form; the number must be a link
            bad.append(text[max(0, m.start() - 30) : m.end() + 10].replace("\n", " "))
    assert not bad, (
        "write the course's chapters as 'chapter [N](NN_x.ipynb)' and the fastbook's "
        f"as 'fastbook ch. N': {bad[:6]}"
    )


MACHINERY = re.compile(
    r"fastcore\.test|nbdev\.showdoc|__file__\)\.parents|DictType\[|"
    r"on this machine|on two cores"
)


@pytest.mark.parametrize("nb", CHAPTERS, ids=ids)
def test_lessons_hold_no_build_machinery(nb):
    bad = []
    for c in _cells(nb):
        if _tags(c) & {"remove-cell"}:
            continue
        src = _src(c)
        if c["cell_type"] == "code" and "hide-cell" in _tags(c):
            continue
        bad += [m.group(0) for m in MACHINERY.finditer(src)]
        for out in c.get("outputs", []):
            bad += [m.group(0) for m in MACHINERY.finditer(json.dumps(out))]
    assert not bad, bad[:6]


# "cells under ~20 lines": a visible cell a reader reads at once; folded solutions and
# set-up, hidden checks and cells that show only their output are not counted
LONGEST_CELL = 25


@pytest.mark.parametrize(
    "nb", [ROOT / "nbs/index.ipynb", *CHAPTERS], ids=["index", *ids]
)
def test_visible_cells_are_short(nb):
    long = []
    for c in _cells(nb):
        folded = {"remove-cell", "remove-input", "hide-cell", "hide-input"}
        if c["cell_type"] != "code" or _tags(c) & folded:
            continue
        lines = [ln for ln in _src(c).splitlines() if not DIRECTIVE.match(ln)]
        if len(lines) > LONGEST_CELL:
            long.append((len(lines), lines[0][:50]))
    assert not long, f"visible cells over {LONGEST_CELL} lines: {long}"
