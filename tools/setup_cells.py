"""Give every chapter a first code cell that sets it up on Colab, Binder, a new machine.

The cell installs irbook from the repository (with what that part of the course
imports) when `import irbook` fails, and does nothing where irbook is installed, as on
the machine that builds the book. It is folded on the site (`hide-input`): a reader of
the page does not need it; a reader who opens the notebook sees it first. Re-running
this script rewrites the cell in place (found by its first line), so the install line
lives here only.

    python tools/setup_cells.py          # list chapters whose setup cell differs
    python tools/setup_cells.py --write  # write them (then nbdev_clean)
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO = "git+https://github.com/irbook/irbook"
FIRST = "# Set-up on Colab, Binder or a fresh machine"
# what `make install` adds with --no-deps (the Makefile's NODEPS): the ColBERT libraries
NODEPS = re.search(r"^NODEPS := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)


def extra(chapter: int) -> str:
    "The extra a chapter needs: Part I the lessons' tools, Parts II-IV the course's."
    return "lessons" if chapter < 10 else "course"


def setup_source(chapter: int) -> str:
    lines = [
        f"{FIRST} (a no-op where irbook is installed):",
        "# installs the library and what this chapter imports, from the repository.",
        "import importlib.util",
        "",
        'if importlib.util.find_spec("irbook") is None:',
        f'    %pip install -q "irbook[{extra(chapter)}] @ {REPO}"',
    ]
    if chapter >= 10:  # in short lines: the page shows 88 columns of code
        pkgs, parts = NODEPS.split(), []
        for name in ("colbert", "more"):
            half = pkgs[: 3 if name == "colbert" else None]
            pkgs = pkgs[len(half) :]
            lines.append(f'    {name} = "{" ".join(half)}"')
            parts.append(f"{{{name}}}")
        lines.append(f"    %pip install -q --no-deps {' '.join(parts)}")
    return "\n".join(lines)


def setup_cell(nb: dict, chapter: int) -> tuple[bool, dict]:
    "(changed?, notebook) with its set-up cell first among the code cells."
    cells, want = nb["cells"], setup_source(chapter)
    for c in cells:
        if c["cell_type"] == "code" and "".join(c["source"]).startswith(FIRST):
            if "".join(c["source"]) == want:
                return False, nb
            c["source"] = want.splitlines(keepends=True)
            return True, nb
    # right under the chapter's title
    at = 1 + next(
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("# ")
    )
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": f"5e7c{chapter:04d}",
        "metadata": {"tags": ["hide-input"]},
        "outputs": [],
        "source": want.splitlines(keepends=True),
    }
    cells.insert(at, cell)
    return True, nb


def main(write: bool) -> int:
    changed = []
    for p in sorted((ROOT / "nbs").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(p.read_text(encoding="utf-8"))
        diff, nb = setup_cell(nb, int(p.name[:2]))
        if diff:
            changed.append(p.name)
            if write:
                p.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    print("\n".join(changed) or "every chapter has its set-up cell")
    return 1 if changed and not write else 0


if __name__ == "__main__":
    sys.exit(main("--write" in sys.argv))
