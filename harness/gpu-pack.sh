#!/usr/bin/env bash
# gpu-pack.sh [BUILD] - prepares gpu-pack/, what harness/gpu-check.sh runs on a
# machine with an NVIDIA GPU that has none of tact's Debian packages and no
# network: the tact command, the op suite's test binaries, the shared
# libraries they load (not the C library's, which every machine has), the
# PyTorch peer script and the Fashion-MNIST files.  Built from BUILD (default
# build/, a Release build: make build).  The folder is under 64 MiB, so the
# device tool carries it: run(command="bash harness/gpu-check.sh", carry=["gpu-pack"]).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out="$root/gpu-pack"
suite="test_unary test_reduce test_movement test_nn test_index test_rand test_misc test_ops test_dtype test_view test_grad_api test_cuda"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/data"
for b in tact $suite; do
  [ -x "$build/$b" ] || { echo "gpu-pack: $build/$b is missing (make build first)" >&2; exit 1; }
  cp "$build/$b" "$out/bin/"
done
strip "$out"/bin/* 2>/dev/null || true
cp "$root/harness/peer_cuda.py" "$out/bin/"
# The libraries the binaries load, except the C runtime's (the machine's own).
for b in "$out"/bin/*; do
  [ -x "$b" ] || continue
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libgcc_s.so.*|libstdc++.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
cp /usr/share/datasets/fashion-mnist/*.gz "$out/data/"
echo "gpu-pack: $(du -sh "$out" | cut -f1) in $out"
