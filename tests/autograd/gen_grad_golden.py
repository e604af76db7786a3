#!/usr/bin/env python3
"""gen_grad_golden.py - writes golden_grad.inc, PyTorch's gradients of the differentiable functions of the
tensor API, the reference data of tests/autograd/test_grad_api.c.

Run: /usr/bin/python3 tests/autograd/gen_grad_golden.py (Debian's python3-torch; `pip install torch` works
as well).  Each case is a function of tact.h with its parameters and float32 inputs from a fixed xorshift64*
seed (never NumPy's or PyTorch's RNG), drawn inside the function's domain and away from the points where it
has no derivative (ties of max and min, 0 of relu and abs, the corners of clip and hardtanh, ...).  The
golden is the gradient of loss = ((out + 1) ** 2).mean(), the reference suite's loss, with respect to every
float input that asks for one.  PyTorch computes it in float64 from the float32 inputs, so the golden is the
exact gradient rounded to float32, not PyTorch's own float32 error; test_grad_api.c allows the reference
suite's 1e-4 + 1e-3 |want|.  A rerun with the same PyTorch writes the same file.
"""
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "api"))
from gen_api_golden import Rng, _conv, idx_c  # noqa: E402  (xorshift64*, as tests/testutil.c's tu_rand; conv by the window layout)

SEED = 0x6AD7
OUT = os.path.join(HERE, "golden_grad.inc")
MASK = (1 << 64) - 1
INF = float("inf")


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def lit(v):
    """A float32 as a C hex float literal (gen_api_golden.py's style, trailing zero digits dropped)."""
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if v == 0:
        return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
    s = float(v).hex()
    mant, exp = s.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return mant + "p" + exp + "f"


def dlit(v):
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v))


# ------------------------------------------------------------------ inputs

class In:
    """One input: shape and kind.  'f' floats asking for a gradient, 'c' constant floats (targets),
    in [lo, hi) (nz: the magnitude is, with a random sign); 't' constant floats 0 or 1 (targets); 'i' int32
    below lim ('l': labels, every third one ignore_index -1); 'b' bools."""

    def __init__(self, shape, kind="f", lo=-2.0, hi=2.0, nz=False, lim=0):
        self.shape, self.kind, self.lo, self.hi, self.nz, self.lim = tuple(shape), kind, lo, hi, nz, lim


def F_(shape, lo=-2.0, hi=2.0, nz=False):
    return In(shape, "f", lo, hi, nz)


def C_(shape, lo=-2.0, hi=2.0):
    return In(shape, "c", lo, hi)


def I_(shape, lim):
    return In(shape, "i", lim=lim)


def B_(shape):
    return In(shape, "b")


class Case:
    """family, tact function (the name test_grad_api.c dispatches on), int parameters p, float parameters d,
    inputs, PyTorch's function of the input tensors; kinks: values input 0 keeps 1e-3 away from;
    distinct: input 0 has no two equal values (max, min, max_pool); apart: the first two inputs are
    nowhere equal after broadcasting (maximum, minimum); check: any other test of the drawn values;
    idx: getitem's index list; text: einsum's formula."""

    def __init__(self, family, fn, ins, torch_fn, p=(), d=(), kinks=(), distinct=False, apart=False, check=None, idx=None, text=None):
        self.family, self.fn, self.ins, self.torch_fn, self.check, self.text = family, fn, ins, torch_fn, check, text
        self.p, self.d, self.kinks, self.distinct, self.apart, self.idx = list(p), list(d), kinks, distinct, apart, idx


def draw(rng, inp):
    n = math.prod(inp.shape)
    if inp.kind in "fc":
        vals = []
        for _ in range(n):
            v = rng.uniform(inp.lo, inp.hi)
            if inp.nz and rng.next() & 1:
                v = -v
            vals.append(f32(v))
        return vals
    if inp.kind in "bt":
        return [float(rng.next() % 2) for _ in range(n)]
    vals = [float(rng.next() % inp.lim) for _ in range(n)]
    if inp.kind == "l":
        vals = [-1.0 if j % 3 == 1 else v for j, v in enumerate(vals)]
    return vals


def acceptable(case, vals, tensors):
    """Whether the drawn inputs stay away from the function's points without a derivative."""
    x = vals[0]
    if any(abs(v - k) < 1e-3 for v in x for k in case.kinks):
        return False
    if case.distinct and len(set(x)) != len(x):
        return False
    if case.apart:
        a, b = torch.broadcast_tensors(tensors[0], tensors[1])
        if bool(((a - b).abs() < 1e-3).any()):
            return False
    return case.check is None or case.check(vals)


# ------------------------------------------------------------------ cases

CASES = []


def add(*a, **k):
    CASES.append(Case(*a, **k))


