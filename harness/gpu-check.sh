#!/usr/bin/env bash
# gpu-check.sh - the prepared GPU check: on a machine with an NVIDIA GPU, a CUDA
# 13 driver and PyTorch, but none of tact's Debian packages and no network, it
# runs what gpu-pack/ holds (make it here first: bash harness/gpu-pack.sh):
#   1. tact devices and nvidia-smi;
#   2. the op suite on CUDA with guards around every buffer (TACT_DEVICE=CUDA
#      TACT_CHECK_BOUNDS=1), and test_cuda's GPU tests (ops against double
#      loops, a matmul sharded over CUDA,CPU);
#   3. the Fashion-MNIST CNN for one epoch on CUDA (tact train);
#   4. tact bench cuda (against PyTorch on the same GPU).
# Each step has a time limit; the whole is at most 6 minutes.  Results go to
# $OUT (default /tmp/tact-gpu-check): one file per step and summary.txt.
# With the device tool:  run(command="bash harness/gpu-check.sh", carry=["gpu-pack"])
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
pack=${PACK:-$root/gpu-pack}
out=${OUT:-/tmp/tact-gpu-check}
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
[ -x "$pack/bin/tact" ] || { say "gpu-check: no $pack/bin/tact (run harness/gpu-pack.sh where tact builds, and carry gpu-pack)"; exit 1; }
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TACT_CACHE_DIR="$out/cache"
# NVRTC: TACT_NVRTC, the loader's, or the one PyTorch's CUDA wheels brought.
if [ -z "${TACT_NVRTC:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc.so.1[23]'; then
  for py in python3 /usr/bin/python3; do
    sp=$("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null) || continue
    f=$(find $sp /usr/local/cuda*/lib64 -name 'libnvrtc.so.1[23]*' ! -name '*alt*' 2>/dev/null | sort -r | head -1)
    [ -n "$f" ] && { export TACT_NVRTC="$f"; break; }
  done
fi
say "gpu-check: $(date -u +%FT%TZ) on $(hostname); NVRTC ${TACT_NVRTC:-(from the loader path)}"
command -v cc >/dev/null || say "gpu-check: no C compiler here: CPU kernels (the CPU half of the sharded matmul) will fail"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
timeout 60 "$pack/bin/tact" devices > "$out/devices.txt" 2>&1
say "devices: $(grep -c '^CUDA' "$out/devices.txt") CUDA ($(grep '^CUDA' "$out/devices.txt" | head -1 | cut -c1-80))"
if ! grep -q '^CUDA' "$out/devices.txt"; then
  say "gpu-check: tact sees no CUDA device:"; TACT_DEVICE=CUDA "$pack/bin/tact" demo 2>&1 | tail -2 | tee -a "$summary"; exit 1
fi

# 2. The op suite on CUDA: 3 minutes in all.
fails=0
for t in test_unary test_reduce test_movement test_nn test_index test_rand test_misc test_ops test_dtype test_view test_grad_api; do
  TACT_DEVICE=CUDA TACT_CHECK_BOUNDS=1 timeout 40 "$pack/bin/$t" --jobs 4 > "$out/$t.txt" 2>&1
  rc=$?
  line=$(grep 'Synthesis' "$out/$t.txt" | tail -1 | sed 's/.*Synthesis: //')
  [ $rc -eq 0 ] || fails=$((fails + 1))
  say "op suite $t: rc=$rc ${line:-(no summary; see $t.txt)}"
done
timeout 60 "$pack/bin/test_cuda" --filter 'cuda/gpu_*' --jobs 1 > "$out/test_cuda.txt" 2>&1
say "test_cuda (GPU tests): rc=$? $(grep 'Synthesis' "$out/test_cuda.txt" | sed 's/.*Synthesis: //')"

# 3. One epoch of the CNN on CUDA.
timeout 120 "$pack/bin/tact" train --model cnn --epochs 1 --devices CUDA --data "$pack/data" --out "$out/cnn.safetensors" > "$out/train.txt" 2>&1
say "train cnn 1 epoch on CUDA: rc=$? $(grep 'test accuracy' "$out/train.txt" | tail -1)"

# 4. The benchmarks.
timeout 100 "$pack/bin/tact" bench cuda --quick > "$out/bench.jsonl" 2> "$out/bench.err"
say "bench cuda: rc=$?"
cat "$out/bench.jsonl" | tee -a "$summary"
say "gpu-check: done; op-suite binaries failing: $fails"
