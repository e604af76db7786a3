#!/usr/bin/env python3
"""gen_api_golden.py - writes golden_unary.inc, golden_reduce.inc, golden_movement.inc, golden_nn.inc and golden_index.inc,
PyTorch's answers for the elementwise functions, the reductions and the movement functions of
the tensor API, the reference data of tests/api/test_unary.c, test_reduce.c and
test_movement.c.

Run: /usr/bin/python3 tests/api/gen_api_golden.py (Debian's python3-torch; `pip install torch`
works as well).  Inputs come from a fixed xorshift64* seed (never NumPy's or PyTorch's RNG),
so a rerun with the same PyTorch writes the same file.  Every function is evaluated by
PyTorch in float32 on float32 inputs, as the reference suite compares tinygrad's float32
against torch's (tests/api/test_unary.c states the tolerances).
"""
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

SEED = 0x7AC7
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden_unary.inc")
OUT_REDUCE = os.path.join(HERE, "golden_reduce.inc")
OUT_MOVE = os.path.join(HERE, "golden_movement.inc")
OUT_NN = os.path.join(HERE, "golden_nn.inc")
OUT_INDEX = os.path.join(HERE, "golden_index.inc")
MASK = (1 << 64) - 1


class Rng:
    """xorshift64*, as tests/testutil.c's tu_rand."""

    def __init__(self, seed):
        self.s = seed or 1

    def next(self):
        x = self.s
        x ^= x >> 12
        x ^= (x << 25) & MASK
        x ^= x >> 27
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & MASK

    def uniform(self, lo, hi):
        return lo + (hi - lo) * ((self.next() >> 11) / 9007199254740992.0)


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


# name in tact (tact_<name>), parameters (p0, p1), PyTorch's function, input domain, and
# edge values added to the random ones.
HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.49999997, 0.49999997, 0.0, -3.0, 3.0]
FUNCS = [
    ("exp", (), torch.exp, (-10, 10), [0.0]),
    ("log", (), torch.log, (0.01, 100), [1.0, 0.0, -1.0]),
    ("relu", (), torch.relu, (-3, 3), [0.0, float("nan")]),
    ("sigmoid", (), torch.sigmoid, (-12, 12), [0.0, 40.0, -40.0]),
    ("rsqrt", (), torch.rsqrt, (0.01, 10), [1.0, 4.0]),
    ("cos", (), torch.cos, (-6, 6), [0.0]),
    ("tan", (), torch.tan, (-1.2, 1.2), [0.0]),
    ("trunc", (), torch.trunc, (-100, 100), HALVES),
    ("ceil", (), torch.ceil, (-100, 100), HALVES),
    ("floor", (), torch.floor, (-100, 100), HALVES),
    ("round", (), torch.round, (-100, 100), HALVES),
    ("square", (), torch.square, (-10, 10), [0.0]),
    # PyTorch 1.13's sign(NaN) is 0; tact gives NaN, as NumPy (tact.h's NaN rule).
    ("sign", (), lambda x: torch.where(torch.isnan(x), x, torch.sign(x)), (-3, 3), [0.0, float("nan")]),
    ("abs", (), torch.abs, (-3, 3), [0.0, float("nan")]),
    ("reciprocal", (), torch.reciprocal, (0.1, 10), [-0.5, 2.0]),
    ("elu", (1.0,), lambda x: F.elu(x, 1.0), (-4, 4), [0.0]),
    ("elu", (0.5,), lambda x: F.elu(x, 0.5), (-4, 4), [0.0]),
    ("celu", (1.0,), lambda x: F.celu(x, 1.0), (-4, 4), [0.0]),
    ("celu", (2.5,), lambda x: F.celu(x, 2.5), (-4, 4), [0.0]),
    ("swish", (), F.silu, (-6, 6), [0.0]),
    ("silu", (), F.silu, (-6, 6), [0.0]),
    ("relu6", (), F.relu6, (-3, 9), [0.0, 6.0]),
    ("hardswish", (), F.hardswish, (-5, 5), [-3.0, 3.0, 0.0]),
    ("tanh", (), torch.tanh, (-5, 5), [0.0]),
    ("sinh", (), torch.sinh, (-5, 5), [0.0]),
    ("cosh", (), torch.cosh, (-5, 5), [0.0]),
    ("atanh", (), torch.atanh, (-0.95, 0.95), [0.0]),
    ("asinh", (), torch.asinh, (-5, 5), [0.0]),
    ("acosh", (), torch.acosh, (1.0, 10), [1.0]),
    ("hardtanh", (-1.0, 1.0), lambda x: F.hardtanh(x, -1.0, 1.0), (-3, 3), [-1.0, 1.0]),
    ("hardtanh", (-0.5, 2.0), lambda x: F.hardtanh(x, -0.5, 2.0), (-3, 3), [-0.5, 2.0]),
    ("gelu", (), lambda x: F.gelu(x, approximate="tanh"), (-5, 5), [0.0]),
    ("quick_gelu", (), lambda x: x * torch.sigmoid(x * 1.702), (-5, 5), [0.0]),
    ("leakyrelu", (0.01,), lambda x: F.leaky_relu(x, 0.01), (-3, 3), [0.0]),
    ("leakyrelu", (0.2,), lambda x: F.leaky_relu(x, 0.2), (-3, 3), [0.0]),
    ("mish", (), F.mish, (-5, 5), [0.0]),
    ("softplus", (1.0,), lambda x: F.softplus(x, 1.0, threshold=1e30), (-5, 5), [0.0]),
    ("softplus", (2.0,), lambda x: F.softplus(x, 2.0, threshold=1e30), (-5, 5), [0.0]),
    ("softsign", (), F.softsign, (-5, 5), [0.0]),
]
INT_FUNCS = [
    ("exp", torch.exp, -5, 5), ("log", lambda x: torch.log(x.float()), 1, 50), ("sigmoid", torch.sigmoid, -5, 5),
    ("tanh", torch.tanh, -3, 3), ("reciprocal", torch.reciprocal, 1, 9), ("relu", torch.relu, -9, 9),
    ("abs", torch.abs, -9, 9), ("sign", torch.sign, -9, 9), ("square", torch.square, -99, 99),
    ("trunc", torch.trunc, -9, 9), ("ceil", torch.ceil, -9, 9), ("floor", torch.floor, -9, 9), ("round", lambda x: torch.round(x).float(), -9, 9),  # float32, as tinygrad 0.9.2 (PyTorch: int)
    ("relu6", F.relu6, -9, 12), ("cos", lambda x: torch.cos(x.float()), -6, 6),
]
# Shapes: a scalar, odd sizes, a size 0 dim.
SHAPES = [(), (7,), (3, 5), (2, 0, 3), (4, 9)]


def lit(v):
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return float(v).hex() + "f"


def main():
    rng = Rng(SEED)
    out = ["/* golden_unary.inc - PyTorch %s's answers for tests/api/test_unary.c, generated by gen_api_golden.py: do not edit. */"
           % torch.__version__,
           "#include <math.h>", "#include <stdint.h>", "",
           "typedef struct {",
           "    const char *fn; /* tact_<fn> */",
           "    double p0, p1;  /* its parameters, where it takes any */",
           "    int ndim;",
           "    int64_t shape[3];",
           "    int n;",
           "    const float *x, *want;",
           "    int ints;      /* x holds int32 values (the want's dtype: out_float ? float32 : int32) */",
           "    int out_float;",
           "} golden_unary_t;", ""]
    table = []
    for i, (name, params, fn, (lo, hi), edges) in enumerate(FUNCS):
        for j, shape in enumerate(SHAPES):
            n = math.prod(shape)
            xs = [f32(rng.uniform(lo, hi)) for _ in range(n)]
            if j == 4:  # the largest shape carries the edge values
                xs[:len(edges)] = [f32(e) for e in edges]
            x = torch.tensor(xs, dtype=torch.float32).reshape(shape)
            y = fn(x).to(torch.float32).reshape(-1).tolist()
            tag = "g%d_%d" % (i, j)
            if n:
                out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in xs)))
                out.append("static const float %s_y[] = {%s};" % (tag, ", ".join(lit(v) for v in y)))
            p = list(params) + [0.0] * (2 - len(params))
            dims = list(shape) + [0] * (3 - len(shape))
            table.append('    {"%s", %r, %r, %d, {%s}, %d, %s, %s, 0, 1},' % (
                name, p[0], p[1], len(shape), ", ".join(str(d) for d in dims), n,
                tag + "_x" if n else "NULL", tag + "_y" if n else "NULL"))
    # int32 inputs: what PyTorch gives for ints (floats for exp, log, ...; ints for relu, abs, ...).
    for i, (name, fn, lo, hi) in enumerate(INT_FUNCS):
        xs = [float(int(rng.uniform(lo, hi))) for _ in range(12)]
        x = torch.tensor(xs, dtype=torch.int32).reshape(3, 4)
        y = fn(x)
        tag = "gi%d" % i
        out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in xs)))
        out.append("static const float %s_y[] = {%s};" % (tag, ", ".join(lit(v) for v in y.to(torch.float32).reshape(-1).tolist())))
        table.append('    {"%s", 0.0, 0.0, 2, {3, 4, 0}, 12, %s_x, %s_y, 1, %d},' % (name, tag, tag, int(y.dtype.is_floating_point)))
    out.append("")
    out.append("static const golden_unary_t golden_unary[] = {")
    out += table
    out.append("};")
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT, len(table), "cases", file=sys.stderr)