# Elementwise functions of one tensor: name, float parameters, PyTorch's function, domain (lo, hi, nz), kinks.
UNARY = [
    ("exp", (), torch.exp, (-3, 3, False), ()),
    ("exp2", (), torch.exp2, (-3, 3, False), ()),
    ("log", (), torch.log, (0.1, 10, False), ()),
    ("log2", (), torch.log2, (0.1, 10, False), ()),
    ("sin", (), torch.sin, (-6, 6, False), ()),
    ("cos", (), torch.cos, (-6, 6, False), ()),
    ("tan", (), torch.tan, (-1.2, 1.2, False), ()),
    ("sqrt", (), torch.sqrt, (0.1, 10, False), ()),
    ("rsqrt", (), torch.rsqrt, (0.1, 10, False), ()),
    ("recip", (), torch.reciprocal, (0.2, 5, True), ()),
    ("reciprocal", (), torch.reciprocal, (0.2, 5, True), ()),
    ("neg", (), torch.neg, (-3, 3, False), ()),
    ("square", (), torch.square, (-3, 3, False), ()),
    ("abs", (), torch.abs, (-3, 3, False), (0,)),
    ("sign", (), torch.sign, (-3, 3, False), (0,)),  # a gradient of zeros (floor, ceil, trunc, round: none, see test_grad_api.c)
    ("relu", (), torch.relu, (-3, 3, False), (0,)),
    ("sigmoid", (), torch.sigmoid, (-8, 8, False), ()),
    ("tanh", (), torch.tanh, (-4, 4, False), ()),
    ("sinh", (), torch.sinh, (-4, 4, False), ()),
    ("cosh", (), torch.cosh, (-4, 4, False), ()),
    ("atanh", (), torch.atanh, (-0.9, 0.9, False), ()),
    ("asinh", (), torch.asinh, (-5, 5, False), ()),
    ("acosh", (), torch.acosh, (1.1, 10, False), ()),
    ("elu", (1.0,), lambda x: F.elu(x, 1.0), (-4, 4, False), (0,)),
    ("elu", (0.5,), lambda x: F.elu(x, 0.5), (-4, 4, False), (0,)),
    ("celu", (1.0,), lambda x: F.celu(x, 1.0), (-4, 4, False), (0,)),
    ("celu", (2.5,), lambda x: F.celu(x, 2.5), (-4, 4, False), (0,)),
    ("swish", (), F.silu, (-6, 6, False), ()),
    ("silu", (), F.silu, (-6, 6, False), ()),
    ("relu6", (), F.relu6, (-3, 9, False), (0, 6)),
    ("hardswish", (), F.hardswish, (-5, 5, False), (-3, 3)),
    ("hardtanh", (-1.0, 1.0), lambda x: F.hardtanh(x, -1.0, 1.0), (-3, 3, False), (-1, 1)),
    ("hardtanh", (-0.5, 2.0), lambda x: F.hardtanh(x, -0.5, 2.0), (-3, 3, False), (-0.5, 2)),
    ("gelu", (), lambda x: F.gelu(x, approximate="tanh"), (-5, 5, False), ()),
    ("quick_gelu", (), lambda x: x * torch.sigmoid(x * 1.702), (-5, 5, False), ()),
    ("leakyrelu", (0.01,), lambda x: F.leaky_relu(x, 0.01), (-3, 3, False), (0,)),
    ("leakyrelu", (0.2,), lambda x: F.leaky_relu(x, 0.2), (-3, 3, False), (0,)),
    ("mish", (), F.mish, (-5, 5, False), ()),
    ("softplus", (1.0,), lambda x: F.softplus(x, 1.0, threshold=1e30), (-5, 5, False), ()),
    ("softplus", (2.0,), lambda x: F.softplus(x, 2.0, threshold=1e30), (-5, 5, False), ()),
    ("softsign", (), F.softsign, (-5, 5, False), ()),
    ("clip", (-1.0, 0.5), lambda x: torch.clamp(x, -1.0, 0.5), (-2, 2, False), (-1, 0.5)),
    ("clip", (-INF, 0.5), lambda x: torch.clamp(x, max=0.5), (-2, 2, False), (0.5,)),
    ("clip", (-0.25, INF), lambda x: torch.clamp(x, min=-0.25), (-2, 2, False), (-0.25,)),
    # x ** c through the reference's identities (integers by squaring, halves with a sqrt, negatives of the
    # reciprocal) and exp(c log x) for the rest; negative bases only for integer exponents.
    ("pow_scalar", (2.0,), lambda x: x ** 2.0, (0.3, 2, True), ()),
    ("pow_scalar", (3.0,), lambda x: x ** 3.0, (0.3, 2, True), ()),
    ("pow_scalar", (-2.0,), lambda x: x ** -2.0, (0.5, 2, True), ()),
    ("pow_scalar", (0.5,), lambda x: x ** 0.5, (0.2, 4, False), ()),
    ("pow_scalar", (2.5,), lambda x: x ** 2.5, (0.2, 2, False), ()),
    ("pow_scalar", (-1.0,), lambda x: x ** -1.0, (0.3, 3, False), ()),
    ("pow_scalar", (1.3,), lambda x: x ** 1.3, (0.2, 3, False), ()),
    ("pow_scalar", (-0.5,), lambda x: x ** -0.5, (0.2, 3, False), ()),
    ("scalar_pow", (2.0,), lambda x: 2.0 ** x, (-2, 2, False), ()),  # a scalar base: tact_pow(scalar, x)
    ("scalar_pow", (0.5,), lambda x: 0.5 ** x, (-2, 2, False), ()),
    # Binary ops with a weakly typed scalar on either side.
    ("add_scalar", (2.5,), lambda x: x + 2.5, (-2, 2, False), ()),
    ("scalar_sub", (1.5,), lambda x: 1.5 - x, (-2, 2, False), ()),
    ("mul_scalar", (-3.0,), lambda x: x * -3.0, (-2, 2, False), ()),
    ("div_scalar", (4.0,), lambda x: x / 4.0, (-2, 2, False), ()),
    ("scalar_div", (2.0,), lambda x: 2.0 / x, (0.3, 3, True), ()),
    ("maximum_scalar", (0.5,), lambda x: torch.clamp(x, min=0.5), (-2, 2, False), (0.5,)),
    ("minimum_scalar", (-0.5,), lambda x: torch.clamp(x, max=-0.5), (-2, 2, False), (-0.5,)),
    ("cast_float64", (), lambda x: x.double(), (-2, 2, False), ()),
    ("dropout_eval", (0.5,), lambda x: x, (-2, 2, False), ()),  # dropout(x, 0.5, training 0) is x
]
UNARY_SHAPES = [(), (7,), (3, 5), (2, 1, 3)]
for name, d, fn, (lo, hi, nz), kinks in UNARY:
    for sh in UNARY_SHAPES:
        add("unary", name, [F_(sh, lo, hi, nz)], fn, d=d, kinks=kinks)

