"""Fashion-MNIST with tact from Python: the CNN of `tact train` (conv, batch
norm, relu, max pool twice, then linear; Adam at 0.002 annealed to 1/50 on a
cosine), written against the reference's API (tinygrad 0.9.2) on tact.

    python3 examples/python/fashion_cnn.py [--epochs 3] [--steps N] [--data DIR]

prints the test accuracy (90.63% in 34.6 s on 2 Zen 3 cores; `tact train`: 90.66%)."""
import argparse
import gzip
import math
import os
import time

import numpy as np

from tact import Tensor, nn
from tact.nn.state import get_parameters

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's pixels, as tact train normalizes them


def idx(path):
    """A gzipped IDX file of uint8 (images n x 28 x 28, or labels n)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of uint8")
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * dims)
    if data.size != math.prod(shape):
        raise ValueError(f"{path}: {data.size} bytes for shape {shape}")
    return data.reshape(shape)


class CNN:
    def __init__(self):
        self.conv1, self.bn1 = nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def __call__(self, x):
        x = self.bn1(self.conv1(x)).relu().max_pool2d()
        x = self.bn2(self.conv2(x)).relu().max_pool2d()
        return self.fc(x.flatten(1))


def images(px):
    return Tensor(((px.astype(np.float32) / 255.0 - MEAN) / STD).reshape(-1, 1, 28, 28))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: every epoch)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    xs, ys = idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")), idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
    xt, yt = idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")), idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz"))
    Tensor.manual_seed(a.seed)
    model = CNN()
    opt = nn.optim.Adam(get_parameters(model), lr=a.lr)
    rng = np.random.default_rng(a.seed)
    per_epoch = len(xs) // a.batch
    total = a.steps or per_epoch * a.epochs
    step, t0 = 0, time.perf_counter()
    Tensor.training = True
    while step < total:
        order = rng.permutation(len(xs))
        for b in range(per_epoch):
            if step >= total:
                break
            if step % 10 == 0:  # cosine annealing to 1/50 of the rate
                opt.lr = a.lr / 50 + (a.lr - a.lr / 50) * 0.5 * (1 + math.cos(math.pi * step / total))
            pick = order[b * a.batch : (b + 1) * a.batch]
            loss = model(images(xs[pick])).sparse_categorical_crossentropy(Tensor(ys[pick].astype(np.int32)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 100 == 0 or step == total:
                print(f"step {step}/{total} loss {loss.item():.4f} {step / (time.perf_counter() - t0):.1f} steps/s", flush=True)
    Tensor.training = False
    right = 0
    for i in range(0, len(xt), 1000):
        right += int((model(images(xt[i : i + 1000])).argmax(axis=1) == Tensor(yt[i : i + 1000].astype(np.int32))).sum().item())
    print(f"test accuracy {100 * right / len(xt):.2f}% ({len(xt)} images); {step} steps in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
