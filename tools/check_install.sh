#!/usr/bin/env bash
# `pip install irbook` as a library user does it: build the wheel, install it into a fresh venv with only its
# declared dependencies (no requirements.txt, no course), run `irbook eval` on small files (scores, a
# comparison, --power, --format md), import every evaluator module; then add the [dask] extra and run
# `--engine dask`. Records the fresh venv's size (du of the venv and of its site-packages) and its package
# count, and fails above LIMIT_MB (440: half of the 880 MB the install took with scipy, ranx and
# matplotlib declared). Exits non-zero on the first failure. Usage: tools/check_install.sh [python]
set -euo pipefail
LIMIT_MB=${LIMIT_MB:-440}
cd "$(dirname "$0")/.."
PY=${1:-python3.11}
work=$(mktemp -d "${TMPDIR:-/tmp}/irbook-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PY" -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install -q --upgrade pip wheel
# built from a copy of the tracked files, so the checkout gets no build/ folder
mkdir "$work/src" && git ls-files -z | xargs -0 cp -P --parents -t "$work/src"
"$pip" wheel -q --no-deps -w "$work/dist" "$work/src"
"$pip" install -q "$work"/dist/irbook-*.whl
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
venv_mb=$(du -sm "$work/venv" | cut -f1)
site_mb=$(du -sm "$site" | cut -f1)
# distributions installed, pip, setuptools and wheel left out
count=$("$work/venv/bin/python" -m pip list --format=freeze 2>/dev/null | grep -cvE '^(pip|setuptools|wheel)==')
echo "check_install: pip install irbook: venv ${venv_mb} MB, site-packages ${site_mb} MB, ${count} packages (limit ${LIMIT_MB} MB)"
"$work/venv/bin/python" -m pip list --format=freeze 2>/dev/null | grep -vE '^(pip|setuptools|wheel)==' | tr '\n' ' '; echo
if [ "$venv_mb" -gt "$LIMIT_MB" ]; then
    echo "check_install: FAIL: the install takes ${venv_mb} MB, above ${LIMIT_MB} MB" >&2
    du -sm "$site"/* | sort -n | tail -8 >&2
    exit 1
fi
for heavy in scipy ranx numba llvmlite matplotlib; do
    if "$work/venv/bin/python" -m pip show -q "$heavy" >/dev/null 2>&1; then
        echo "check_install: FAIL: $heavy is installed by pip install irbook" >&2; exit 1
    fi
done
cd "$work"
printf 'q1 0 d1 1\nq1 0 d4 1\nq2 0 d2 2\nq2 0 d7 1\nq3 0 d5 1\n' > qrels.trec
printf 'q1 Q0 d1 1 9.1 a\nq1 Q0 d2 2 7.3 a\nq1 Q0 d4 3 6.0 a\nq2 Q0 d7 1 8.2 a\nq2 Q0 d2 2 8.0 a\nq3 Q0 d5 1 5.1 a\n' > a.trec
printf 'q1 Q0 d4 1 0.9 b\nq1 Q0 d1 2 0.8 b\nq2 Q0 d2 1 0.8 b\nq3 Q0 d9 1 0.7 b\nq3 Q0 d5 2 0.6 b\n' > b.trec
irbook="$work/venv/bin/irbook"
echo "check_install: irbook eval (scores)"; "$irbook" eval qrels.trec a.trec -m ndcg@10 mrr@10
echo "check_install: irbook eval (comparison, --power, md)"
"$irbook" eval qrels.trec a.trec b.trec -m ndcg@10 P_5 recip_rank --test fisher --power --format md
echo "check_install: irbook eval (t-test intervals and p-values, --power; trec and json)"
"$irbook" eval qrels.trec a.trec b.trec -m ndcg@10 recip_rank --power
"$irbook" eval qrels.trec a.trec -m ndcg@10 P_5 --format trec
"$irbook" eval qrels.trec a.trec b.trec -m ndcg@10 --format json >/dev/null
echo "check_install: import every evaluator module"
"$work/venv/bin/python" - <<'PY'
import importlib, sys
import pkgutil
import irbook
# the evaluator is every module outside irbook/course (tests/test_core.py holds the folder boundary)
mods = ["irbook"] + sorted(
    m.name for m in pkgutil.walk_packages(irbook.__path__, "irbook.")
    if not m.name.startswith("irbook.course") and m.name != "irbook._modidx"
)
assert len(mods) > 20, mods
for m in mods:
    importlib.import_module(m)
heavy = sorted({"torch", "sentence_transformers", "transformers", "datasets", "pylate"} & set(sys.modules))
assert not heavy, f"the evaluator imported course dependencies: {heavy}"
print("imported", len(mods), "modules; no course dependency loaded")
from irbook.metrics.registry import ranx_examples
assert len(ranx_examples()) > 10, "the ranx examples are not in the wheel"
from irbook import stats
try:  # an extra left out is named by the error
    stats.ranx_per_query({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ndcg@10"])
    raise SystemExit("ranx_per_query ran without ranx installed")
except ImportError as e:
    msg = str(e)
assert 'pip install "irbook[ranx]"' in msg, msg
print("a missing extra is named:", msg)
PY
echo "check_install: [dask] extra and --engine dask"
"$pip" install -q "$(ls "$work"/dist/irbook-*.whl)[dask]"
"$irbook" eval qrels.trec a.trec b.trec -m ndcg@10 --engine dask
echo "check_install: OK"