# Reductions: name, axes (None: all), keepdim, correction (var, std), shape, input domain.
def _axes(a):
    return None if a is None else tuple(a)


REDUCES = []
for shape, axes_list in [((3, 5), [None, [0], [1], [-1], [0, 1]]), ((2, 3, 4), [[1], [0, 2], [-1]]),
                         ((7,), [None, [0]]), ((4, 0), [[1]]), ((), [None])]:
    for axes in axes_list:
        for keep in (0, 1):
            REDUCES.append(("mean", axes, keep, 0, shape, (-3, 3)))
            REDUCES.append(("prod", axes, keep, 0, shape, (0.5, 1.5)))
            if 0 not in shape:  # PyTorch refuses min over an empty dim
                REDUCES.append(("min", axes, keep, 0, shape, (-3, 3)))
                REDUCES.append(("logsumexp", axes, keep, 0, shape, (-5, 5)))
            for corr in (1, 0):
                if 0 not in shape and shape != ():
                    REDUCES.append(("var", axes, keep, corr, shape, (-3, 3)))
                    REDUCES.append(("std", axes, keep, corr, shape, (-3, 3)))
        if axes is not None and len(axes) == 1 and 0 not in shape:
            REDUCES.append(("softmax", axes, 0, 0, shape, (-8, 8)))
            REDUCES.append(("log_softmax", axes, 0, 0, shape, (-8, 8)))


def torch_reduce(name, x, axes, keep, corr):
    dim = tuple(range(x.dim())) if axes is None else tuple(axes)
    if name == "mean":
        return x.mean(dim=dim, keepdim=bool(keep)) if x.dim() else x.clone()
    if name == "prod":  # NumPy: PyTorch's prod takes one dim
        ax = None if axes is None else tuple(axes)
        return torch.from_numpy(np.asarray(np.prod(x.numpy(), axis=ax, keepdims=bool(keep)), dtype=np.float32))
    if name == "min":
        if x.dim() == 0:
            return x.clone()
        return torch.amin(x, dim=dim, keepdim=bool(keep))
    if name == "logsumexp":
        return torch.logsumexp(x, dim=dim, keepdim=bool(keep)) if x.dim() else x.clone()
    if name == "var":
        return torch.var(x, dim=dim, keepdim=bool(keep), correction=corr)
    if name == "std":
        return torch.std(x, dim=dim, keepdim=bool(keep), correction=corr)
    if name == "softmax":
        return torch.softmax(x, dim=axes[0])
    return torch.log_softmax(x, dim=axes[0])


def reduce_main():
    rng = Rng(SEED + 1)
    out = ["/* golden_reduce.inc - PyTorch %s's answers for tests/api/test_reduce.c, generated by gen_api_golden.py: do not edit. */"
           % torch.__version__,
           "#include <math.h>", "#include <stdint.h>", "",
           "typedef struct {",
           "    const char *fn;",
           "    int naxes; /* -1: all axes */",
           "    int axes[3], keepdim;",
           "    double correction;",
           "    int ndim;",
           "    int64_t shape[3];",
           "    int n;",
           "    const float *x;",
           "    int out_ndim;",
           "    int64_t out_shape[3];",
           "    int m;",
           "    const float *want;",
           "} golden_reduce_t;", ""]
    table = []
    for i, (name, axes, keep, corr, shape, (lo, hi)) in enumerate(REDUCES):
        n = math.prod(shape)
        xs = [f32(rng.uniform(lo, hi)) for _ in range(n)]
        x = torch.tensor(xs, dtype=torch.float32).reshape(shape)
        y = torch_reduce(name, x, axes, keep, corr).to(torch.float32)
        ys = y.reshape(-1).tolist()
        tag = "r%d" % i
        if n:
            out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in xs)))
        if len(ys):
            out.append("static const float %s_y[] = {%s};" % (tag, ", ".join(lit(v) for v in ys)))
        ax = list(axes or []) + [0] * (3 - len(axes or []))
        dims = list(shape) + [0] * (3 - len(shape))
        odims = list(y.shape) + [0] * (3 - y.dim())
        table.append('    {"%s", %d, {%s}, %d, %r, %d, {%s}, %d, %s, %d, {%s}, %d, %s},' % (
            name, -1 if axes is None else len(axes), ", ".join(map(str, ax)), keep, float(corr), len(shape),
            ", ".join(map(str, dims)), n, tag + "_x" if n else "NULL", y.dim(), ", ".join(map(str, odims)), len(ys),
            tag + "_y" if len(ys) else "NULL"))
    out.append("")
    out.append("static const golden_reduce_t golden_reduce[] = {")
    out += table
    out.append("};")
    with open(OUT_REDUCE, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT_REDUCE, len(table), "cases", file=sys.stderr)


# Movement: name, int parameters, input shapes (several for cat and stack; gather's second is
# the index, its values drawn below dim's length).  Values are exact: the test compares bits.
MOVES = [
    ("squeeze", [-1], [(1, 3, 1, 2)]), ("squeeze", [1, 0], [(1, 3, 1, 2)]), ("squeeze", [1, 1], [(1, 3, 1, 2)]),
    ("squeeze", [1, -2], [(1, 3, 1, 2)]), ("squeeze", [-1], [()]),
    ("unsqueeze", [0], [(3, 4)]), ("unsqueeze", [2], [(3, 4)]), ("unsqueeze", [-1], [(3, 4)]), ("unsqueeze", [0], [()]),
    ("flatten", [0, -1], [(2, 3, 4)]), ("flatten", [1, 2], [(2, 3, 4)]), ("flatten", [0, 1], [(2, 3, 4)]), ("flatten", [0, -1], [()]),
    ("unflatten", [1, 2, 2, 3], [(4, 6)]), ("unflatten", [-1, 3, 1, 2, 3], [(2, 6)]),
    ("transpose", [1, 0], [(3, 5)]), ("transpose", [0, 2], [(2, 3, 4)]), ("transpose", [-1, -2], [(2, 3, 4)]),
    ("T", [], [(4, 3)]),
    ("repeat", [2, 3], [(2, 3)]), ("repeat", [2, 1, 2], [(3, 2)]), ("repeat", [3], [(4,)]), ("repeat", [2, 0], [(2, 3)]),
    ("repeat_interleave", [2, 0], [(3, 2)]), ("repeat_interleave", [3, 1], [(3, 2)]), ("repeat_interleave", [2, -1], [(2, 2, 3)]),
    ("repeat_interleave_flat", [2], [(2, 3)]),
    ("pad2d", [1, 2], [(3, 4)]), ("pad2d", [1, 2, 0, 1], [(2, 3, 4)]), ("pad2d", [-1, 1, 2, -1], [(3, 4)]),
    ("cat", [0], [(2, 3), (1, 3), (4, 3)]), ("cat", [1], [(2, 3), (2, 1), (2, 2)]), ("cat", [-1], [(2, 2, 1), (2, 2, 3)]),
    ("cat", [0], [(0, 3), (2, 3)]),
    ("stack", [0], [(2, 3), (2, 3), (2, 3)]), ("stack", [1], [(2, 3), (2, 3)]), ("stack", [-1], [(4,), (4,), (4,)]),
    ("split", [0, 3, 1, 3, 2], [(6, 2)]), ("split", [1, 3, 1, 4, 0], [(2, 5)]),
    ("chunk", [0, 3], [(7, 2)]), ("chunk", [1, 2], [(2, 6)]), ("chunk", [0, 6], [(11,)]), ("chunk", [0, 6], [(12,)]),
    ("chunk", [0, 6], [(13,)]),
    ("gather", [0], [(3, 4), (2, 4)]), ("gather", [1], [(3, 4), (3, 2)]), ("gather", [-1], [(2, 3, 5), (2, 3, 7)]),
    ("gather", [1], [(4, 5), (2, 3)]),
]


