#!/usr/bin/env bash
# Runs tinygrad 0.9.2's own test/test_ops.py, unmodified, against tact:
# the release's source archive from PyPI, its tinygrad/ package deleted, a
# `tinygrad` that is tact (python/compat) in its place, pytest and PyTorch
# from `make peers`' venv (.tools/peers).  Prints the backend first and
# "N passed, N failed" last; skips apart, with their reasons in
# build/test_ops-skips.txt, the failures' first lines in
# build/test_ops-failures.txt.  Needs `make build` (build/python) and
# `make peers`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.tools/peers/bin/python"
[ -x "$py" ] || { echo "test_ops: run make peers first (PyTorch and pytest in .tools/peers)" >&2; exit 2; }
[ -d "$root/build/python/tact" ] || { echo "test_ops: run make build first (build/python/tact)" >&2; exit 2; }
"$py" -c "import pytest" 2>/dev/null || "$py" -m pip install -q "pytest==8.3.5" >&2
src="$root/.tools/tinygrad-0.9.2"
if [ ! -f "$src/test/test_ops.py" ]; then
  tmp=$(mktemp -d)
  "$py" -m pip download -q tinygrad==0.9.2 --no-binary :all: --no-deps -d "$tmp" >&2
  tar xzf "$tmp"/tinygrad-0.9.2.tar.gz -C "$tmp"
  rm -rf "$src" && mv "$tmp/tinygrad-0.9.2" "$src" && rm -rf "$tmp"
fi
rm -rf "$src/tinygrad" # the real package: tests must import ours
export PYTHONPATH="$root/build/python:$root/python/compat"
cd "$src"
echo "backend: tact $("$py" -c 'import tinygrad, tact; assert tinygrad.Tensor is tact.Tensor; print(tact.__file__)')"
out="$root/build/test_ops-report.txt"
"$py" -m pytest test/test_ops.py -q -p no:cacheprovider -rfs >"$out" 2>&1 || true
grep '^SKIPPED' "$out" >"$root/build/test_ops-skips.txt" || true
grep '^FAILED' "$out" >"$root/build/test_ops-failures.txt" || true
tail -1 "$out" | sed 's/=//g'
passed=$(grep -oE '[0-9]+ passed' "$out" | tail -1 | cut -d' ' -f1); failed=$(grep -oE '[0-9]+ failed' "$out" | tail -1 | cut -d' ' -f1)
echo "${passed:-0} passed, ${failed:-0} failed"
