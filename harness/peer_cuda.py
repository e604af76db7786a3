"""The peer of `tact bench cuda`: PyTorch on the first CUDA GPU.  Prints
"<matmul N^2 float32 ms> <matmul N^2 float16 ms> <copy GB/s> <cnn step ms> PyTorch-<version>-<GPU>",
or nothing without PyTorch or a GPU.  float32 matmuls without TF32 (PyTorch's default), as tact
computes them; the copy's GB/s count its reads and writes of 64M floats; the CNN is
`tact bench train`'s (batch 128, Adam), eager, the best of 3 windows of STEPS steps."""
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit(0)
if not torch.cuda.is_available():
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")


def best_ms(fn, reps=5):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


a = torch.rand(n, n, device=dev) - 0.5
b = torch.rand(n, n, device=dev) - 0.5
mm32 = best_ms(lambda: a @ b)
ah, bh = a.half(), b.half()
mm16 = best_ms(lambda: ah @ bh)
x = torch.rand(64 << 20, device=dev)
y = torch.empty_like(x)
copy = 2 * 4 * x.numel() / best_ms(lambda: y.copy_(x)) * 1e-6

torch.manual_seed(0)
B = 128
inp = torch.randn(B, 1, 28, 28, device=dev)
lab = torch.randint(0, 10, (B,), device=dev)
cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(32 * 7 * 7, 10)).to(dev)
opt = torch.optim.Adam(cnn.parameters(), lr=0.002)
lossf = nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=True)
    loss = lossf(cnn(inp), lab)
    loss.backward()
    opt.step()
    return loss.item()  # read every step, as tact's bench does


for _ in range(3):
    step()
best = float("inf")
for _ in range(3):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    best = min(best, (time.perf_counter() - t0) / steps * 1e3)
name = torch.cuda.get_device_name(0).replace(" ", "_")
print(f"{mm32:.4f} {mm16:.4f} {copy:.2f} {best:.4f} PyTorch-{torch.__version__}-{name}")