def torch_move(name, p, xs):
    x = xs[0]
    if name == "squeeze":
        if p[0] == -1 and len(p) == 1:
            return [x.squeeze()]
        y = x
        for d in sorted({(a + x.dim()) % x.dim() for a in p[1:]}, reverse=True):
            y = y.squeeze(d)
        return [y]
    if name == "unsqueeze":
        return [x.unsqueeze(p[0])]
    if name == "flatten":
        return [x.flatten(p[0], p[1]) if x.dim() else x.reshape(1)]
    if name == "unflatten":
        return [x.unflatten(p[0], tuple(p[2:2 + p[1]]))]
    if name == "transpose":
        return [x.transpose(p[0], p[1])]
    if name == "T":
        return [x.T]
    if name == "repeat":
        return [x.repeat(*p)]
    if name == "repeat_interleave":
        return [x.repeat_interleave(p[0], dim=p[1])]
    if name == "repeat_interleave_flat":
        return [x.repeat_interleave(p[0])]
    if name == "pad2d":
        return [F.pad(x, tuple(p), value=0.0)]
    if name == "cat":
        return [torch.cat(xs, dim=p[0])]
    if name == "stack":
        return [torch.stack(xs, dim=p[0])]
    if name == "split":
        return list(torch.split(x, list(p[2:2 + p[1]]), dim=p[0]))
    if name == "chunk":
        return list(torch.chunk(x, p[1], dim=p[0]))
    return [torch.gather(x, p[0], xs[1])]


def move_main():
    rng = Rng(SEED + 2)
    out = ["/* golden_movement.inc - PyTorch %s's answers for tests/api/test_movement.c, generated by gen_api_golden.py: do not edit. */"
           % torch.__version__,
           "#include <stdint.h>", "",
           "typedef struct {",
           "    const char *fn;",
           "    int np;",
           "    int64_t p[8];  /* int parameters as the test's table reads them */",
           "    int nin;",
           "    int ndim[3];",
           "    int64_t shape[3][4];",
           "    const float *x; /* the inputs' elements one after another (gather: the index as floats) */",
           "    int nout;       /* pieces (split, chunk), else 1 */",
           "    int out_ndim;",
           "    int64_t out_shape[8][4];",
           "    int m;",
           "    const float *want; /* the pieces' elements one after another */",
           "} golden_move_t;", ""]
    table = []
    for i, (name, p, shapes) in enumerate(MOVES):
        xs, flat = [], []
        for j, sh in enumerate(shapes):
            n = math.prod(sh)
            if name == "gather" and j == 1:
                lim = shapes[0][p[0] % len(shapes[0])]
                vals = [float(rng.next() % lim) for _ in range(n)]
                xs.append(torch.tensor(vals, dtype=torch.int64).reshape(sh))
            else:
                vals = [f32(round(rng.uniform(-100, 100), 2)) for _ in range(n)]
                xs.append(torch.tensor(vals, dtype=torch.float32).reshape(sh))
            flat += vals
        ys = torch_move(name, p, xs)
        wants = [v for y in ys for v in y.reshape(-1).tolist()]
        tag = "m%d" % i
        out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in flat) or "0"))
        out.append("static const float %s_y[] = {%s};" % (tag, ", ".join(lit(v) for v in wants) or "0"))
        pp = list(p) + [0] * (8 - len(p))
        nd = [len(sh) for sh in shapes] + [0] * (3 - len(shapes))
        shp = ", ".join("{%s}" % ", ".join(str(d) for d in (list(sh) + [0] * (4 - len(sh)))) for sh in shapes + [()] * (3 - len(shapes)))
        oshp = ", ".join("{%s}" % ", ".join(str(d) for d in (list(y.shape) + [0] * (4 - y.dim()))) for y in ys + [torch.zeros(())] * (8 - len(ys)))
        table.append('    {"%s", %d, {%s}, %d, {%s}, {%s}, %s_x, %d, %d, {%s}, %d, %s_y},' % (
            name, len(p), ", ".join(map(str, pp)), len(shapes), ", ".join(map(str, nd)), shp, tag, len(ys), ys[0].dim(), oshp,
            len(wants), tag))
    out.append("")
    out.append("static const golden_move_t golden_move[] = {")
    out += table
    out.append("};")
    with open(OUT_MOVE, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT_MOVE, len(table), "cases", file=sys.stderr)


# nn functions: name, int parameters (the layout test_nn.c reads), input shapes with their
# kinds ('f' floats in [-2, 2], 'p' probabilities, 'b' 0/1 targets, 'iC' ints below C,
# 'l' labels with some -1, 'v' positive variances' inverses, 't' a few values for ties, 'e' integer
# exponents, 'k' a 0/1 attention mask keeping each row's first key), PyTorch's function.
def _conv(x, w, b, p):
    groups, s0, s1, d0, d1, npad = p[:6]
    pads = p[6:10]
    if npad == 4:
        x = F.pad(x, tuple(pads))
        padding = 0
    elif npad == 2:
        padding = (pads[0], pads[1])
    else:
        padding = pads[0] if npad == 1 else 0
    return F.conv2d(x, w, b, stride=(s0 or 1, s1 or 1), padding=padding, dilation=(d0, d1), groups=groups)


def _sdpa(q, k, v, causal):
    """PyTorch 1.13 has no F.scaled_dot_product_attention; its definition, in float64 for reference."""
    q, k, v = q.double(), k.double(), v.double()
    w = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        w = w.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(w, -1) @ v


def W(groups=1, s=(0, 0), d=(1, 1), npad=0, pads=(0, 0, 0, 0), cip=1, k=(2, 2), bias=0):
    return [groups, s[0], s[1], d[0], d[1], npad, *pads, cip, k[0], k[1], bias]


