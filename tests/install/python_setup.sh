#!/usr/bin/env bash
# The README's Python path: python/setup.py (what `pip install ./python`
# runs) builds the package against the build tree's libtact.so, and the
# result imports and computes from a folder of its own.  Usage:
# python_setup.sh SOURCE_DIR BUILD_DIR PYTHON
set -eu
src=$1 build=$2 py=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src/python"
TACT_PREFIX="$build" "$py" setup.py -q build --build-base "$tmp/b" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
lib=$(ls -d "$tmp"/b/lib*)
cd "$tmp"
PYTHONPATH="$lib" "$py" -c '
import tact
from tact import Tensor
assert tact.__file__.startswith("'"$lib"'"), tact.__file__
x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
(x @ x).sum().backward()
assert x.grad.tolist() == [[7.0, 11.0], [9.0, 13.0]], x.grad.tolist()
print("setup.py build: ok,", tact.__file__)
'
