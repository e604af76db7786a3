#!/usr/bin/env python3
"""Peer measurements for `tact bench pipeline`: tinygrad on its CPU (clang) device.

Prints one JSON object with client_overhead_us, first_realize_ms and
cached_realize_ms, measured the way the bench measures tact.  Exits 1 when
tinygrad is not installed (a development-time tool: pip install tinygrad).
"""
import json, os, sys, time

os.environ.setdefault("CLANG", "1")
os.environ["DISABLE_COMPILER_CACHE"] = "1"  # a first realize really compiles
try:
    from tinygrad import Tensor
except ImportError:
    sys.exit(1)

def fma(n):
    a, b, c = Tensor.ones(n).contiguous().realize(), Tensor.ones(n).contiguous().realize(), Tensor.ones(n).contiguous().realize()
    return a, b, c

out = {}
x = Tensor.ones(16).contiguous().realize()
t0 = time.perf_counter()
y = x
for _ in range(10000):
    y = y + 1
out["client_overhead_us"] = (time.perf_counter() - t0) / 10000 * 1e6

a, b, c = fma(1 << 16)
t0 = time.perf_counter()
(a * b + c * 3.5).realize()
out["first_realize_ms"] = (time.perf_counter() - t0) * 1e3
best = 1e30
for _ in range(5):
    t0 = time.perf_counter()
    (a * b + c * 3.5).realize()
    best = min(best, (time.perf_counter() - t0) * 1e3)
out["cached_realize_ms"] = best
try:
    from importlib.metadata import version
    out["version"] = version("tinygrad")
except Exception:
    out["version"] = "?"
print(json.dumps(out))
