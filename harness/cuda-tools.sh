#!/usr/bin/env bash
# Puts NVRTC and ptxas of one CUDA release into .tools/cuda/ (lib/, bin/
# and VERSION), from NVIDIA's PyPI wheels, for the tests that compile kernels
# for NVIDIA GPUs without one (test_cuda).  The library needs neither: the
# CUDA device finds NVRTC on the machine that has the GPU.  Does nothing
# when the folder is complete; prints the folder.
set -eu
version=13.0.88 # NVRTC and ptxas of CUDA 13.0, the lent GPU machines' driver release
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.tools/cuda"
if [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$version" ] && [ -x "$dir/bin/ptxas" ] && [ -e "$dir/lib/libnvrtc.so.13" ]; then
  echo "$dir"; exit 0
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "tact: installing python3-pip to fetch NVRTC and ptxas" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-pip >&2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "tact: fetching NVRTC and ptxas $version from PyPI (nvidia-cuda-nvrtc, nvidia-cuda-nvcc)" >&2
python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d "$tmp" \
  "nvidia-cuda-nvrtc==$version" "nvidia-cuda-nvcc==$version" >&2
rm -rf "$dir.part"
mkdir -p "$tmp/x" "$dir.part/lib" "$dir.part/bin"
for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
cp "$tmp"/x/nvidia/cu13/lib/libnvrtc.so.13 "$tmp"/x/nvidia/cu13/lib/libnvrtc-builtins.so.13.0 "$dir.part/lib/"
cp "$tmp"/x/nvidia/cu13/bin/ptxas "$dir.part/bin/"
chmod +x "$dir.part/bin/ptxas"
echo "$version" > "$dir.part/VERSION"
rm -rf "$dir"
mv "$dir.part" "$dir"
echo "$dir"