# Elementwise functions of two or three tensors, broadcasting (a size-1 dim, a scalar, new leading dims).
BIN_SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)), ((2, 1, 3), (4, 1)), ((7,), ())]
for a, b in BIN_SHAPES:
    add("binary", "add", [F_(a), F_(b)], torch.add)
    add("binary", "sub", [F_(a), F_(b)], torch.sub)
    add("binary", "mul", [F_(a), F_(b)], torch.mul)
    add("binary", "div", [F_(a), F_(b, 0.3, 2, True)], torch.div)
    add("binary", "maximum", [F_(a), F_(b)], torch.maximum, apart=True)
    add("binary", "minimum", [F_(a), F_(b)], torch.minimum, apart=True)
    add("binary", "pow", [F_(a, 0.3, 2.5), F_(b, -2, 2)], torch.pow)
    add("binary", "lerp_scalar", [F_(a), F_(b)], lambda x, y: torch.lerp(x, y, 0.25), d=(0.25,))
for a, b, c in [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), (3, 4)), ((2, 3), (), (1, 3)), ((5,), (2, 1), ())]:
    add("binary", "lerp", [F_(a), F_(b), F_(c, 0, 1)], torch.lerp)
    add("binary", "mulacc", [F_(a), F_(b), F_(c)], lambda x, y, z: x * y + z)
    add("binary", "where", [B_(a), F_(b), F_(c)], lambda m, x, y: torch.where(m.bool(), x, y))
add("binary", "where_scalar", [B_((3, 4)), F_((4,))], lambda m, x: torch.where(m.bool(), x, torch.tensor(0.5, dtype=x.dtype)), d=(0.5,))
add("binary", "where_scalar", [B_((2, 1)), F_((2, 3))], lambda m, x: torch.where(m.bool(), x, torch.tensor(0.5, dtype=x.dtype)), d=(0.5,))

# Reductions over axes (None: all), keepdim, correction for var and std.
RED_AXES = [((3, 5), [None, [0], [1], [-1], [0, 1]]), ((2, 3, 4), [[1], [0, 2], [-1]]), ((7,), [None]), ((), [None]),
            ((4, 1), [[1]])]


def _dims(x, ax):
    return tuple(range(x.dim())) if ax is None else tuple(a % x.dim() for a in ax)


def _prod_axes(x, ax, keep):
    y = x
    for a in sorted(_dims(x, ax), reverse=True):
        y = y.prod(a, keepdim=True)
    return y if keep else y.reshape([s for i, s in enumerate(x.shape) if i not in _dims(x, ax)])


def _red(name, corr=1):
    def fn(x, ax, keep):
        if x.dim() == 0:  # a scalar reduces to itself (var and std of one element are not asked)
            return x.clone()
        dims = _dims(x, ax)
        k = bool(keep)
        if name == "sum":
            return x.sum(dim=dims, keepdim=k)
        if name == "mean":
            return x.mean(dim=dims, keepdim=k)
        if name == "max":
            return torch.amax(x, dim=dims, keepdim=k)
        if name == "min":
            return torch.amin(x, dim=dims, keepdim=k)
        if name == "prod":
            return _prod_axes(x, ax, keep)
        if name == "logsumexp":
            return torch.logsumexp(x, dim=dims, keepdim=k)
        if name == "var":
            return torch.var(x, dim=dims, keepdim=k, correction=corr)
        return torch.std(x, dim=dims, keepdim=k, correction=corr)
    return fn


def add_reduce(name, shape, ax, keep, corr=None, lo=-2.0, hi=2.0, nz=False, **k):
    """A reduction case; p = naxes (-1: all), axes (3), keepdim; d = correction (var, std)."""
    p = [-1 if ax is None else len(ax)] + list(ax or []) + [0] * (3 - len(ax or [])) + [keep]
    add("reduce", name, [F_(shape, lo, hi, nz)], lambda x, f=_red(name, corr), ax=ax, keep=keep: f(x, ax, keep), p=p,
        d=() if corr is None else (float(corr),), **k)


for n_, (shape, ax) in enumerate((s, a) for s, axes_list in RED_AXES for a in axes_list):
    # keepdim alternates; the (3, 5) axis 1 case has both
    for kp in (0, 1) if (shape, ax) == ((3, 5), [1]) else (n_ % 2,):
        for name in ("sum", "mean", "logsumexp"):
            add_reduce(name, shape, ax, kp)
        add_reduce("max", shape, ax, kp, distinct=True)
        add_reduce("min", shape, ax, kp, distinct=True)
        add_reduce("prod", shape, ax, kp, lo=0.5, hi=1.5, nz=True)
        count = math.prod(shape[a % len(shape)] for a in ax) if ax is not None and shape else math.prod(shape)
        for corr in (1, 0):
            if shape == () or count - corr <= 0:
                continue  # var and std of a single element with correction 1 are NaN
            add_reduce("var", shape, ax, kp, corr)
            if count > 1:  # std of one element is sqrt at 0, which has no derivative
                add_reduce("std", shape, ax, kp, corr)