NN = [
    ("conv2d", W(), [((1, 1, 5, 5), "f"), ((1, 1, 3, 3), "f")], lambda x, w: _conv(x, w, None, W())),
    ("conv2d", W(bias=1), [((2, 3, 6, 7), "f"), ((4, 3, 3, 2), "f"), ((4,), "f")], lambda x, w, b: _conv(x, w, b, W())),
    ("conv2d", W(s=(2, 2)), [((2, 2, 7, 7), "f"), ((3, 2, 3, 3), "f")], lambda x, w: _conv(x, w, None, W(s=(2, 2)))),
    ("conv2d", W(d=(2, 1), npad=1, pads=(1, 0, 0, 0)), [((1, 2, 8, 6), "f"), ((2, 2, 3, 3), "f")],
     lambda x, w: _conv(x, w, None, W(d=(2, 1), npad=1, pads=(1, 0, 0, 0)))),
    ("conv2d", W(groups=2, npad=2, pads=(1, 2, 0, 0)), [((2, 4, 5, 5), "f"), ((6, 2, 3, 3), "f")],
     lambda x, w: _conv(x, w, None, W(groups=2, npad=2, pads=(1, 2, 0, 0)))),
    ("conv2d", W(npad=4, pads=(1, 0, 2, 1), bias=1), [((1, 3, 4, 5), "f"), ((2, 3, 2, 2), "f"), ((2,), "f")],
     lambda x, w, b: _conv(x, w, b, W(npad=4, pads=(1, 0, 2, 1)))),
    ("conv2d", W(s=(1, 2), d=(1, 2)), [((1, 1, 9, 9), "f"), ((1, 1, 3, 3), "f")], lambda x, w: _conv(x, w, None, W(s=(1, 2), d=(1, 2)))),
    ("max_pool2d", W(), [((2, 3, 6, 6), "f")], lambda x: F.max_pool2d(x, 2)),
    ("max_pool2d", W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0)), [((1, 2, 7, 8), "f")], lambda x: F.max_pool2d(x, 3, 2, padding=1)),
    ("max_pool2d", W(k=(2, 3), s=(1, 1), d=(2, 1)), [((1, 1, 7, 7), "f")], lambda x: F.max_pool2d(x, (2, 3), 1, dilation=(2, 1))),
    ("avg_pool2d", W(), [((2, 3, 6, 6), "f")], lambda x: F.avg_pool2d(x, 2)),
    ("avg_pool2d", W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0)), [((1, 2, 7, 8), "f")],
     lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=True)),
    ("avg_pool2d", W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0), cip=0), [((1, 2, 7, 8), "f")],
     lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False)),
    ("linear", [0], [((3, 5), "f"), ((5, 4), "f")], lambda x, w: x @ w),
    ("linear", [1], [((2, 3, 5), "f"), ((5, 4), "f"), ((4,), "f")], lambda x, w, b: x @ w + b),
    ("layernorm", [-1, 0, 10000], [((4, 7), "f")], lambda x: F.layer_norm(x, (7,), eps=1e-5)),
    ("layernorm", [-1, 0, 10000], [((2, 3, 9), "f")], lambda x: F.layer_norm(x, (9,), eps=1e-5)),
    ("batchnorm", [1], [((2, 3, 4, 4), "f"), ((3,), "f"), ((3,), "f"), ((3,), "f"), ((3,), "v")],
     lambda x, w, b, m, s: (x - m.reshape(1, 3, 1, 1)) * w.reshape(1, 3, 1, 1) * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)),
    ("one_hot", [5], [((2, 3), "i5")], lambda x: F.one_hot(x.long(), 5).float()),
    ("binary_crossentropy", [], [((3, 4), "p"), ((3, 4), "b")], lambda x, y: F.binary_cross_entropy(x, y)),
    ("binary_crossentropy_logits", [], [((3, 4), "f"), ((3, 4), "b")], lambda x, y: F.binary_cross_entropy_with_logits(x, y)),
    ("sparse_categorical_crossentropy", [-1, 0], [((5, 7), "f"), ((5,), "i7")], lambda x, y: F.cross_entropy(x, y.long())),
    ("sparse_categorical_crossentropy", [-1, 10], [((6, 4), "f"), ((6,), "l4")],
     lambda x, y: F.cross_entropy(x, y.long(), ignore_index=-1, label_smoothing=0.1)),
    ("sparse_categorical_crossentropy", [-1, 0], [((2, 3, 5), "f"), ((2, 3), "i5")],
     lambda x, y: F.cross_entropy(x.reshape(-1, 5), y.reshape(-1).long())),
    # p: axis, keepdim, flat (argmax, argmin); axis (cumsum); diagonal (triu, tril);
    # constant?, exponent * 100 (pow); causal, mask (sdpa: 0 none, 1 float, 2 bool)
    ("argmax", [1, 0, 0], [((3, 7), "t")], lambda x: torch.argmax(x, 1).float()),
    ("argmax", [0, 1, 0], [((3, 7), "t")], lambda x: torch.argmax(x, 0, keepdim=True).float()),
    ("argmax", [0, 0, 1], [((4, 5), "t")], lambda x: torch.argmax(x).float()),
    ("argmin", [-1, 0, 0], [((2, 3, 6), "t")], lambda x: torch.argmin(x, -1).float()),
    ("argmin", [0, 0, 1], [((4, 5), "t")], lambda x: torch.argmin(x).float()),
    ("cumsum", [0], [((7,), "f")], lambda x: torch.cumsum(x, 0)),
    ("cumsum", [1], [((3, 9), "f")], lambda x: torch.cumsum(x, 1)),
    ("cumsum", [-2], [((5, 2, 3), "f")], lambda x: torch.cumsum(x, -2)),
    ("cumsum", [0], [((600,), "f")], lambda x: torch.cumsum(x, 0)),
    ("cumsum", [1], [((2, 1030), "f")], lambda x: torch.cumsum(x, 1)),
    ("triu", [0], [((4, 5), "f")], lambda x: torch.triu(x)),
    ("triu", [1], [((2, 4, 3), "f")], lambda x: torch.triu(x, 1)),
    ("triu", [-2], [((5, 4), "f")], lambda x: torch.triu(x, -2)),
    ("tril", [0], [((4, 5), "f")], lambda x: torch.tril(x)),
    ("tril", [-1], [((2, 4, 3), "f")], lambda x: torch.tril(x, -1)),
    ("tril", [2], [((5, 4), "f")], lambda x: torch.tril(x, 2)),
    ("masked_fill", [], [((3, 4), "f"), ((3, 4), "i2"), ((1,), "f")], lambda x, m, v: x.masked_fill(m.bool(), float(v[0]))),
    ("pow", [1, 200], [((3, 4), "f")], lambda x: x ** 2),
    ("pow", [1, 300], [((3, 4), "f")], lambda x: x ** 3),
    ("pow", [1, 50], [((3, 4), "v")], lambda x: x ** 0.5),
    ("pow", [1, 250], [((3, 4), "v")], lambda x: x ** 2.5),
    ("pow", [1, -100], [((3, 4), "v")], lambda x: x ** -1),
    ("pow", [1, 0], [((3, 4), "f")], lambda x: x ** 0),
    ("pow", [1, 130], [((3, 4), "v")], lambda x: x ** 1.3),
    ("pow", [0], [((3, 4), "v"), ((3, 4), "f")], lambda x, e: x ** e),
    ("pow", [0], [((2, 5), "f"), ((2, 5), "e")], lambda x, e: x ** e),
    # conv_transpose2d: W(...) + output_padding (2)
    ("conv_transpose2d", W() + [0, 0], [((1, 2, 4, 4), "f"), ((2, 3, 3, 3), "f")], lambda x, w: F.conv_transpose2d(x, w)),
    ("conv_transpose2d", W(s=(2, 2), npad=1, pads=(1, 0, 0, 0), bias=1) + [1, 1], [((2, 2, 3, 4), "f"), ((2, 3, 3, 3), "f"), ((3,), "f")],
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d", W(groups=2, d=(2, 1), s=(1, 2)) + [0, 0], [((1, 4, 3, 3), "f"), ((4, 1, 2, 3), "f")],
     lambda x, w: F.conv_transpose2d(x, w, stride=(1, 2), dilation=(2, 1), groups=2)),
    # interpolate: n, align_corners, sizes (n)
    ("interpolate", [2, 0, 5, 7], [((1, 2, 3, 4), "f")], lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False)),
    ("interpolate", [2, 1, 2, 9], [((1, 1, 4, 3), "f")], lambda x: F.interpolate(x, size=(2, 9), mode="bilinear", align_corners=True)),
    ("interpolate", [1, 0, 6], [((2, 3, 4), "f")], lambda x: F.interpolate(x, size=6, mode="linear", align_corners=False)),
    # einsum: the formula's index in test_nn.c's table
    ("einsum", [0], [((3, 4), "f"), ((4, 5), "f")], lambda a, b: torch.einsum("ij,jk->ik", a, b)),
    ("einsum", [1], [((3, 4), "f")], lambda a: torch.einsum("ij->ji", a)),
    ("einsum", [2], [((2, 3, 4), "f"), ((2, 4, 5), "f")], lambda a, b: torch.einsum("bij,bjk->bik", a, b)),
    ("einsum", [3], [((6,), "f"), ((6,), "f")], lambda a, b: torch.einsum("i,i->", a, b).reshape(())),
    ("einsum", [4], [((3, 4), "f"), ((5, 4), "f")], lambda a, b: torch.einsum("ij,kj", a, b)),
    ("einsum", [5], [((2, 3, 4), "f")], lambda a: torch.einsum("abc->cb", a)),
    ("scaled_dot_product_attention", [0], [((2, 4, 8), "f"), ((2, 5, 8), "f"), ((2, 5, 3), "f")], lambda q, k, v: _sdpa(q, k, v, False)),
    ("scaled_dot_product_attention", [1], [((2, 4, 8), "f"), ((2, 4, 8), "f"), ((2, 4, 3), "f")], lambda q, k, v: _sdpa(q, k, v, True)),
]


# More shapes: 1-d and 3-d convolutions and pools, norms over other axes, other label shapes.
NN += [
    ("conv1d", [1, 2, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0], [((2, 3, 9), "f"), ((4, 3, 3), "f")],
     lambda x, w: F.conv1d(x, w, stride=2, padding=1)),
    ("conv3d", [1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1], [((1, 2, 4, 5, 3), "f"), ((3, 2, 2, 3, 2), "f"), ((3,), "f")],
     lambda x, w, b: F.conv3d(x, w, b)),
    ("max_pool1d", [1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 3, 0, 0], [((2, 3, 10), "f")], lambda x: F.max_pool1d(x, 3)),
    ("avg_pool1d", [1, 2, 0, 1, 1, 0, 0, 0, 0, 0, 1, 4, 0, 0], [((1, 2, 11), "f")], lambda x: F.avg_pool1d(x, 4, 2)),
    ("layernorm", [-1, -2, 10000], [((2, 3, 4), "f")], lambda x: F.layer_norm(x, (3, 4), eps=1e-5)),
    ("batchnorm", [-1], [((5, 4), "f"), ((4,), "f"), ((4,), "f"), ((4,), "f"), ((4,), "v")],
     lambda x, w, b, m, s: (x - m) * w * s + b),
    ("one_hot", [4], [((2, 2, 3), "i4")], lambda x: F.one_hot(x.long(), 4).float()),
    ("binary_crossentropy", [], [((7,), "p"), ((7,), "b")], lambda x, y: F.binary_cross_entropy(x, y)),
    ("binary_crossentropy_logits", [], [((2, 3, 2), "f"), ((2, 3, 2), "b")], lambda x, y: F.binary_cross_entropy_with_logits(x, y)),
    ("linear", [0], [((4,), "f"), ((4, 3), "f")], lambda x, w: x @ w),
    ("argmax", [-1, 1, 0], [((2, 3, 5), "t")], lambda x: torch.argmax(x, -1, keepdim=True).float()),
    ("cumsum", [0], [((1,), "f")], lambda x: torch.cumsum(x, 0)),
]

