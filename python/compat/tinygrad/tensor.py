"""tinygrad.tensor's names the tests use."""
from tact import Tensor  # noqa: F401
from tact.dtype import dtypes


def _to_np_dtype(dtype):
    """The NumPy dtype of a tact dtype (None for bfloat16, as the reference's)."""
    import numpy as np

    return None if dtype.np is None else np.dtype(dtype.np).type


__all__ = ["Tensor", "dtypes", "_to_np_dtype"]
