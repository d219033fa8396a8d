"""Which reference-page cells the book build need not execute: hidden unit tests.

A reference page (nbs/api/*.ipynb) renders its exported code, `show_doc` output and
examples; its hidden cells (`#| hide`) are unit tests nobody sees. `make test` runs
cell of those notebooks (tests/test_notebooks.py), so executing them again while the
book is built adds minutes and checks nothing new. Such a cell carries Jupyter's
`skip-execution` tag, which jupyter-book's executor honours and nbdev's ignores.

A hidden cell is skipped only if nothing else can depend on it:
- its notebook is not one that only the book executes (tests/test_notebooks.py HEAVY)
  and it carries no test flag (`#| slow`): those checks run in the book alone;
- it is plain Python (no `!` or `%` lines) of assertions, `test_*` calls, imports,
  assignments to names, loops and function definitions;
- it sets no attribute or item of anything it did not make (no monkeypatching, no
  `os.environ[...]`), decorates nothing and declares nothing global;
- no cell the book still executes after it reads a name it binds.

    python tools/book_skips.py          # list what differs from the notebooks' tags
    python tools/book_skips.py --write  # set the tags (then nbdev_clean)
"""

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = "skip-execution"
DIRECTIVE = re.compile(r"^\s*#\s*\|\s*([\w-]+)(?::\s*(.*))?\s*$")


def _heavy() -> set:
    "Notebooks `make test` leaves to the book (tests/test_notebooks.py HEAVY)."
    tree = ast.parse((ROOT / "tests" / "test_notebooks.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") == "HEAVY"
        ):
            return set(ast.literal_eval(node.value))
    raise SystemExit("tests/test_notebooks.py defines no HEAVY set")


def _flags() -> set:
    "settings.ini's test flags (`#| slow` ...): such cells run in the book only."
    for line in (ROOT / "settings.ini").read_text().splitlines():
        if line.replace(" ", "").startswith("tst_flags="):
            return set(line.split("=", 1)[1].split())
    return set()


def directives(src: str) -> dict:
    "The nbdev directives of a cell's source: {name: value}."
    out = {}
    for line in src.splitlines():
        if m := DIRECTIVE.match(line):
            out[m.group(1)] = (m.group(2) or "").strip()
    return out


def _bound(tree) -> set:
    "Names a cell binds at any depth (assignments, imports, defs, loop targets)."
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


def _stores(node) -> set:
    "Names stored anywhere below `node`."
    return {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _inner(stmt) -> set:
    "Names a statement binds before it reads them: loop, comprehension, `with` and"
    "`except` targets, and the arguments and locals of functions and lambdas."
    names = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.comprehension):
            names |= _stores(n.target)
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            names |= _stores(n.target)
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            names |= _stores(n.optional_vars)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names |= {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
            body = n.body if isinstance(n.body, list) else [n.body]
            names |= set().union(*(_stores(b) for b in body))
    return names


def _free(tree) -> set:
    "Names a cell reads before binding them itself (statement by statement)."
    free, bound = set(), set()
    for stmt in tree.body:
        loads = {
            n.id
            for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        free |= loads - bound - _inner(stmt)
        bound |= _bound(stmt)
    return free


def _root(node):
    "The name an attribute or item expression starts from (`a` of `a.b[c]`)."
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _self_contained(tree) -> bool:
    "True if a cell changes nothing outside the names it binds (see the module doc)."
    local = _bound(tree)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            return False
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if n.decorator_list:
                return False
        targets = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        elif isinstance(n, ast.Delete):
            targets = n.targets
        for t in targets:
            for x in ast.walk(t):
                if isinstance(x, ast.Attribute) and isinstance(
                    x.ctx, (ast.Store, ast.Del)
                ):
                    return False  # an attribute of anything: a patch
                if isinstance(x, ast.Subscript) and isinstance(
                    x.ctx, (ast.Store, ast.Del)
                ):
                    if _root(x) not in local:
                        return False  # an item of something this cell did not make
    for stmt in tree.body:  # calls at the top: tests, or functions of this cell
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            f = stmt.value.func
            name = f.id if isinstance(f, ast.Name) else _root(f)
            if not (name and (name.startswith("test_") or name in local)):
                return False
    return True


def book_skips(nb_path: Path, heavy: set, flags: set) -> list:
    "Indexes of the code cells of a reference notebook that the book need not run."
    cells = json.loads(nb_path.read_text())["cells"]
    if nb_path.parent.name != "api" or nb_path.stem in heavy:
        return []
    skips, later = [], set()  # `later`: names read by cells the book still runs
    for i in reversed(range(len(cells))):
        c = cells[i]
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"])
        d = directives(src)
        runs_anyway = "eval" in d and d["eval"] == "false"
        try:
            tree = ast.parse(src)
        except SyntaxError:  # shell lines or magics: executed
            tree = None
        ok = (
            tree is not None
            and "hide" in d
            and not (set(d) & flags)
            and set(d) <= {"hide"}
            and _self_contained(tree)
            and not (_bound(tree) & later)
        )
        if ok:
            skips.append(i)
        elif tree is not None and not runs_anyway:
            later |= _free(tree)
        elif tree is None:
            later |= set(re.findall(r"[A-Za-z_]\w*", src))
    return sorted(skips)


def differences(write: bool = False) -> list:
    "Cells whose `skip-execution` tag differs from `book_skips` (fixed if `write`)."
    heavy, flags, out = _heavy(), _flags(), []
    for p in sorted((ROOT / "nbs").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in p.parts:
            continue
        nb = json.loads(p.read_text())
        want, changed = set(book_skips(p, heavy, flags)), False
        for i, c in enumerate(nb["cells"]):
            if c["cell_type"] != "code":
                continue
            d = directives("".join(c["source"]))
            tags = c.setdefault("metadata", {}).get("tags", [])
            need = i in want or d.get("eval") == "false"
            if need != (SKIP in tags):
                out.append((str(p.relative_to(ROOT)), i, "add" if need else "remove"))
                tags = [t for t in tags if t != SKIP] + ([SKIP] if need else [])
                if tags:
                    c["metadata"]["tags"] = tags
                else:
                    c["metadata"].pop("tags", None)
                changed = True
        if write and changed:
            p.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return out


if __name__ == "__main__":
    diff = differences(write="--write" in sys.argv)
    for path, i, what in diff:
        print(f"{path} cell {i}: {what} {SKIP}")
    if diff and "--write" not in sys.argv:
        sys.exit(1)