# Binary functions on broadcasting shape pairs (size-0 and scalars included); comparisons as 0/1.
BIN_SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((0, 3), (1, 3)), ((2, 1, 3), (4, 1)), ((7,), ())]
for _a, _b in BIN_SHAPES:
    NN.append(("minimum", [], [(_a, "f"), (_b, "f")], lambda a, b: torch.minimum(a, b)))
    NN.append(("maximum", [], [(_a, "f"), (_b, "f")], lambda a, b: torch.maximum(a, b)))
    NN.append(("eq", [], [(_a, "t"), (_b, "t")], lambda a, b: (a == b).float()))
    NN.append(("lt", [], [(_a, "t"), (_b, "t")], lambda a, b: (a < b).float()))
    NN.append(("ge", [], [(_a, "t"), (_b, "t")], lambda a, b: (a >= b).float()))
    NN.append(("pow", [0], [(_a, "v"), (_b, "f")], lambda a, b: a ** b))
    NN.append(("lerp", [], [(_a, "f"), (_b, "f")], lambda a, b: torch.lerp(a, b, 0.25)))


# Every function with several shapes and options (the issue: broadcasting, size-1 and size-0 dims
# where PyTorch takes them, odd sizes).  Appended last, so the cases above keep their inputs.
def _ln(x, axes, eps):
    """layernorm over any axes, in float64 (F.layer_norm takes only the last ones)."""
    x = x.double()
    y = x - x.mean(axes, keepdim=True)
    return y / torch.sqrt((y * y).mean(axes, keepdim=True) + eps)


def _sdpa_mask(q, k, v, mask):
    """_sdpa with a mask: a float one added, a bool one -inf where false."""
    q, k, v = q.double(), k.double(), v.double()
    w = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = w.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else w + mask.double()
    return torch.softmax(w, -1) @ v


def _avg_pad(x, pads, k, s, cip):
    """avg_pool2d with 4 padding amounts (PyTorch's are symmetric): zeros padded, divided by the
    window's size (count_include_pad) or by its count of real elements."""
    p = F.avg_pool2d(F.pad(x, pads), k, s)
    return p if cip else p / F.avg_pool2d(F.pad(torch.ones_like(x), pads), k, s)