for shape, axis in [((3, 5), 0), ((3, 5), 1), ((3, 5), -1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((7,), 0), ((4, 1), 1)]:
    add("reduce", "softmax", [F_(shape, -4, 4)], (lambda a: lambda x: torch.softmax(x, a))(axis), p=[axis])
    add("reduce", "log_softmax", [F_(shape, -4, 4)], (lambda a: lambda x: torch.log_softmax(x, a))(axis), p=[axis])
for shape, axis in [((7,), 0), ((3, 9), 1), ((5, 2, 3), -2), ((2, 1, 3), 1), ((600,), 0)]:
    add("reduce", "cumsum", [F_(shape)], (lambda a: lambda x: torch.cumsum(x, a))(axis), p=[axis])

# Movement.  p: the function's int parameters as s_apply reads them.
MOV = "movement"
add(MOV, "reshape", [F_((2, 3, 4))], lambda x: x.reshape(6, 4), p=[2, 6, 4])
add(MOV, "reshape", [F_((3, 4))], lambda x: x.reshape(2, 2, 3), p=[3, 2, -1, 3])
add(MOV, "reshape", [F_(())], lambda x: x.reshape(1, 1), p=[2, 1, 1])
add(MOV, "permute", [F_((2, 3, 4))], lambda x: x.permute(2, 0, 1), p=[2, 0, 1])
add(MOV, "permute", [F_((3, 4))], lambda x: x.permute(1, 0), p=[1, 0])
add(MOV, "expand", [F_((3, 1))], lambda x: x.expand(3, 4), p=[2, 3, 4])
add(MOV, "expand", [F_((4,))], lambda x: x.expand(2, 3, 4), p=[3, 2, 3, 4])
add(MOV, "expand", [F_((1, 3, 1))], lambda x: x.expand(2, 3, 5), p=[3, 2, -1, 5])
add(MOV, "pad", [F_((2, 3))], lambda x: F.pad(x, (0, 1, 1, 2)), p=[1, 2, 0, 1], d=(0.0,))
add(MOV, "pad", [F_((3,))], lambda x: F.pad(x, (2, 1), value=1.5), p=[2, 1], d=(1.5,))
add(MOV, "shrink", [F_((4, 5))], lambda x: x[1:3, 1:4], p=[1, 3, 1, 4])
add(MOV, "shrink", [F_((2, 3, 4))], lambda x: x[:, 2:3, 0:3], p=[0, 2, 2, 3, 0, 3])
add(MOV, "flip", [F_((3, 4))], lambda x: x.flip(0), p=[1, 0])
add(MOV, "flip", [F_((2, 3, 4))], lambda x: x.flip(0, 2), p=[2, 0, 2])
add(MOV, "transpose", [F_((3, 5))], lambda x: x.transpose(1, 0), p=[1, 0])
add(MOV, "transpose", [F_((2, 3, 4))], lambda x: x.transpose(0, 2), p=[0, 2])
add(MOV, "T", [F_((4, 3))], lambda x: x.T)
add(MOV, "squeeze", [F_((1, 3, 1, 2))], lambda x: x.squeeze(), p=[-1])
add(MOV, "squeeze", [F_((1, 3, 1, 2))], lambda x: x.squeeze(2), p=[1, 2])
add(MOV, "unsqueeze", [F_((3, 4))], lambda x: x.unsqueeze(0), p=[0])
add(MOV, "unsqueeze", [F_((3, 4))], lambda x: x.unsqueeze(-1), p=[-1])
add(MOV, "flatten", [F_((2, 3, 4))], lambda x: x.flatten(), p=[0, -1])
add(MOV, "flatten", [F_((2, 3, 4))], lambda x: x.flatten(1, 2), p=[1, 2])
add(MOV, "unflatten", [F_((4, 6))], lambda x: x.unflatten(1, (2, 3)), p=[1, 2, 2, 3])
add(MOV, "repeat", [F_((2, 3))], lambda x: x.repeat(2, 3), p=[2, 2, 3])
add(MOV, "repeat", [F_((3, 2))], lambda x: x.repeat(2, 1, 2), p=[3, 2, 1, 2])
add(MOV, "repeat", [F_((4,))], lambda x: x.repeat(3), p=[1, 3])
add(MOV, "repeat_interleave", [F_((3, 2))], lambda x: x.repeat_interleave(2, dim=0), p=[2, 0])
add(MOV, "repeat_interleave", [F_((2, 2, 3))], lambda x: x.repeat_interleave(3, dim=-1), p=[3, -1])
add(MOV, "repeat_interleave_flat", [F_((2, 3))], lambda x: x.repeat_interleave(2), p=[2])
add(MOV, "cat", [F_((2, 3)), F_((1, 3)), F_((4, 3))], lambda *xs: torch.cat(xs, 0), p=[0])
add(MOV, "cat", [F_((2, 3)), F_((2, 1)), F_((2, 2))], lambda *xs: torch.cat(xs, 1), p=[1])
add(MOV, "cat", [F_((2, 2, 1)), F_((2, 2, 3))], lambda *xs: torch.cat(xs, -1), p=[-1])
add(MOV, "stack", [F_((2, 3)), F_((2, 3)), F_((2, 3))], lambda *xs: torch.stack(xs, 0), p=[0])
add(MOV, "stack", [F_((2, 3)), F_((2, 3))], lambda *xs: torch.stack(xs, 1), p=[1])
add(MOV, "stack", [F_((4,)), F_((4,)), F_((4,))], lambda *xs: torch.stack(xs, -1), p=[-1])
# split and chunk: out is one piece (p: dim, piece, then the sizes or the chunk count).
add(MOV, "split", [F_((6, 2))], lambda x: torch.split(x, [1, 3, 2], 0)[1], p=[0, 1, 3, 1, 3, 2])
add(MOV, "split", [F_((2, 5))], lambda x: torch.split(x, [1, 4], 1)[1], p=[1, 1, 2, 1, 4])
add(MOV, "chunk", [F_((7, 2))], lambda x: torch.chunk(x, 3, 0)[2], p=[0, 2, 3])
add(MOV, "chunk", [F_((2, 6))], lambda x: torch.chunk(x, 2, 1)[0], p=[1, 0, 2])
add(MOV, "gather", [F_((3, 4)), I_((2, 4), 3)], lambda x, i: torch.gather(x, 0, i.long()), p=[0])
add(MOV, "gather", [F_((3, 4)), I_((3, 2), 4)], lambda x, i: torch.gather(x, 1, i.long()), p=[1])
add(MOV, "gather", [F_((2, 3, 5)), I_((2, 3, 7), 5)], lambda x, i: torch.gather(x, -1, i.long()), p=[-1])
add(MOV, "pad2d", [F_((3, 4))], lambda x: F.pad(x, (1, 2)), p=[2, 1, 2], d=(0.0,))
add(MOV, "pad2d", [F_((2, 3, 4))], lambda x: F.pad(x, (1, 2, 0, 1), value=-0.5), p=[4, 1, 2, 0, 1], d=(-0.5,))
add(MOV, "pad2d", [F_((3, 4))], lambda x: F.pad(x, (-1, 1, 2, -1)), p=[4, -1, 1, 2, -1], d=(0.0,))
add(MOV, "contiguous", [F_((3, 4))], lambda x: x.T.contiguous())  # of a permuted view
# getitem: the index list (ints, slices, None, Ellipsis, lists for int32 tensor indices).
E = Ellipsis
GETITEMS = [
    ((5,), (2,)), ((5,), (slice(1, 4),)), ((7,), (slice(None, None, 2),)), ((7,), (slice(None, None, -1),)),
    ((7,), (slice(5, 1, -2),)), ((3, 4), (1, slice(None))), ((3, 4), (slice(None), -2)), ((3, 4, 5), (E, 1)),
    ((3, 4), (None, slice(None), None)), ((3, 4, 5), (1, None, slice(1, 3), E)),
    ((6, 7), (slice(1, None, 2), slice(None, None, -3))),
    ((5,), ([0, 2, -1],)), ((4, 5), ([[1, 0], [3, 3]],)), ((4, 5), (slice(None), [4, 0, 1, 0])),
    ((4, 5, 6), ([0, 3], slice(None), [5, 1])),
]


def _getitem(x, index):
    """x[index] as Python's indexing, negative slice steps included (PyTorch has none: such a slice is a
    positive one of x flipped along its dim)."""
    used = sum(1 for i in index if i is not None and i is not E)
    dim, flips, ix = 0, [], []
    for i in index:
        if i is E:
            dim += x.dim() - used
            ix.append(i)
            continue
        if i is None:
            ix.append(i)
            continue
        if isinstance(i, slice) and i.step is not None and i.step < 0:
            n = x.shape[dim]
            start, stop, step = i.indices(n)
            count = len(range(start, stop, step))
            q0 = n - 1 - start
            flips.append(dim)
            ix.append(slice(q0, q0 + (count - 1) * -step + 1, -step) if count else slice(0, 0))
        else:
            ix.append(torch.tensor(i) if isinstance(i, list) else i)
        dim += 1
    return (x.flip(flips) if flips else x)[tuple(ix)]


for shape, index in GETITEMS:
    tens = [i for i in index if isinstance(i, list)]
    ins = [F_(shape)] + [I_(torch.tensor(t).shape, 1) for t in tens]
    add(MOV, "getitem", ins, (lambda ix: lambda x, *ts: _getitem(x, ix))(index), idx=index)

# Matrix products.
MM = "matmul"
for a, b in [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)),
             ((1, 5), (5, 1))]:
    add(MM, "matmul", [F_(a), F_(b)], torch.matmul)
