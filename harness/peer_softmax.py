"""The peer of `tact bench kernels`' softmax: rows of a 4096x4096 float32 matrix,
with PyTorch when installed (with the given thread count), NumPy otherwise.
Prints "<best seconds> <peer-and-version>", or nothing when neither is there.
NumPy's ufuncs run on one thread whatever the count; the name says so."""
import sys
import time

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1


def best(fn, reps=3):
    fn()
    t = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


try:
    import torch

    torch.set_num_threads(threads)
    x = torch.rand(4096, 4096) - 0.5
    print(best(lambda: torch.softmax(x, dim=1)), f"PyTorch-{torch.__version__}")
except ImportError:
    try:
        import numpy as np

        x = (np.random.default_rng(7).random((4096, 4096), dtype=np.float32) - 0.5).astype(np.float32)

        def softmax():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        print(best(softmax), f"NumPy-{np.__version__}(one-thread)")
    except ImportError:
        pass
