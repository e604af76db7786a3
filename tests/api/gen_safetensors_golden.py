#!/usr/bin/env python3
"""gen_safetensors_golden.py - safetensors both ways for tests/api/test_safetensors.c.

  python3 -m venv /tmp/st && /tmp/st/bin/pip install safetensors numpy
  /tmp/st/bin/python tests/api/gen_safetensors_golden.py            # writes golden.safetensors
  /tmp/st/bin/python tests/api/gen_safetensors_golden.py FILE       # checks a file tact wrote

The golden file (committed) is what the Python package writes; the C test loads it and checks
every value. A file tact writes (test_safetensors.c keeps it at $TACT_KEEP_SAFETENSORS) is read
back here by the Python package and compared with the values the test wrote.
"""
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden.safetensors")


def tensors():
    # The values test_safetensors.c checks (and writes, for the other direction).
    return {
        "weight": np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1,
        "bias": np.array([1.25, -2.5, 3.0], dtype=np.float32),
        "step": np.array(7, dtype=np.int64),
        "mask": np.array([True, False, True, True]),
        "half": np.array([[0.5, -1.0], [65504.0, 0.0]], dtype=np.float16),
        "bytes": np.arange(5, dtype=np.uint8) * 50,
        "empty": np.zeros((0, 3), dtype=np.float64),
        "q\"uote": np.array([-3], dtype=np.int16),
    }


def main():
    if len(sys.argv) > 1:
        got = load_file(sys.argv[1])
        want = tensors()
        assert set(got) == set(want), (sorted(got), sorted(want))
        for k, v in want.items():
            assert got[k].dtype == v.dtype and got[k].shape == v.shape and np.array_equal(got[k], v), k
        print("ok: %s holds the %d tensors, equal" % (sys.argv[1], len(want)))
        return
    save_file(tensors(), GOLDEN, metadata={"format": "np", "note": "tact's golden file"})
    print("wrote", GOLDEN)


if __name__ == "__main__":
    main()
