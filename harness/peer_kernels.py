"""The peers of `tact bench kernels` that are not C: `peer_kernels.py KERNEL
THREADS` times one kernel with PyTorch when installed (with the given thread
count), NumPy otherwise, and prints "<best seconds> <peer-and-version>", or
nothing when neither is there.  NumPy runs on one thread whatever the
count; the name says so.
  softmax  the rows of a 4096x4096 float32 matrix
  gather   every row of a 60000x784 float32 table in a shuffled order (an
           epoch's shuffle): PyTorch's index_select, NumPy's take
  embedding_grad
           the gradient of 128 rows (a fixed random pick) of that table into a
           fresh dense gradient: PyTorch's embedding backward, NumPy's
           zeros and add.at
  matmul_float16, matmul_bfloat16
           1024x1024 times 1024x1024 in that dtype (NumPy: float16 only)"""
import sys
import time

kernel = sys.argv[1] if len(sys.argv) > 1 else "softmax"
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
R, C = 60000, 784


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
    if kernel == "softmax":
        x = torch.rand(4096, 4096) - 0.5
        print(best(lambda: torch.softmax(x, dim=1)), f"PyTorch-{torch.__version__}")
    elif kernel.startswith("matmul_"):
        dt = getattr(torch, kernel[len("matmul_"):])
        a, b = (torch.rand(1024, 1024) - 0.5).to(dt), (torch.rand(1024, 1024) - 0.5).to(dt)
        print(best(lambda: torch.matmul(a, b), 2), f"PyTorch-{torch.__version__}-matmul")
    elif kernel == "embedding_grad":
        table = (torch.rand(R, C) - 0.5).requires_grad_()
        words = torch.randint(0, R, (128,), generator=torch.Generator().manual_seed(11))
        g = torch.rand(128, C) - 0.5

        def emb_grad():
            table.grad = None
            torch.nn.functional.embedding(words, table).backward(g)

        print(best(emb_grad), f"PyTorch-{torch.__version__}-embedding-backward")
    else:
        table = torch.rand(R, C) - 0.5
        order = torch.randperm(R, generator=torch.Generator().manual_seed(7))
        print(best(lambda: torch.index_select(table, 0, order)), f"PyTorch-{torch.__version__}-index_select")
except ImportError:
    try:
        import numpy as np

        rng = np.random.default_rng(7)
        if kernel == "softmax":
            x = (rng.random((4096, 4096), dtype=np.float32) - 0.5).astype(np.float32)

            def softmax():
                e = np.exp(x - x.max(axis=1, keepdims=True))
                return e / e.sum(axis=1, keepdims=True)

            print(best(softmax), f"NumPy-{np.__version__}(one-thread)")
        elif kernel == "matmul_float16":
            a = (rng.random((1024, 1024), dtype=np.float32) - 0.5).astype(np.float16)
            b = (rng.random((1024, 1024), dtype=np.float32) - 0.5).astype(np.float16)
            print(best(lambda: a @ b, 1), f"NumPy-{np.__version__}-float16(one-thread)")
        elif kernel.startswith("matmul_"):
            pass  # NumPy has no bfloat16
        elif kernel == "embedding_grad":
            words = rng.integers(0, R, 128)
            g = (rng.random((128, C), dtype=np.float32) - 0.5).astype(np.float32)

            def emb_grad():
                d = np.zeros((R, C), dtype=np.float32)
                np.add.at(d, words, g)
                return d

            print(best(emb_grad), f"NumPy-{np.__version__}-add.at(one-thread)")
        else:
            table = (rng.random((R, C), dtype=np.float32) - 0.5).astype(np.float32)
            order = rng.permutation(R)
            print(best(lambda: np.take(table, order, axis=0)), f"NumPy-{np.__version__}-take(one-thread)")
    except ImportError:
        pass
