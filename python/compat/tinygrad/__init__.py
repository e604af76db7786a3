"""A `tinygrad` that is tact: the names tinygrad 0.9.2's tests import
(python/test_ops.sh runs its test/test_ops.py against tact with it)."""
from tact import Device, Tensor, dtypes  # noqa: F401
from tact.dtype import DType  # noqa: F401

from . import helpers, tensor  # noqa: F401