for a, b in [((3, 4), (4, 2)), ((2, 2, 3), (2, 3, 4))]:
    add(MM, "dot", [F_(a), F_(b)], torch.matmul)
add(MM, "linear", [F_((3, 5)), F_((5, 4))], lambda x, w: x @ w)
add(MM, "linear", [F_((2, 3, 5)), F_((5, 4)), F_((4,))], lambda x, w, b: x @ w + b)
add(MM, "linear", [F_((4,)), F_((4, 3)), F_((3,))], lambda x, w, b: x @ w + b)
add(MM, "linear", [F_((3, 4)), F_((4,))], lambda x, w: x * w)  # a 1-dim weight multiplies
EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i->", [(6,), (6,)]),
           ("ij,kj", [(3, 4), (5, 4)]), ("abc->cb", [(2, 3, 4)]), ("i,j->ij", [(3,), (4,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
           ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)])]
for formula, shapes in EINSUMS:
    add(MM, "einsum", [F_(s) for s in shapes], (lambda f: lambda *xs: torch.einsum(f, *xs))(formula), text=formula)


# Windowed functions.  p: groups, stride (2), dilation (2), npad, padding (4), count_include_pad, kernel (2),
# bias, output_padding (2), spatial dims (0: 2), as test_nn.c's s_window reads them.
def W(groups=1, s=(0, 0), d=(1, 1), npad=0, pads=(0, 0, 0, 0), cip=1, k=(2, 2), bias=0, op=(0, 0), nd=0):
    return [groups, s[0], s[1], d[0], d[1], npad, *pads, cip, k[0], k[1], bias, op[0], op[1], nd]


CONV = "conv"
for p, shapes in [
        (W(), [(1, 1, 5, 5), (1, 1, 3, 3)]),
        (W(bias=1), [(2, 3, 6, 7), (4, 3, 3, 2), (4,)]),
        (W(s=(2, 2)), [(2, 2, 7, 7), (3, 2, 3, 3)]),
        (W(d=(2, 1), npad=1, pads=(1, 0, 0, 0)), [(1, 2, 8, 6), (2, 2, 3, 3)]),
        (W(groups=2, npad=2, pads=(1, 2, 0, 0)), [(2, 4, 5, 5), (6, 2, 3, 3)]),
        (W(npad=4, pads=(1, 0, 2, 1), bias=1), [(1, 3, 4, 5), (2, 3, 2, 2), (2,)]),
        (W(s=(1, 2), d=(1, 2)), [(1, 1, 9, 9), (1, 1, 3, 3)])]:
    add(CONV, "conv2d", [F_(s) for s in shapes], (lambda p: lambda x, w, b=None: _conv(x, w, b, p))(p), p=p)
