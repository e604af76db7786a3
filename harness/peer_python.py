"""`tact bench python`'s Python side: `peer_python.py N` times N lazy ops
(`y = x + 1.0` on a 16-element tensor, nothing realized) with tact's
package (on PYTHONPATH) and with tinygrad (0.14 from `make peers`), and
prints "<tact us/op> <tinygrad us/op> tinygrad-<version>" (0 and "none"
for one that does not import)."""
import os
import sys
import time

os.environ.setdefault("DEV", "CPU")  # tinygrad: the host, whatever else it finds
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000


def per_op(Tensor):
    x = Tensor.ones(16)
    best = 1e30
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            y = x + 1.0  # noqa: F841
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


try:
    import tact

    mine = per_op(tact.Tensor)
except ImportError:
    mine = 0.0
try:
    from importlib.metadata import version

    from tinygrad import Tensor as TinyTensor

    peer, name = per_op(TinyTensor), f"tinygrad-{version('tinygrad')}"
except ImportError:
    peer, name = 0.0, "none"
print(f"{mine:.4f} {peer:.4f} {name}")
