"""Faults and dialects of `irbook eval`, each run as a subprocess on temporary files:
prints a Markdown table of the command, its exit status and its first stderr line.

The `irbook` run is the console script as pip writes it from pyproject.toml
(`irbook.entry:command`), on this checkout's code.

Run: python tools/fault_table.py  (about a minute)
"""

import bz2
import gzip
import lzma
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d4 2\nq2 0 d3 1\nq3 0 d5 1\nq3 0 d6 1\n"
RUN_A = (
    "q1 Q0 d1 1 2.0 tagA\nq1 Q0 d2 2 1.0 tagA\nq2 Q0 d3 1 1.0 tagA\nq3 Q0 d6 1 3 tagA\n"
)
RUN_B = (
    "q1 Q0 d2 1 2.0 tagB\nq1 Q0 d4 2 1.0 tagB\nq2 Q0 d9 1 1.0 tagB\nq3 Q0 d5 1 3 tagB\n"
)

# (command, what it shows); $IRBOOK_SLOW_START marks the start-up case
CASES = [
    ("irbook --version", "version"),
    ("irbook eval q a -m ndcg@10", "the default path"),
    ("irbook eval q a b", "the default measures, a comparison"),
    ("irbook eval q a -m map map P_10", "a measure named twice"),
    ("irbook eval q a -m map -m P.10", "trec_eval's repeated -m"),
    ("irbook eval q a -m official map", "a set and a member"),
    ("irbook eval q a -m P.5", "trec_eval's -m spelling"),
    ("irbook eval q a -m P.5,10", "trec_eval's list"),
    ("irbook eval q a -m ndcg_cut.10", "trec_eval's cut"),
    ("irbook eval q a -m recall.100,1000", "trec_eval's list"),
    ("irbook eval q a -m success.10", "trec_eval's success"),
    ("irbook eval q a -m all_trec --format csv", "trec_eval's all_trec"),
    ("irbook eval q a -m nDCG@10", "ir_measures"),
    ("irbook eval q a -m P@5", "ir_measures"),
    ("irbook eval q a -m RR", "ir_measures"),
    ("irbook eval q a -m RR@10", "ir_measures"),
    ("irbook eval q a -m AP", "ir_measures"),
    ("irbook eval q a -m AP@100", "ir_measures"),
    ("irbook eval q a -m R@100", "ir_measures"),
    ("irbook eval q a -m Judged@10", "ir_measures"),
    ("irbook eval q a -m Bpref", "ir_measures"),
    ("irbook eval q a -m Success@10", "ir_measures"),
    ("irbook eval q a -m NumRet", "ir_measures"),
    ("irbook eval q a -m 'P(rel=2)@5'", "ir_measures"),
    ("irbook eval q a -m 'RBP(p=0.8)'", "ir_measures"),
    ("irbook eval q a -m SetF", "ir_measures"),
    ("irbook eval q a -m IPrec@0.5", "ir_measures"),
    ("irbook eval q a -m ERR@10", "ir_measures"),
    ("irbook eval q a -m nosuch", "a refused name"),
    ("irbook eval q a -m ndcg@x", "a refused cut-off"),
    ("irbook eval q - -m map < a", "- as standard input"),
    ("irbook eval - - -m map < a", "standard input twice"),
    ("irbook eval q <(cat a) -m map", "a pipe"),
    ("irbook eval q <(cat a) -m map --memory 0", "a pipe, whole"),
    (
        "irbook eval q <(cat a) -m map --format trec --convention trec_eval",
        "a pipe's tag",
    ),
    ("irbook eval q a.gz -m map", ".gz"),
    ("irbook eval q a.bz2 -m map", ".bz2"),
    ("irbook eval q a.xz -m map", ".xz"),
    ("irbook eval q a.zst -m map", ".zst"),
    ("irbook eval q cut.gz -m map", "a .gz cut short"),
    ("irbook eval q a -m map >&-", "stdout closed"),
    ("irbook eval q a -m map >/dev/full", "stdout full"),
    ("irbook eval bq br -m map -q | head -1 >/dev/null", "reader leaves early"),
    ("irbook eval q missing -m map 2>&-", "stderr closed (error lost)"),
    ("irbook eval bq br -m map --memory 1 & (SIGINT mid-run)", "SIGINT"),
    ("irbook eval bq br -m map --memory 1 & (SIGTERM mid-run)", "SIGTERM"),
    ("irbook eval q a -m map & (SIGINT during start-up)", "SIGINT at start"),
    ("irbook eval q a -m map --memory 99999999999999999999", "huge --memory"),
    ("irbook eval q a -m map --memory -1", "negative --memory"),
    ("irbook eval q a -m map --memory lots", "not a number"),
    ("irbook eval missing a -m map", "a missing file"),
    ("irbook eval q . -m map", "a folder"),
    ("irbook eval q five -m map", "a line of 5 fields"),
    ("irbook eval q latin1 -m map", "not UTF-8"),
    ("irbook eval q a b --alpha 1.5", "--alpha out of range"),
    ("irbook eval q a --power", "--power with one run"),
    ("irbook eval q a --bounds --format trec", "--bounds in trec_eval's layout"),
    ("irbook eval q a --scheduler sync", "--scheduler without dask"),
    ("irbook eval q a b -q", "-q with two runs"),
    ("irbook eval q a b --baseline c", "an unknown baseline"),
    ("irbook eval q a -m map --format trec", "trec_eval's layout, ranx's numbers"),
    ("irbook eval q a b --test bootstrap", "the bootstrap at 3 queries"),
    ("irbook measures | head -1", "the measures"),
    ("irbook plan q a b -m map --diff 0.1", "irbook plan"),
]