NN += [
    # conv2d: 1-d with dilation, groups, 2 (left, right) amounts and a bias; 1-d kernel 1; 3-d with
    # groups, stride, 1 amount; 3-d with one amount per dim, dilation, bias; depthwise with 4 amounts;
    # 1x1 kernels; a 1x1 output; an empty batch.
    ("conv1d", W(groups=3, d=(2, 1), npad=2, pads=(2, 1, 0, 0), bias=1), [((1, 3, 10), "f"), ((6, 1, 3), "f"), ((6,), "f")],
     lambda x, w, b: F.conv1d(F.pad(x, (2, 1)), w, b, dilation=2, groups=3)),
    ("conv1d", W(s=(2, 0)), [((3, 2, 5), "f"), ((4, 2, 1), "f")], lambda x, w: F.conv1d(x, w, stride=2)),
    ("conv3d", W(groups=2, s=(2, 1), npad=1, pads=(1, 0, 0, 0)), [((1, 4, 5, 4, 3), "f"), ((2, 2, 3, 2, 2), "f")],
     lambda x, w: F.conv3d(x, w, stride=(2, 1, 1), padding=1, groups=2)),
    ("conv3d", W(d=(1, 2), npad=3, pads=(1, 0, 2, 0), bias=1), [((2, 1, 4, 6, 3), "f"), ((3, 1, 2, 2, 3), "f"), ((3,), "f")],
     lambda x, w, b: F.conv3d(x, w, b, padding=(1, 0, 2), dilation=(1, 2, 1))),
    ("conv2d", W(groups=3, s=(2, 3), d=(1, 2), npad=4, pads=(0, 2, 1, 1), bias=1), [((1, 3, 5, 7), "f"), ((3, 1, 3, 3), "f"), ((3,), "f")],
     lambda x, w, b: _conv(x, w, b, W(groups=3, s=(2, 3), d=(1, 2), npad=4, pads=(0, 2, 1, 1)))),
    ("conv2d", W(bias=1), [((3, 5, 3, 1), "f"), ((2, 5, 1, 1), "f"), ((2,), "f")], lambda x, w, b: _conv(x, w, b, W())),
    ("conv2d", W(), [((2, 3, 3, 4), "f"), ((5, 3, 3, 4), "f")], lambda x, w: _conv(x, w, None, W())),
    ("conv2d", W(groups=2, s=(2, 2), d=(2, 2), npad=2, pads=(1, 0, 0, 0), bias=1), [((2, 4, 9, 8), "f"), ((4, 2, 2, 3), "f"), ((4,), "f")],
     lambda x, w, b: _conv(x, w, b, W(groups=2, s=(2, 2), d=(2, 2), npad=2, pads=(1, 0, 0, 0)))),
    ("conv2d", W(bias=1), [((0, 2, 5, 5), "f"), ((3, 2, 3, 3), "f"), ((3,), "f")], lambda x, w, b: _conv(x, w, b, W())),
    # conv_transpose2d: one padding per dim with a bias; groups with stride 3 and output_padding;
    # stride, dilation, padding and output_padding together; 1-d and 3-d; a 1x1 kernel.
    ("conv_transpose2d", W(s=(2, 1), npad=2, pads=(1, 0, 0, 0), bias=1) + [0, 0], [((1, 3, 4, 5), "f"), ((3, 2, 3, 2), "f"), ((2,), "f")],
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 0))),
    ("conv_transpose2d", W(groups=3, s=(3, 3), bias=1) + [2, 1], [((2, 3, 2, 3), "f"), ((3, 2, 2, 2), "f"), ((6,), "f")],
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=3, output_padding=(2, 1), groups=3)),
    ("conv_transpose2d", W(s=(2, 2), d=(2, 2), npad=1, pads=(1, 0, 0, 0)) + [1, 1], [((1, 2, 3, 3), "f"), ((2, 3, 3, 3), "f")],
     lambda x, w: F.conv_transpose2d(x, w, stride=2, dilation=2, padding=1, output_padding=1)),
    ("conv_transpose1d", W(s=(2, 0), npad=1, pads=(1, 0, 0, 0), bias=1) + [1, 0], [((2, 3, 5), "f"), ((3, 2, 4), "f"), ((2,), "f")],
     lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1)),
    ("conv_transpose3d", W(s=(2, 1)), [((1, 2, 2, 3, 2), "f"), ((2, 2, 2, 2, 3), "f")], lambda x, w: F.conv_transpose3d(x, w, stride=(2, 1, 1))),
    ("conv_transpose2d", W() + [0, 0], [((3, 1, 5, 3), "f"), ((1, 4, 1, 1), "f")], lambda x, w: F.conv_transpose2d(x, w)),
    # max_pool2d: one padding per dim; 4 amounts (PyTorch's are symmetric: -inf padded first);
    # stride past the kernel; a 1x1 kernel with stride 2; 1-d with padding and dilation.
    ("max_pool2d", W(k=(3, 2), s=(2, 1), npad=2, pads=(1, 0, 0, 0)), [((2, 1, 5, 6), "f")], lambda x: F.max_pool2d(x, (3, 2), (2, 1), padding=(1, 0))),
    ("max_pool2d", W(k=(3, 3), s=(2, 2), npad=4, pads=(0, 1, 2, 1)), [((1, 3, 6, 7), "f")],
     lambda x: F.max_pool2d(F.pad(x, (0, 1, 2, 1), value=float("-inf")), 3, 2)),
    ("max_pool2d", W(k=(2, 2), s=(3, 3)), [((1, 1, 8, 7), "f")], lambda x: F.max_pool2d(x, 2, 3)),
    ("max_pool2d", W(k=(1, 1), s=(2, 2)), [((2, 2, 5, 5), "f")], lambda x: F.max_pool2d(x, 1, 2)),
    ("max_pool1d", [1, 2, 0, 2, 1, 1, 1, 0, 0, 0, 1, 3, 0, 0], [((2, 2, 11), "f")], lambda x: F.max_pool1d(x, 3, 2, padding=1, dilation=2)),
    # avg_pool2d: one padding per dim, count_include_pad either way; 4 amounts either way; the
    # whole input as the window; 1-d with padding not counted.
    ("avg_pool2d", W(k=(3, 3), s=(1, 1), npad=2, pads=(1, 1, 0, 0), cip=0), [((1, 2, 5, 6), "f")],
     lambda x: F.avg_pool2d(x, 3, 1, padding=1, count_include_pad=False)),
    ("avg_pool2d", W(k=(2, 3), s=(2, 2), npad=2, pads=(0, 1, 0, 0)), [((2, 1, 7, 7), "f")],
     lambda x: F.avg_pool2d(x, (2, 3), 2, padding=(0, 1), count_include_pad=True)),
    ("avg_pool2d", W(k=(3, 3), s=(2, 2), npad=4, pads=(1, 0, 0, 2)), [((1, 2, 6, 5), "f")], lambda x: _avg_pad(x, (1, 0, 0, 2), 3, 2, True)),
    ("avg_pool2d", W(k=(3, 3), s=(2, 2), npad=4, pads=(1, 0, 0, 2), cip=0), [((1, 2, 6, 5), "f")], lambda x: _avg_pad(x, (1, 0, 0, 2), 3, 2, False)),
    ("avg_pool2d", W(k=(4, 5)), [((2, 3, 4, 5), "f")], lambda x: F.avg_pool2d(x, (4, 5))),
    ("avg_pool1d", [1, 2, 0, 1, 1, 1, 1, 0, 0, 0, 0, 3, 0, 0], [((2, 1, 9), "f")], lambda x: F.avg_pool1d(x, 3, 2, padding=1, count_include_pad=False)),
    # linear (weight (in, out) as the reference): a vector with a bias, 3-d without, a 1-dim weight
    # (x * weight), an empty batch, a batch of one.
    ("linear", [1], [((5,), "f"), ((5, 3), "f"), ((3,), "f")], lambda x, w, b: x @ w + b),
    ("linear", [0], [((2, 4, 3), "f"), ((3, 2), "f")], lambda x, w: x @ w),
    ("linear", [1], [((3, 4), "f"), ((4,), "f"), ((4,), "f")], lambda x, w, b: x * w + b),
    ("linear", [1], [((0, 5), "f"), ((5, 4), "f"), ((4,), "f")], lambda x, w, b: x @ w + b),
    ("linear", [0], [((1, 1, 6), "f"), ((6, 1), "f")], lambda x, w: x @ w),
    # layernorm (p: axes, eps * 1e9): a first axis, two apart, a size-1 axis (zeros), eps 1, empty.
    ("layernorm", [0, 0, 1000000], [((5, 3), "f")], lambda x: _ln(x, (0,), 1e-3)),
    ("layernorm", [-3, -1, 100000000], [((2, 5, 3), "f")], lambda x: _ln(x, (0, 2), 0.1)),
    ("layernorm", [-1, 0, 10000], [((3, 1), "f")], lambda x: _ln(x, (1,), 1e-5)),
    ("layernorm", [-1, 0, 1000000000], [((1, 6), "f")], lambda x: _ln(x, (1,), 1.0)),
    ("layernorm", [-1, 0, 10000], [((2, 0, 4), "f")], lambda x: _ln(x, (2,), 1e-5)),
    # batchnorm (p: axis, 1 without weight and bias): axis 0; size-1 dims; an empty batch; 3-d.
    ("batchnorm", [0, 1], [((3, 5), "f"), ((3,), "f"), ((3,), "v")], lambda x, m, s: (x - m.reshape(3, 1)) * s.reshape(3, 1)),
    ("batchnorm", [-1, 0], [((1, 2, 1, 3), "f"), ((3,), "f"), ((3,), "f"), ((3,), "f"), ((3,), "v")], lambda x, w, b, m, s: (x - m) * w * s + b),
    ("batchnorm", [1, 0], [((0, 3), "f"), ((3,), "f"), ((3,), "f"), ((3,), "f"), ((3,), "v")], lambda x, w, b, m, s: (x - m) * w * s + b),
    ("batchnorm", [1, 1], [((2, 3, 5), "f"), ((3,), "f"), ((3,), "v")], lambda x, m, s: (x - m.reshape(3, 1)) * s.reshape(3, 1)),
    # one_hot: 1-d labels, one class, empty labels, a scalar label, more classes than labels use.
    ("one_hot", [3], [((7,), "i3")], lambda x: F.one_hot(x.long(), 3).float()),
    ("one_hot", [1], [((4, 1), "i1")], lambda x: F.one_hot(x.long(), 1).float()),
    ("one_hot", [6], [((0,), "i6")], lambda x: F.one_hot(x.long(), 6).float()),
    ("one_hot", [5], [((), "i5")], lambda x: F.one_hot(x.long(), 5).float()),
    ("one_hot", [8], [((2, 3), "i3")], lambda x: F.one_hot(x.long(), 8).float()),
    # the binary cross entropies: one element, a scalar, size-1 dims, odd sizes.
    ("binary_crossentropy", [], [((1,), "p"), ((1,), "b")], lambda x, y: F.binary_cross_entropy(x, y)),
    ("binary_crossentropy", [], [((), "p"), ((), "b")], lambda x, y: F.binary_cross_entropy(x, y)),
    ("binary_crossentropy", [], [((2, 1, 3), "p"), ((2, 1, 3), "b")], lambda x, y: F.binary_cross_entropy(x, y)),
    ("binary_crossentropy_logits", [], [((), "f"), ((), "b")], lambda x, y: F.binary_cross_entropy_with_logits(x, y)),
    ("binary_crossentropy_logits", [], [((5, 1), "f"), ((5, 1), "b")], lambda x, y: F.binary_cross_entropy_with_logits(x, y)),
    ("binary_crossentropy_logits", [], [((3, 3, 3), "f"), ((3, 3, 3), "b")], lambda x, y: F.binary_cross_entropy_with_logits(x, y)),
    # sparse_categorical_crossentropy (p: ignore_index, label_smoothing * 100): a class index ignored;
    # smoothing alone; 3-d logits with both; one unbatched row; 4-d logits; a batch of one.
    ("sparse_categorical_crossentropy", [2, 0], [((6, 4), "f"), ((6,), "i4")], lambda x, y: F.cross_entropy(x, y.long(), ignore_index=2)),
    ("sparse_categorical_crossentropy", [-1, 30], [((4, 6), "f"), ((4,), "i6")], lambda x, y: F.cross_entropy(x, y.long(), label_smoothing=0.3)),
    ("sparse_categorical_crossentropy", [-1, 25], [((2, 3, 5), "f"), ((2, 3), "l5")],
     lambda x, y: F.cross_entropy(x.reshape(-1, 5), y.reshape(-1).long(), ignore_index=-1, label_smoothing=0.25)),
    ("sparse_categorical_crossentropy", [-1, 0], [((5,), "f"), ((), "i5")], lambda x, y: F.cross_entropy(x, y.long())),
    ("sparse_categorical_crossentropy", [1, 10], [((2, 2, 3, 4), "f"), ((2, 2, 3), "i4")],
     lambda x, y: F.cross_entropy(x.reshape(-1, 4), y.reshape(-1).long(), ignore_index=1, label_smoothing=0.1)),
    ("sparse_categorical_crossentropy", [-1, 0], [((1, 3), "f"), ((1,), "i3")], lambda x, y: F.cross_entropy(x, y.long())),
    # argmax, argmin (ties: the first index): 1-d, a size-1 axis, an empty dim, flat over 3 dims, keepdim.
    ("argmax", [0, 0, 0], [((9,), "t")], lambda x: torch.argmax(x, 0).float()),
    ("argmax", [1, 0, 0], [((2, 1, 5), "t")], lambda x: torch.argmax(x, 1).float()),
    ("argmax", [1, 0, 0], [((0, 3), "t")], lambda x: torch.argmax(x, 1).float()),
    ("argmax", [0, 0, 1], [((2, 3, 4), "t")], lambda x: torch.argmax(x).float()),
    ("argmin", [0, 1, 0], [((2, 3, 6), "t")], lambda x: torch.argmin(x, 0, keepdim=True).float()),
    ("argmin", [1, 0, 0], [((3, 7), "t")], lambda x: torch.argmin(x, 1).float()),
    ("argmin", [0, 0, 1], [((2, 3, 4), "t")], lambda x: torch.argmin(x).float()),
    ("argmin", [-1, 1, 0], [((4, 1), "t")], lambda x: torch.argmin(x, -1, keepdim=True).float()),
    ("argmin", [0, 0, 0], [((5,), "t")], lambda x: torch.argmin(x, 0).float()),
    # cumsum: an empty dim, a long axis that is not the last, a size-1 axis.
    ("cumsum", [1], [((0, 3), "f")], lambda x: torch.cumsum(x, 1)),
    ("cumsum", [0], [((700, 3), "f")], lambda x: torch.cumsum(x, 0)),
    ("cumsum", [1], [((2, 1, 4), "f")], lambda x: torch.cumsum(x, 1)),
    # triu, tril: diagonals -2..2 on wide, tall, batched 4-d, size-1 and empty matrices.
    ("triu", [-1], [((3, 6), "f")], lambda x: torch.triu(x, -1)),
    ("triu", [2], [((2, 2, 3, 4), "f")], lambda x: torch.triu(x, 2)),
    ("triu", [0], [((1, 5), "f")], lambda x: torch.triu(x)),
    ("triu", [1], [((0, 3, 3), "f")], lambda x: torch.triu(x, 1)),
    ("tril", [1], [((6, 3), "f")], lambda x: torch.tril(x, 1)),
    ("tril", [-2], [((2, 2, 4, 3), "f")], lambda x: torch.tril(x, -2)),
    ("tril", [0], [((5, 1), "f")], lambda x: torch.tril(x)),
    ("tril", [-1], [((2, 0, 4), "f")], lambda x: torch.tril(x, -1)),
    # masked_fill: the mask broadcast over rows and over a batch, x broadcast to the mask, empty, scalar.
    ("masked_fill", [], [((3, 4), "f"), ((3, 1), "i2"), ((1,), "f")], lambda x, m, v: x.masked_fill(m.bool(), float(v[0]))),
    ("masked_fill", [], [((2, 3, 4), "f"), ((4,), "i2"), ((1,), "f")], lambda x, m, v: x.masked_fill(m.bool(), float(v[0]))),
    ("masked_fill", [], [((1, 4), "f"), ((3, 4), "i2"), ((1,), "f")], lambda x, m, v: x.masked_fill(m.bool(), float(v[0]))),
    ("masked_fill", [], [((0, 3), "f"), ((1, 3), "i2"), ((1,), "f")], lambda x, m, v: x.masked_fill(m.bool(), float(v[0]))),
    ("masked_fill", [], [((), "f"), ((), "i2"), ((1,), "f")], lambda x, m, v: x.masked_fill(m.bool(), float(v[0]))),
    # pow: a constant exponent on an empty tensor and on a scalar.
    ("pow", [1, 200], [((0, 3), "f")], lambda x: x ** 2),
    ("pow", [1, -50], [((), "v")], lambda x: x ** -0.5),
    # scaled_dot_product_attention (p: causal, mask): batched heads; a float mask broadcast over the
    # batch; a 0/1 mask over heads; causal with heads; causal with fewer queries than keys; one query.
    ("scaled_dot_product_attention", [0, 0], [((2, 3, 4, 8), "f"), ((2, 3, 5, 8), "f"), ((2, 3, 5, 6), "f")], lambda q, k, v: _sdpa(q, k, v, False)),
    ("scaled_dot_product_attention", [0, 1], [((2, 4, 8), "f"), ((2, 5, 8), "f"), ((2, 5, 3), "f"), ((4, 5), "f")],
     lambda q, k, v, m: _sdpa_mask(q, k, v, m)),
    ("scaled_dot_product_attention", [0, 2], [((2, 3, 4, 6), "f"), ((2, 3, 5, 6), "f"), ((2, 3, 5, 2), "f"), ((2, 1, 4, 5), "k")],
     lambda q, k, v, m: _sdpa_mask(q, k, v, m.bool())),
    ("scaled_dot_product_attention", [1, 0], [((1, 2, 5, 4), "f"), ((1, 2, 5, 4), "f"), ((1, 2, 5, 3), "f")], lambda q, k, v: _sdpa(q, k, v, True)),
    ("scaled_dot_product_attention", [1, 0], [((2, 3, 4), "f"), ((2, 5, 4), "f"), ((2, 5, 2), "f")], lambda q, k, v: _sdpa(q, k, v, True)),
    ("scaled_dot_product_attention", [0, 0], [((1, 1, 4), "f"), ((1, 3, 4), "f"), ((1, 3, 2), "f")], lambda q, k, v: _sdpa(q, k, v, False)),
    # interpolate (the reference's one mode, linear in 1 to 3 dims): trilinear either way; bilinear
    # and linear down; a size-1 dim up; one output; 2 dims of a 3-d tensor.  (align_corners with an
    # output of 1 divides by zero in the reference, so it is not a case.)
    ("interpolate", [3, 0, 3, 5, 2], [((1, 1, 2, 3, 4), "f")], lambda x: F.interpolate(x, size=(3, 5, 2), mode="trilinear", align_corners=False)),
    ("interpolate", [3, 1, 5, 3, 4], [((1, 2, 3, 2, 2), "f")], lambda x: F.interpolate(x, size=(5, 3, 4), mode="trilinear", align_corners=True)),
    ("interpolate", [2, 0, 3, 4], [((2, 1, 6, 7), "f")], lambda x: F.interpolate(x, size=(3, 4), mode="bilinear", align_corners=False)),
    ("interpolate", [1, 1, 4], [((1, 2, 9), "f")], lambda x: F.interpolate(x, size=4, mode="linear", align_corners=True)),
    ("interpolate", [2, 1, 3, 5], [((1, 1, 1, 5), "f")], lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", align_corners=True)),
    ("interpolate", [1, 0, 1], [((1, 1, 4), "f")], lambda x: F.interpolate(x, size=1, mode="linear", align_corners=False)),
    ("interpolate", [2, 0, 5, 2], [((2, 3, 4), "f")], lambda x: F.interpolate(x[None], size=(5, 2), mode="bilinear", align_corners=False)[0]),
    # einsum (p: the formula's index in test_nn.c's table): matrix-vector, outer, batched heads,
    # a full sum, elementwise, three operands, a column sum, an empty contracted dim.
    ("einsum", [6], [((3, 5), "f"), ((5,), "f")], lambda a, b: torch.einsum("ij,j->i", a, b)),
    ("einsum", [7], [((4,), "f"), ((3,), "f")], lambda a, b: torch.einsum("i,j->ij", a, b)),
    ("einsum", [8], [((2, 2, 3, 4), "f"), ((2, 2, 5, 4), "f")], lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b)),
    ("einsum", [9], [((2, 3, 4), "f")], lambda a: torch.einsum("ijk->", a)),
    ("einsum", [10], [((3, 4), "f"), ((3, 4), "f")], lambda a, b: torch.einsum("ij,ij->ij", a, b)),
    ("einsum", [11], [((2, 3), "f"), ((3, 4), "f"), ((4, 5), "f")], lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c)),
    ("einsum", [12], [((1, 5), "f")], lambda a: torch.einsum("ij->j", a)),
    ("einsum", [0], [((3, 0), "f"), ((0, 2), "f")], lambda a, b: torch.einsum("ij,jk->ik", a, b)),
]


