"""tact from Python: the reference's Tensor API (tinygrad 0.9.2) over tact's C library.

    from tact import Tensor, dtypes
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x @ x).sum().backward()
    print(x.grad.numpy())

One context per process, opened with its defaults (TACT_DEVICE, every core)
at the first tensor; `tact.open(devices=..., threads=...)` opens it with
others first, `tact.close()` closes it (its tensors become stale).
"""
import atexit
import os

from . import _tact
from ._tact import TactError
from .dtype import DType, dtypes
from .tensor import Tensor
from . import nn  # noqa: E402  (after Tensor: nn uses it)

__all__ = ["Tensor", "dtypes", "DType", "TactError", "Device", "nn", "open", "close", "no_grad"]


def open(devices=None, threads=0, log=None):  # noqa: A001 (the module's own open)
    """Opens the context: devices as tact's URIs ("CPU", "CPU,CL"), threads per CPU device (0: one per core), log a message log's path."""
    _tact.open(devices, threads, log)


def close():
    """Closes the context; tensors made before are stale (using one raises TactError)."""
    _tact.close()


atexit.register(_tact.close)


class Device:
    """The reference's Device: DEFAULT is the default context's first device (TACT_DEVICE's, else CPU)."""

    DEFAULT = (os.environ.get("TACT_DEVICE") or "CPU").split(",")[0].upper()

    @staticmethod
    def canonicalize(device):
        return device.upper() if device else Device.DEFAULT


class no_grad:
    """with tact.no_grad(): ops record no gradient."""

    def __enter__(self):
        self.was = _tact.no_grad(True)

    def __exit__(self, *exc):
        _tact.no_grad(self.was)
        return False