add(CONV, "conv2d", [F_((2, 3, 9)), F_((4, 3, 3))], lambda x, w: F.conv1d(x, w, stride=2, padding=1), p=W(s=(2, 0), npad=1, pads=(1, 0, 0, 0)))
add(CONV, "conv2d", [F_((1, 2, 4, 5, 3)), F_((3, 2, 2, 3, 2)), F_((3,))], lambda x, w, b: F.conv3d(x, w, b), p=W(bias=1))
add(CONV, "conv_transpose2d", [F_((1, 2, 4, 4)), F_((2, 3, 3, 3))], lambda x, w: F.conv_transpose2d(x, w), p=W())
add(CONV, "conv_transpose2d", [F_((2, 2, 3, 4)), F_((2, 3, 3, 3)), F_((3,))],
    lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1), p=W(s=(2, 2), npad=1, pads=(1, 0, 0, 0), bias=1, op=(1, 1)))
add(CONV, "conv_transpose2d", [F_((1, 4, 3, 3)), F_((4, 1, 2, 3))], lambda x, w: F.conv_transpose2d(x, w, stride=(1, 2), dilation=(2, 1), groups=2),
    p=W(groups=2, d=(2, 1), s=(1, 2)))
add(CONV, "max_pool2d", [F_((2, 3, 6, 6))], lambda x: F.max_pool2d(x, 2), p=W(), distinct=True)
add(CONV, "max_pool2d", [F_((1, 2, 7, 8))], lambda x: F.max_pool2d(x, 3, 2, padding=1), p=W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0)), distinct=True)
add(CONV, "max_pool2d", [F_((1, 1, 7, 7))], lambda x: F.max_pool2d(x, (2, 3), 1, dilation=(2, 1)), p=W(k=(2, 3), s=(1, 1), d=(2, 1)), distinct=True)
add(CONV, "max_pool2d", [F_((2, 3, 10))], lambda x: F.max_pool1d(x, 3), p=W(k=(3, 0), nd=1), distinct=True)
add(CONV, "avg_pool2d", [F_((2, 3, 6, 6))], lambda x: F.avg_pool2d(x, 2), p=W())
add(CONV, "avg_pool2d", [F_((1, 2, 7, 8))], lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=True),
    p=W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0)))
add(CONV, "avg_pool2d", [F_((1, 2, 7, 8))], lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
    p=W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0), cip=0))
add(CONV, "avg_pool2d", [F_((1, 2, 11))], lambda x: F.avg_pool1d(x, 4, 2), p=W(k=(4, 0), s=(2, 0), nd=1))

# nn functions.  Targets are constants ('c'); batchnorm's five tensors all ask for gradients.
NN = "nn"
add(NN, "layernorm", [F_((4, 7))], lambda x: F.layer_norm(x, (7,), eps=1e-5), p=[1, -1], d=(1e-5,))
add(NN, "layernorm", [F_((2, 3, 9))], lambda x: F.layer_norm(x, (9,), eps=1e-5), p=[1, -1], d=(1e-5,))
add(NN, "layernorm", [F_((2, 3, 4))], lambda x: F.layer_norm(x, (3, 4), eps=1e-5), p=[2, -1, -2], d=(1e-5,))
add(NN, "layernorm", [F_((3, 5))], lambda x: F.layer_norm(x, (5,), eps=0.1), p=[1, -1], d=(0.1,))
_bn4 = lambda x, w, b, m, s: (x - m.reshape(1, 3, 1, 1)) * w.reshape(1, 3, 1, 1) * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
add(NN, "batchnorm", [F_((2, 3, 4, 4)), F_((3,)), F_((3,)), F_((3,)), F_((3,), 0.5, 2)], _bn4, p=[1])
add(NN, "batchnorm", [F_((5, 4)), F_((4,)), F_((4,)), F_((4,)), F_((4,), 0.5, 2)], lambda x, w, b, m, s: (x - m) * w * s + b, p=[-1])
add(NN, "batchnorm", [F_((2, 3, 4)), C_((3,)), C_((3,)), F_((3,)), F_((3,), 0.5, 2)],
    lambda x, w, b, m, s: (x - m.reshape(3, 1)) * w.reshape(3, 1) * s.reshape(3, 1) + b.reshape(3, 1), p=[1])
add(NN, "binary_crossentropy", [F_((3, 4), 0.05, 0.95), In((3, 4), "t")], lambda x, y: F.binary_cross_entropy(x, y))
add(NN, "binary_crossentropy", [F_((7,), 0.05, 0.95), In((7,), "t")], lambda x, y: F.binary_cross_entropy(x, y))
# Soft targets asking for a gradient too: PyTorch's binary_cross_entropy has none for its target, so the
# formula it computes (its log clamp at -100 is far away).
add(NN, "binary_crossentropy", [F_((2, 5), 0.05, 0.95), F_((2, 5), 0, 1)], lambda x, y: -(y * torch.log(x) + (1 - y) * torch.log(1 - x)).mean())
add(NN, "binary_crossentropy_logits", [F_((3, 4), -3, 3), In((3, 4), "t")], lambda x, y: F.binary_cross_entropy_with_logits(x, y))
add(NN, "binary_crossentropy_logits", [F_((2, 3, 2), -3, 3), F_((2, 3, 2), 0, 1)], lambda x, y: F.binary_cross_entropy_with_logits(x, y))
add(NN, "sparse_categorical_crossentropy", [F_((5, 7)), I_((5,), 7)], lambda x, y: F.cross_entropy(x, y.long()), p=[-1], d=(0.0,))
add(NN, "sparse_categorical_crossentropy", [F_((6, 4)), In((6,), "l", lim=4)],
    lambda x, y: F.cross_entropy(x, y.long(), ignore_index=-1, label_smoothing=0.1), p=[-1], d=(0.1,))
