#!/usr/bin/env bash
# `make peers`: the benchmarks' current peers in a project-local venv,
# .tools/peers (PyTorch, NumPy and tinygrad from PyPI),
# which `tact bench` finds by itself (h_peer_open, harness/main.c); without it
# the benches fall back to Debian's python3-torch 1.13 and say so.  Nothing
# of the library needs it.  Does nothing when the venv is complete; prints
# the venv's python.
set -eu
torch=2.15.0 numpy=2.4.6
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.tools/peers"
want="torch==$torch numpy==$numpy"
tinygrad=0.14.0 # bench python's peer: its Python overhead a lazy op
if [ "$(cat "$dir/VERSIONS" 2>/dev/null)" = "$want" ] && [ -x "$dir/bin/python" ]; then
  if [ "$("$dir/bin/python" -c "from importlib.metadata import version; print(version('tinygrad'))" 2>/dev/null)" != "$tinygrad" ]; then
    echo "tact: installing tinygrad==$tinygrad into $dir" >&2
    "$dir/bin/python" -m pip install -q "tinygrad==$tinygrad" >&2
  fi
  echo "$dir/bin/python"; exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1; then
  echo "tact: installing python3-venv for the peers' venv" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
echo "tact: installing $want into $dir (PyPI; a few GB: PyPI's torch brings its CUDA libraries)" >&2
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/python" -m pip install -q --upgrade pip >&2
"$dir/bin/python" -m pip install -q "torch==$torch" "numpy==$numpy" "tinygrad==$tinygrad" >&2
"$dir/bin/python" -c "import torch, numpy; print('tact: peers: PyTorch', torch.__version__, 'NumPy', numpy.__version__)" >&2
echo "$want" > "$dir/VERSIONS"
echo "$dir/bin/python"