def nn_main():
    rng = Rng(SEED + 3)
    out = ["/* golden_nn.inc - PyTorch %s's answers for tests/api/test_nn.c, generated by gen_api_golden.py: do not edit. */"
           % torch.__version__,
           "#include <stdint.h>", "",
           "typedef struct {",
           "    const char *fn;",
           "    int64_t p[16]; /* int parameters in the layout test_nn.c reads */",
           "    int nin;",
           "    int ndim[5];",
           "    int64_t shape[5][6];",
           "    char kind[6]; /* 'i': an int input (int32), else float32 */",
           "    const float *x; /* the inputs' elements one after another */",
           "    int out_ndim;",
           "    int64_t out_shape[6];",
           "    int m;",
           "    const float *want;",
           "} golden_nn_t;", ""]
    table = []
    for i, (name, p, ins, fn) in enumerate(NN):
        xs, flat, kinds = [], [], ""
        for sh, kind in ins:
            n = math.prod(sh)
            if kind[0] in "il":
                lim = int(kind[1:])
                vals = [float(rng.next() % lim) for _ in range(n)]
                if kind[0] == "l":
                    vals = [-1.0 if j % 3 == 1 else v for j, v in enumerate(vals)]
                kinds += "i"
            elif kind == "p":
                vals = [f32(rng.uniform(0.05, 0.95)) for _ in range(n)]
                kinds += "f"
            elif kind == "b":
                vals = [float(rng.next() % 2) for _ in range(n)]
                kinds += "f"
            elif kind == "v":
                vals = [f32(rng.uniform(0.5, 2.0)) for _ in range(n)]
                kinds += "f"
            elif kind == "t":  # few distinct values: ties for argmax
                vals = [float(rng.next() % 4) for _ in range(n)]
                kinds += "f"
            elif kind == "k":  # a 0/1 attention mask that keeps the first key of every row
                vals = [1.0 if j % sh[-1] == 0 else float(rng.next() % 2) for j in range(n)]
                kinds += "i"
            elif kind == "e":  # integer exponents (negative bases keep their sign)
                vals = [float(rng.next() % 5) - 2 for _ in range(n)]
                kinds += "f"
            else:
                vals = [f32(rng.uniform(-2, 2)) for _ in range(n)]
                kinds += "f"
            xs.append(torch.tensor(vals, dtype=torch.float32).reshape(sh))
            flat += vals
        y = fn(*xs).to(torch.float32)
        ys = y.reshape(-1).tolist()
        assert not any(math.isnan(v) for v in ys), "%s [case %d] gives NaN, which test_nn.c cannot compare" % (name, i)
        tag = "n%d" % i
        out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in flat)))
        out.append("static const float %s_y[] = {%s};" % (tag, ", ".join(lit(v) for v in ys)))
        pp = list(p) + [0] * (16 - len(p))
        nd = [len(sh) for sh, _ in ins] + [0] * (5 - len(ins))
        shp = ", ".join("{%s}" % ", ".join(str(d) for d in (list(sh) + [0] * (6 - len(sh)))) for sh in [s for s, _ in ins] + [()] * (5 - len(ins)))
        table.append('    {"%s", {%s}, %d, {%s}, {%s}, "%s", %s_x, %d, {%s}, %d, %s_y},' % (
            name, ", ".join(map(str, pp)), len(ins), ", ".join(map(str, nd)), shp, kinds, tag, y.dim(),
            ", ".join(str(d) for d in (list(y.shape) + [0] * (6 - y.dim()))), len(ys), tag))
    out.append("")
    out.append("static const golden_nn_t golden_nn[] = {")
    out += table
    out.append("};")
    with open(OUT_NN, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT_NN, len(table), "cases", file=sys.stderr)