add(NN, "sparse_categorical_crossentropy", [F_((2, 3, 5)), I_((2, 3), 5)], lambda x, y: F.cross_entropy(x.reshape(-1, 5), y.reshape(-1).long()),
    p=[-1], d=(0.0,))


def _sdpa(q, k, v, mask=None, causal=0):
    """PyTorch 1.13 has no F.scaled_dot_product_attention: its definition."""
    w = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        w = w.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        w = w + mask if mask.dtype != torch.bool else w.masked_fill(~mask, float("-inf"))
    return torch.softmax(w, -1) @ v


# p: causal, mask (0 none, 1 a float mask, 2 a bool mask)
add(NN, "scaled_dot_product_attention", [F_((2, 4, 8)), F_((2, 5, 8)), F_((2, 5, 3))], lambda q, k, v: _sdpa(q, k, v), p=[0, 0])
add(NN, "scaled_dot_product_attention", [F_((2, 4, 8)), F_((2, 4, 8)), F_((2, 4, 3))], lambda q, k, v: _sdpa(q, k, v, causal=1), p=[1, 0])
add(NN, "scaled_dot_product_attention", [F_((1, 2, 3, 4)), F_((1, 2, 5, 4)), F_((1, 2, 5, 4)), F_((3, 5))],
    lambda q, k, v, m: _sdpa(q, k, v, m), p=[0, 1])
add(NN, "scaled_dot_product_attention", [F_((2, 3, 4)), F_((2, 5, 4)), F_((2, 5, 2)), B_((3, 5))],
    lambda q, k, v, m: _sdpa(q, k, v, m.bool()), p=[0, 2], check=lambda vals: all(any(vals[3][r * 5:r * 5 + 5]) for r in range(3)))
# interpolate: n, sizes (2), align_corners
add(NN, "interpolate", [F_((1, 2, 3, 4))], lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False), p=[2, 5, 7, 0])
add(NN, "interpolate", [F_((1, 1, 4, 3))], lambda x: F.interpolate(x, size=(2, 9), mode="bilinear", align_corners=True), p=[2, 2, 9, 1])
add(NN, "interpolate", [F_((2, 3, 4))], lambda x: F.interpolate(x, size=6, mode="linear", align_corners=False), p=[1, 6, 0, 0])
add(NN, "interpolate", [F_((1, 1, 6, 5))], lambda x: F.interpolate(x, size=(3, 2), mode="bilinear", align_corners=False), p=[2, 3, 2, 0])
for name, diag, shape in [("triu", 0, (4, 5)), ("triu", 1, (2, 4, 3)), ("triu", -2, (5, 4)), ("tril", 0, (4, 5)), ("tril", -1, (2, 4, 3)),
                          ("tril", 2, (5, 4))]:
    add(NN, name, [F_(shape)], (lambda f, k: lambda x: f(x, k))(getattr(torch, name), diag), p=[diag])
add(NN, "masked_fill", [F_((3, 4)), B_((3, 4))], lambda x, m: x.masked_fill(m.bool(), 0.75), d=(0.75,))
add(NN, "masked_fill", [F_((3, 4)), B_((3, 1))], lambda x, m: x.masked_fill(m.bool(), -2.0), d=(-2.0,))
# A 0-dim value tensor asks for a gradient as well (the sum over the filled places).
add(NN, "masked_fill_tensor", [F_((2, 5)), B_((2, 5)), F_(())], lambda x, m, v: x.masked_fill(m.bool(), v))

# Larger cases (hundreds to a few thousand elements): reductions and windows the scheduler splits or tiles,
# long axes (cumsum's runs of 256), sizes that are not multiples of a vector width.
add_reduce("sum", (33, 40), [0], 0)
add_reduce("mean", (10, 70), [1], 1)
add_reduce("max", (300,), None, 0, distinct=True)
add_reduce("min", (9, 41), [1], 0, distinct=True)
add_reduce("prod", (40,), None, 0, lo=0.8, hi=1.2, nz=True)
add_reduce("var", (5, 130), [1], 0, 1)
add_reduce("std", (130, 5), [0], 0, 0)
add_reduce("logsumexp", (3, 257), [1], 0, lo=-4, hi=4)
add("reduce", "softmax", [F_((3, 257), -4, 4)], lambda x: torch.softmax(x, -1), p=[-1])
add("reduce", "log_softmax", [F_((260, 3), -4, 4)], lambda x: torch.log_softmax(x, 0), p=[0])
add("reduce", "cumsum", [F_((2, 530))], lambda x: torch.cumsum(x, 1), p=[1])
add(MOV, "permute", [F_((5, 7, 9))], lambda x: x.permute(1, 2, 0), p=[1, 2, 0])
add(MOV, "gather", [F_((12, 30)), I_((12, 45), 30)], lambda x, i: torch.gather(x, 1, i.long()), p=[1])
add(MM, "matmul", [F_((17, 33)), F_((33, 9))], torch.matmul)
add(MM, "matmul", [F_((3, 8, 20)), F_((3, 20, 11))], torch.matmul)
add(CONV, "conv2d", [F_((2, 3, 11, 11)), F_((6, 3, 3, 3)), F_((6,))], lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
    p=W(s=(2, 2), npad=1, pads=(1, 0, 0, 0), bias=1))
