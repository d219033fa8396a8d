"""Start-up of `irbook eval` on a 100-line run (issue 27: at most 0.4 s here).

Each command runs in a fresh process, interleaved with the floor it cannot go below
(`python -c "import numpy"` in the same environment), so that load on the machine moves
both alike. Give one or more console scripts: the editable install of the checkout and
a wheel installed in a fresh venv (pip compiles its bytecode; an editable install under
PYTHONDONTWRITEBYTECODE=1 compiles irbook's modules on every run).

    python bench/latency.py --irbook .venv/bin/irbook /tmp/venv/bin/irbook --record
"""

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def small_files(folder: Path) -> tuple:
    "A qrels file of 10 queries and a 100-line run (10 results each)."
    rng = random.Random(0)
    q = [f"q{i} 0 d{d} {rng.randint(0, 2)}\n" for i in range(10) for d in range(10)]
    r = [
        f"q{i} Q0 d{d} {k + 1} {10 - k}.5 run\n"
        for i in range(10)
        for k, d in enumerate(rng.sample(range(15), 10))
    ]
    (folder / "qrels").write_text("".join(q))
    (folder / "run").write_text("".join(r))
    return folder / "qrels", folder / "run"


def wall(cmd: list, cwd: Path) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, cwd=cwd)
    if r.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed: {r.stderr.decode()}")
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--irbook", nargs="+", required=True, help="console scripts")
    p.add_argument("--labels", nargs="+", help="a name for each console script")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--record", action="store_true", help="write results/latency.json")
    a = p.parse_args()
    labels = a.labels or a.irbook
    if len(labels) != len(a.irbook):
        raise SystemExit("give one label per console script")
    with tempfile.TemporaryDirectory() as tmp:
        q, r = small_files(Path(tmp))
        cmds = {}
        for label, exe in zip(labels, a.irbook):
            py = str(Path(exe).with_name("python"))
            cmds[label, "numpy"] = [py, "-c", "import numpy"]
            cmds[label, "irbook"] = [exe, "eval", q, r, "-m", "map"]
        times = {k: [] for k in cmds}
        for _ in range(a.reps):  # interleaved: load moves every command alike
            for k, c in cmds.items():
                times[k].append(wall(c, Path(tmp)))
    rows = []
    for label in labels:
        ib, np_ = times[label, "irbook"], times[label, "numpy"]
        rows.append(
            {
                "install": label,
                "irbook eval median s": round(statistics.median(ib), 3),
                "irbook eval min s": round(min(ib), 3),
                "import numpy median s": round(statistics.median(np_), 3),
            }
        )
        print(rows[-1])
    if a.record:
        load = Path("/proc/loadavg").read_text().split()[:3]
        rec = {"reps": a.reps, "target_s": 0.4, "load average": load, "rows": rows}
        (HERE / "results" / "latency.json").write_text(json.dumps(rec, indent=1) + "\n")


if __name__ == "__main__":
    main()