# Indexing: x's shape, the index list (ints, slices, None, Ellipsis, lists for int tensors),
# and for setitem the value (a number or a shape of a random tensor).
E = Ellipsis
INDEXES = [
    ((5,), (2,), None), ((5,), (-1,), None), ((5,), (slice(1, 4),), None), ((7,), (slice(None, None, 2),), None),
    ((7,), (slice(None, None, -1),), None), ((7,), (slice(5, 1, -2),), None), ((7,), (slice(-3, None),), None),
    ((7,), (slice(10, 20),), None), ((3, 4), (1, slice(None)), None), ((3, 4), (slice(None), -2), None),
    ((3, 4, 5), (E, 1), None), ((3, 4, 5), (0, E), None), ((3, 4), (None, slice(None), None), None),
    ((3, 4, 5), (1, None, slice(1, 3), E), None), ((6, 7), (slice(1, None, 2), slice(None, None, -3)), None),
    ((5,), ([0, 2, -1],), None), ((4, 5), ([[1, 0], [3, 3]],), None), ((4, 5), (slice(None), [4, 0, 1]), None),
    ((4, 5, 6), ([0, 3], slice(None), [5, 1]), None), ((4, 5, 6), (slice(1, 3), [0, 2], [1, 3]), None),
    ((4, 5, 6), ([1, 2], 1, [0, 5]), None), ((3,), (), None),
    # setitem
    ((5,), (2,), 7.5), ((5,), (slice(1, 4),), (3,)), ((3, 4), (slice(None), 1), -1.0), ((3, 4), (1,), (4,)),
    ((6, 7), (slice(1, None, 2), slice(None, None, -3)), (3, 3)), ((6, 7), (slice(None), slice(None)), (7,)),
    ((3, 4, 5), (E, slice(1, 3)), 2.0), ((7,), (slice(5, 1, -2),), (2,)),
]


def idx_c(i, tens):
    if i is E:
        return "TACT_ELLIPSIS"
    if i is None:
        return "TACT_NEWAXIS"
    if isinstance(i, int):
        return "TACT_AT(%d)" % i
    if isinstance(i, list):
        tens.append(i)
        return "TACT_TENSOR(NULL)"
    a, b, c = i.start, i.stop, i.step
    return "((tact_index){TACT_IDX_SLICE, %d, %d, %d, %d, %d, %d, NULL})" % (a or 0, b or 0, c or 0, a is not None, b is not None, c is not None)


def index_main():
    rng = Rng(SEED + 4)
    out = ["/* golden_index.inc - NumPy %s's answers for tests/api/test_index.c, generated by gen_api_golden.py: do not edit. */"
           % np.__version__,
           "#include <stdint.h>", "",
           "typedef struct {",
           "    int ndim;",
           "    int64_t shape[4];",
           "    const float *x;",
           "    int nidx;",
           "    tact_index idx[6];  /* TENSOR entries take the tensors below, in order */",
           "    int ntens;",
           "    int tens_ndim[3];",
           "    int64_t tens_shape[3][3];",
           "    const int32_t *tens[3];",
           "    int set;          /* 0 getitem, 1 setitem with the scalar v0, 2 setitem with the tensor v */",
           "    double v0;",
           "    int v_ndim;",
           "    int64_t v_shape[4];",
           "    const float *v;",
           "    int out_ndim;",
           "    int64_t out_shape[6];",
           "    int m;",
           "    const float *want;",
           "} golden_index_t;", ""]
    table = []
    for c, (shape, index, value) in enumerate(INDEXES):
        n = math.prod(shape)
        xs = [float(round(rng.uniform(-50, 50))) for _ in range(n)]
        # NumPy, not PyTorch: PyTorch has no negative slice steps; NumPy's indexing is Python's,
        # which the reference follows.
        x = np.array(xs, dtype=np.float32).reshape(shape)
        tens = []
        cidx = [idx_c(i, tens) for i in index]
        tix = tuple(np.array(i) if isinstance(i, list) else i for i in index)
        tag = "i%d" % c
        out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in xs)))
        for j, t in enumerate(tens):
            out.append("static const int32_t %s_t%d[] = {%s};" % (tag, j, ", ".join(str(v) for v in np.array(t).reshape(-1).tolist())))
        set_, v0, vshape, vname = 0, 0.0, (), "NULL"
        if value is None:
            y = np.asarray(x[tix] if tix else x[()])
        else:
            y = x.copy()
            if isinstance(value, float):
                set_, v0 = 1, value
                y[tix] = value
            else:
                set_, vshape = 2, value
                vv = [float(round(rng.uniform(-9, 9))) for _ in range(math.prod(value))]
                out.append("static const float %s_v[] = {%s};" % (tag, ", ".join(lit(v) for v in vv)))
                vname = tag + "_v"
                y[tix] = np.array(vv, dtype=np.float32).reshape(value)
        ys = y.reshape(-1).tolist()
        out.append("static const float %s_y[] = {%s};" % (tag, ", ".join(lit(v) for v in ys) or "0"))
        pad = lambda l, k: list(l) + [0] * (k - len(l))
        tshapes = [np.array(t).shape for t in tens]
        table.append("    {%d, {%s}, %s_x, %d, {%s}, %d, {%s}, {%s}, {%s}, %d, %r, %d, {%s}, %s, %d, {%s}, %d, %s_y}," % (
            len(shape), ", ".join(map(str, pad(shape, 4))), tag, len(cidx), ", ".join(cidx) or "TACT_ALL", len(tens),
            ", ".join(map(str, pad([len(ts) for ts in tshapes], 3))),
            ", ".join("{%s}" % ", ".join(map(str, pad(list(ts), 3))) for ts in tshapes + [()] * (3 - len(tshapes))),
            ", ".join(["%s_t%d" % (tag, j) for j in range(len(tens))] + ["NULL"] * (3 - len(tens))),
            set_, v0, len(vshape), ", ".join(map(str, pad(vshape, 4))), vname, y.ndim, ", ".join(map(str, pad(list(y.shape), 6))),
            len(ys), tag))
    out += ["", "static const golden_index_t golden_index[] = {"] + table + ["};"]
    with open(OUT_INDEX, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT_INDEX, len(table), "cases", file=sys.stderr)


if __name__ == "__main__":
    main()
    reduce_main()
    move_main()
    nn_main()
    index_main()
