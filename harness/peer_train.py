"""The peer of `tact bench train`: PyTorch trains the same MLP (784-128-10) and CNN
(conv 1->16 3x3 pad 1, batchnorm, relu, max pool 2; conv 16->32 the same; linear
1568->10) with Adam (lr 0.002) on the same batch of 128, reading the loss every step as
tact's bench does, with the given thread count: the best of 3 windows of STEPS steps.  Prints
"<mlp ms/step> <cnn ms/step> <cnn first step ms> PyTorch-<version>", or nothing
without PyTorch."""
import sys
import time

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit(0)

torch.set_num_threads(threads)
torch.manual_seed(0)
B = 128
x = torch.randn(B, 1, 28, 28)
y = torch.randint(0, 10, (B,))


def run(model, inp):
    opt = torch.optim.Adam(model.parameters(), lr=0.002)
    lossf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(inp), y)
        loss.backward()
        opt.step()
        return loss.item()

    t0 = time.perf_counter()
    step()
    first = (time.perf_counter() - t0) * 1e3
    for _ in range(2):
        step()
    best = float("inf")
    for _ in range(3):  # the best of 3 windows, as tact's bench takes its own
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - t0) / steps * 1e3)
    return best, first


mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
m, _ = run(mlp, x)
c, first = run(cnn, x)
print(f"{m:.4f} {c:.4f} {first:.4f} PyTorch-{torch.__version__}")