add(CONV, "max_pool2d", [F_((1, 2, 16, 16))], lambda x: F.max_pool2d(x, 3, 2, padding=1), p=W(k=(3, 3), s=(2, 2), npad=1, pads=(1, 0, 0, 0)),
    distinct=True)
add(CONV, "avg_pool2d", [F_((1, 3, 15, 15))], lambda x: F.avg_pool2d(x, 3), p=W(k=(3, 3)))
add(NN, "layernorm", [F_((4, 130))], lambda x: F.layer_norm(x, (130,), eps=1e-5), p=[1, -1], d=(1e-5,))
add(NN, "scaled_dot_product_attention", [F_((1, 2, 12, 16)), F_((1, 2, 10, 16)), F_((1, 2, 10, 8))], lambda q, k, v: _sdpa(q, k, v), p=[0, 0])
add(NN, "sparse_categorical_crossentropy", [F_((32, 10)), I_((32,), 10)], lambda x, y: F.cross_entropy(x, y.long()), p=[-1], d=(0.0,))

FAMILIES = ["unary", "binary", "reduce", "movement", "matmul", "conv", "nn"]


# ------------------------------------------------------------------ output

def pad(lst, k, fill=0):
    return list(lst) + [fill] * (k - len(lst))


def golden(case, rng):
    """Draws the inputs (again while they sit on a point without a derivative) and returns them with
    PyTorch's gradients."""
    for _ in range(1000):
        vals = [draw(rng, i) for i in case.ins]
        if case.idx is not None:  # getitem's tensor indices are the index list's, negatives included
            lists = [i for i in case.idx if isinstance(i, list)]
            for k, i in enumerate(lists):
                vals[1 + k] = [float(v) for v in torch.tensor(i).reshape(-1).tolist()]
        tensors = []
        for inp, v in zip(case.ins, vals):
            if inp.kind in "fct":
                t = torch.tensor(v, dtype=torch.float32).reshape(inp.shape).double()
                t.requires_grad_(inp.kind == "f")
            elif inp.kind == "b":
                t = torch.tensor(v, dtype=torch.float32).reshape(inp.shape).bool()
            else:
                t = torch.tensor(v, dtype=torch.float32).reshape(inp.shape).long()
            tensors.append(t)
        if acceptable(case, vals, tensors):
            break
    else:
        raise SystemExit("%s: no acceptable inputs" % case.fn)
    out = case.torch_fn(*tensors)
    loss = ((out + 1) ** 2).mean()
    loss.backward()
    grads = []
    for inp, t in zip(case.ins, tensors):
        if inp.kind == "f":
            g = t.grad if t.grad is not None else torch.zeros_like(t)
            grads += [f32(v) for v in g.reshape(-1).tolist()]
    return vals, grads


def main():
    rng = Rng(SEED)
    out = ["/* golden_grad.inc - PyTorch %s's gradients for tests/autograd/test_grad_api.c, generated by gen_grad_golden.py: do not edit (include after tact.h). */"
           % torch.__version__,
           "#include <math.h>", "#include <stdint.h>", "",
           "/* One case: out = tact_<fn>(inputs, parameters); want is d loss / d input for loss = ((out + 1) ** 2).mean(). */",
           "typedef struct {",
           "    const char *fn;     /* the function, as test_grad_api.c's s_apply names it */",
           "    int64_t p[18];      /* int parameters in the layout s_apply reads */",
           "    const char *text;   /* einsum: the formula */",
           "    double d[3];        /* float parameters */",
           "    int nin;",
           "    int ndim[5];",
           "    int64_t shape[5][6];",
           "    char kind[6];       /* per input: 'f' float32 asking for a gradient, 'c' float32, 'i' int32, 'b' bool */",
           "    const float *x;     /* the inputs' elements one after another */",
           "    const float *want;  /* the gradients of the 'f' inputs one after another */",
           "    int nidx;           /* getitem: the index list, TENSOR entries taking the int inputs in order */",
           "    tact_index idx[4];",
           "} golden_grad_t;", ""]
    tables = {f: [] for f in FAMILIES}
    for c, case in enumerate(CASES):
        vals, grads = golden(case, rng)
        tag = "g%d" % c
        flat = [v for vs in vals for v in vs]
        out.append("static const float %s_x[] = {%s};" % (tag, ", ".join(lit(v) for v in flat) or "0"))
        out.append("static const float %s_g[] = {%s};" % (tag, ", ".join(lit(v) for v in grads) or "0"))
        fields = ['.fn = "%s"' % case.fn]
        if case.p:
            fields.append(".p = {%s}" % ", ".join(map(str, case.p)))
        if case.text:
            fields.append('.text = "%s"' % case.text)
        if case.d:
            fields.append(".d = {%s}" % ", ".join(dlit(v) for v in case.d))
        fields.append(".nin = %d" % len(case.ins))
        fields.append(".ndim = {%s}" % ", ".join(str(len(i.shape)) for i in case.ins))
        fields.append(".shape = {%s}" % ", ".join("{%s}" % ", ".join(map(str, i.shape or (0,))) for i in case.ins))
        fields.append('.kind = "%s"' % "".join({"l": "i", "t": "c"}.get(i.kind, i.kind) for i in case.ins))
        fields.append(".x = %s_x, .want = %s_g" % (tag, tag))
        if case.idx is not None:
            fields.append(".nidx = %d, .idx = {%s}" % (len(case.idx), ", ".join(idx_c(i, []) for i in case.idx) or "TACT_ALL"))
        tables[case.family].append("    {%s}," % ", ".join(fields))
    for fam in FAMILIES:
        out += ["", "static const golden_grad_t golden_grad_%s[] = {" % fam] + tables[fam] + ["};"]
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", OUT, ", ".join("%s %d" % (f, len(tables[f])) for f in FAMILIES), "cases", file=sys.stderr)


if __name__ == "__main__":
    main()