def setup(d: Path):
    "The files the commands name, and an `irbook` console script."
    (d / "q").write_text(QRELS)
    (d / "a").write_text(RUN_A)
    (d / "b").write_text(RUN_B)
    (d / "a.gz").write_bytes(gzip.compress(RUN_A.encode()))
    (d / "a.bz2").write_bytes(bz2.compress(RUN_A.encode()))
    (d / "a.xz").write_bytes(lzma.compress(RUN_A.encode()))
    try:
        import zstandard

        (d / "a.zst").write_bytes(zstandard.ZstdCompressor().compress(RUN_A.encode()))
    except ImportError:
        (d / "a.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 20)
    (d / "cut.gz").write_bytes(gzip.compress(RUN_A.encode() * 50)[:-30])
    (d / "five").write_text("q1 Q0 d1 1 2.0\n")
    (d / "latin1").write_bytes("q1 Q0 caf\xe9 1 2.0 x\n".encode("latin-1"))
    rng = random.Random(0)
    nq, nd = 3000, 100
    (d / "bq").write_text(
        "".join(f"q{i} 0 d{rng.randrange(nd)} {rng.randrange(3)}\n" for i in range(nq))
    )
    lines = [
        f"q{i} Q0 d{j} {j + 1} {nd - j}.5 r\n" for i in range(nq) for j in range(nd)
    ]
    rng.shuffle(lines)  # not grouped: spilled to disk when streamed
    (d / "br").write_text("".join(lines))
    (d / "bin").mkdir()
    script = d / "bin" / "irbook"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom irbook.entry import command\n"
        "sys.exit(command())\n"
    )
    script.chmod(0o755)
    marked = d / "bin" / "irbook-marked"  # the same, with a mark once it has begun
    marked.write_text(
        f"#!{sys.executable}\nimport sys\nfrom irbook.entry import command\n"
        f"open({str(d / 'begun')!r}, 'w').close()\nsys.exit(command())\n"
    )
    marked.chmod(0o755)
    (d / "tmp").mkdir()


def signalled(cmd: str, d: Path, env: dict) -> tuple:
    "(status as the shell shows it, stderr) of `cmd` sent SIGINT or SIGTERM."
    sig = signal.SIGINT if "SIGINT" in cmd else signal.SIGTERM
    args = cmd.split(" & ")[0].split()
    start = "start-up" in cmd
    if start:  # its mark: Python's own start-up (site, .pth files) is over
        args[0] = "irbook-marked"
    args[0] = str(d / "bin" / args[0])
    p = subprocess.Popen(
        args,
        cwd=d,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip  (SIGINT as in a terminal, even if this script's is ignored)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:  # at start-up, or once its spill folder exists
        if (d / "begun").exists() if start else any((d / "tmp").iterdir()):
            break
        time.sleep(0.01)
    time.sleep(0.02 if start else 0.3)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    code = p.returncode
    return (128 - code if code < 0 else code), err.decode()


def run(cmd: str, d: Path) -> tuple:
    "(exit status, first stderr line, files left in TMPDIR) of `cmd` in bash."
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(d / "tmp")}
    env.update(PATH=f"{d / 'bin'}:{env['PATH']}", TQDM_DISABLE="1")
    if "(SIG" in cmd:
        status, stderr = signalled(cmd, d, env)
    else:
        script = f"{cmd}; exit ${{PIPESTATUS[0]}}" if "| head" in cmd else cmd
        r = subprocess.run(
            ["bash", "-c", script], cwd=d, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        status, stderr = r.returncode, r.stderr
    err = [x for x in stderr.splitlines() if x.strip()]
    left = list((d / "tmp").iterdir())
    return status, err[0] if err else "", len(err), left


def main():
    rows = ["| command | exit | stderr lines | first stderr line | what |"]
    rows.append("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="irbook-faults-") as tmp:
        d = Path(tmp)
        setup(d)
        for cmd, what in CASES:
            status, first, n, left = run(cmd, d)
            first = first.replace(str(d), "…").replace("|", "\\|")
            if left:
                first += f" (left in TMPDIR: {len(left)})"
            shown = cmd.replace("|", "\\|")
            rows.append(f"| `{shown}` | {status} | {n} | {first} | {what} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
