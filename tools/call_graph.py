"""How far the command's arguments travel: `irbook eval`'s call graph, measured.

Runs `irbook.cli.main` in this process on a fixed suite of `irbook eval` command
lines (every report kind and output format, on small generated files) under
`sys.setprofile`, and follows the arguments: a function of irbook is a *stay* when
it is entered with one of them as a parameter (the parsed `argparse.Namespace`, any
copy of it, one of its values, or one of the command-line strings; looked into one
level: the items of a list, tuple or dict, the fields of a Namespace). It prints

- stays: the distinct irbook functions so entered,
- modules: the distinct modules they belong to,
- returns: the distinct explicit `return` statements those functions executed.

With `--namespace`, only the functions entered with the parsed `argparse.Namespace`
itself count: where the command's arguments go as a whole (the pipeline), not every
engine function that receives one metric name.

Usage: `python tools/call_graph.py [-v] [--namespace]` (-v: each stay, and stays and
returns by module). The numbers depend on this suite, not on the machine: rerun it to
compare two versions.
"""

import argparse
import ast
import contextlib
import io
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = str(ROOT / "irbook")


def _files(d: Path) -> dict:
    "Small qrels, runs, a judge's qrels and span files in `d`; their paths by name."
    rnd = random.Random(7)
    qs, docs = [f"q{i}" for i in range(12)], [f"d{i}" for i in range(30)]
    qrels = [f"{q} 0 {d} {rnd.randint(0, 2)}" for q in qs for d in rnd.sample(docs, 10)]
    (d / "qrels").write_text("\n".join(qrels) + "\n")
    (d / "judge").write_text(
        "\n".join(f"{q} 0 {x} {rnd.randint(0, 1)}" for q in qs for x in docs) + "\n"
    )
    human = [line for line in qrels if int(line[1:].split()[0]) < 8]
    (d / "human").write_text("\n".join(human) + "\n")
    for name in ("a", "b", "c"):
        lines = [
            f"{q} Q0 {x} {r} {20 - r}.5 {name}"
            for q in qs
            for r, x in enumerate(rnd.sample(docs, 20), 1)
        ]
        (d / f"{name}.run").write_text("\n".join(lines) + "\n")
    layout = [
        f'{{"id": "c{i}", "doc": "doc", "start": {50 * i}, "end": {50 * i + 50}}}'
        for i in range(4)
    ]
    (d / "layout.jsonl").write_text("\n".join(layout) + "\n")
    spans = [
        '{"qid": "q1", "doc": "doc", "start": 10, "end": 30, "group": 0}',
        '{"qid": "q2", "doc": "doc", "start": 120, "end": 140, "group": 0}',
    ]
    (d / "spans.jsonl").write_text("\n".join(spans) + "\n")
    (d / "spans.run").write_text("q1 Q0 c0 1 2 s\nq1 Q0 c1 2 1 s\nq2 Q0 c2 1 1 s\n")
    return {p.name: str(p) for p in d.iterdir()}


def suite(f: dict) -> list:
    "The command lines measured: every report kind and every output format."
    q, a, b, c = f["qrels"], f["a.run"], f["b.run"], f["c.run"]
    m = ["-m", "map", "P_10"]
    out = [["eval", q, a]]  # the defaults
    out += [["eval", q, a, *m, "--format", fmt] for fmt in ("json", "csv", "md")]
    out += [["eval", q, a, b, *m, "--format", fmt] for fmt in ("table", "json", "md")]
    out += [["eval", q, a, b, *m, "--format", "latex"]]
    out += [["eval", q, a, b, *m, "--format", "trec"]]
    out += [["eval", q, a, *m, "--format", "trec", "--convention", "trec_eval"]]
    out += [["eval", q, a, *m, "-q", "--format", "trec", "--convention", "trec_eval"]]
    out += [["eval", q, a, *m, "-q"], ["eval", q, a, *m, "-q", "--format", "json"]]
    out += [["eval", q, a, b, c, *m, "--power"], ["eval", q, a, b, c, *m, "--ranks"]]
    out += [["eval", q, a, b, *m, "--test", "fisher", "--baseline", "b"]]
    out += [["eval", q, a, *m, "-J"], ["eval", q, a, *m, "--memory", "0"]]
    out += [["eval", q, a, b, *m, "--bounds"], ["eval", q, a, "--holes", "5"]]
    out += [["eval", f["human"], a, b, *m, "--judge", f["judge"]]]
    out += [["eval", f["spans.jsonl"], f["spans.run"], "--chunks", f["layout.jsonl"]]]
    out += [["eval", "-m", "map", q, a], ["eval", q, a, "-m", "nosuchmeasure"]]
    return out


def measure(verbose: bool = False, namespace: bool = False) -> dict:
    "Stays, modules and returns of `irbook eval` over `suite` (a dict)."
    from irbook.cli import main

    returns_at = {}  # file -> lines of its return statements

    def is_return(path: str, line: int) -> bool:
        if path not in returns_at:
            tree = ast.parse(Path(path).read_text())
            returns_at[path] = {
                n.lineno for n in ast.walk(tree) if isinstance(n, ast.Return)
            }
        return line in returns_at[path]

    with tempfile.TemporaryDirectory() as tmp:
        f = _files(Path(tmp))
        commands = suite(f)
        strings = {id(s): s for argv in commands for s in argv}  # kept alive
        seen, keep, stays, rets = set(), [], {}, set()

        def tainted(v, depth=0) -> bool:
            if namespace:
                return isinstance(v, argparse.Namespace)
            if id(v) in strings or id(v) in seen:
                return True
            if isinstance(v, argparse.Namespace):
                for x in vars(v).values():
                    if x is not None and not isinstance(x, (bool, int, float)):
                        seen.add(id(x))
                        keep.append(x)
                return True
            if depth == 0 and isinstance(v, (list, tuple)):
                return any(tainted(x, 1) for x in v[:50])
            if depth == 0 and isinstance(v, dict):
                return any(tainted(x, 1) for x in list(v.values())[:50])
            return False

        def prof(frame, event, arg):
            code = frame.f_code
            path = code.co_filename
            if not path.startswith(PKG) or path.endswith("_modidx.py"):
                return
            key = (path, code.co_firstlineno, code.co_name)
            if event == "call":
                n = code.co_argcount + code.co_kwonlyargcount
                n += bool(code.co_flags & 4) + bool(code.co_flags & 8)
                loc = frame.f_locals
                names = code.co_varnames[:n]
                if any(tainted(loc.get(x)) for x in names if x in loc):
                    stays[key] = path
            elif event == "return" and key in stays:
                if is_return(path, frame.f_lineno):
                    rets.add((path, frame.f_lineno))

        for argv in commands:
            sys.setprofile(prof)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    with contextlib.redirect_stderr(io.StringIO()):
                        main(argv)
            finally:
                sys.setprofile(None)
    mods = {os.path.relpath(p, ROOT) for p in stays.values()}
    if verbose:
        for (p, line, name), _ in sorted(stays.items()):
            print(f"{os.path.relpath(p, ROOT)}:{line} {name}", file=sys.stderr)
        for mod in sorted(mods):
            s = sum(os.path.relpath(p, ROOT) == mod for p in stays.values())
            r = sum(os.path.relpath(p, ROOT) == mod for p, _ in rets)
            print(f"{mod}: stays {s}, returns {r}", file=sys.stderr)
    return dict(stays=len(stays), modules=len(mods), returns=len(rets))


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.path.insert(0, str(ROOT))
    r = measure("-v" in sys.argv, "--namespace" in sys.argv)
    print(f"stays {r['stays']}, modules {r['modules']}, returns {r['returns']}")
