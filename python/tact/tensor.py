"""tact.Tensor: the reference's Tensor (tinygrad 0.9.2) over tact's C API."""
import array
import math
import struct

from . import _tact
from .dtype import BY_CODE, BY_NP, DType, dtypes

try:
    import numpy as _np
except ImportError:  # numpy is optional: lists and bytes still work
    _np = None

_UNARY, _BINARY, _REDUCE = ({n: i for i, n in enumerate(t)} for t in _tact.op_names())


def _shape_args(shape, args):
    """reshape((2, 3)) and reshape(2, 3) alike."""
    if args:
        return (shape, *args)
    if isinstance(shape, int):
        return (shape,)
    return tuple(shape)


def _new_shape(shape):
    """A shape for a new tensor: a negative dim is the reference's ValueError."""
    shape = _shape_args(shape[0], shape[1:]) if shape else ()
    if any(not isinstance(s, int) or s < 0 for s in shape):
        raise ValueError(f"cannot create a tensor of shape {shape}: dims must be ints of 0 or more")
    return shape


def _flatten(data):
    """A nested list's elements in row-major order and its shape (rectangular only)."""
    shape, level = [], [data]
    while level and isinstance(level[0], (list, tuple)):
        n = len(level[0])
        if any(not isinstance(x, (list, tuple)) or len(x) != n for x in level):
            raise ValueError("a nested list of uneven lengths is not a tensor")
        shape.append(n)
        level = [y for x in level for y in x]
    if any(isinstance(x, (list, tuple)) for x in level):
        raise ValueError("a nested list of uneven depths is not a tensor")
    return level, tuple(shape)


def _infer(flat):
    if all(isinstance(x, bool) for x in flat) and flat:
        return dtypes.bool
    if all(isinstance(x, int) for x in flat) and flat:
        return dtypes.default_int
    return dtypes.default_float


def _pack(flat, dtype):
    """The elements' bytes in dtype, or None for bfloat16 (no host format)."""
    if dtype.fmt is None:
        return None
    if dtype == dtypes.bool:
        return bytes(bool(x) for x in flat)
    if dtype.fmt == "e":
        return struct.pack(f"{len(flat)}e", *map(float, flat))
    return array.array(dtype.fmt, map(float if dtypes.is_float(dtype) else int, flat)).tobytes()


class Tensor:
    """A lazy tensor of tact's context: ops build the graph, reads compute it."""

    __slots__ = ("_h", "__weakref__")
    __hash__ = object.__hash__  # == is elementwise
    training = False  # the reference's: nn layers use batch statistics and dropout when True

    def __init__(self, data, device=None, dtype=None, requires_grad=None):
        if isinstance(data, _tact.Handle):
            self._h = data
        elif isinstance(data, Tensor):
            self._h = data._h if dtype is None or dtype == data.dtype else _tact.shaped("cast", data._h, (dtype.code,))
        elif _np is not None and isinstance(data, _np.ndarray):
            arr = data if data.flags.c_contiguous else _np.ascontiguousarray(data)  # (ascontiguousarray makes a 0-d array 1-d)
            d = dtype or BY_NP.get(str(arr.dtype))
            if d is None:
                raise TypeError(f"numpy arrays of {arr.dtype} have no tact dtype")
            if d.np != str(arr.dtype):
                arr = _np.ascontiguousarray(arr.astype(d.np)) if d.np else arr
            self._h = _tact.from_buffer(arr.reshape(-1).view(_np.uint8) if arr.size else b"", d.code, arr.shape)
        elif isinstance(data, (bool, int, float)):
            d = dtype or _infer([data])
            raw = _pack([data], d)  # exact, also for ints past a double's 53 bits
            self._h = _tact.fill("full", (), float(data), d.code) if raw is None else _tact.from_buffer(raw, d.code, ())
        elif isinstance(data, (list, tuple)):
            flat, shape = _flatten(data)
            d = dtype or _infer(flat)
            raw = _pack(flat, d)
            if raw is None:  # bfloat16: made as float32, then cast
                self._h = _tact.shaped("cast", _tact.from_buffer(_pack(flat, dtypes.float32), dtypes.float32.code, shape), (d.code,))
            else:
                self._h = _tact.from_buffer(raw, d.code, shape)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            d = dtype or dtypes.uint8
            self._h = _tact.from_buffer(data, d.code, (len(data) // d.itemsize,))
        else:
            raise TypeError(f"cannot make a tensor of {type(data).__name__}")
        if device is not None and device != self.device:
            self._h = _tact.to(self._h, device)
        if requires_grad is not None:
            self.requires_grad = requires_grad

    # ------------------------------------------------------------ properties
    @property
    def shape(self):
        return _tact.info(self._h)[0]

    @property
    def dtype(self):
        return BY_CODE[_tact.info(self._h)[1]]

    @property
    def device(self):
        return _tact.info(self._h)[2]

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def element_size(self):
        return self.dtype.itemsize

    def nbytes(self):
        return self.numel() * self.element_size()

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        return f"<Tensor shape={self.shape} dtype={self.dtype} device={self.device!r}>"

    # ------------------------------------------------------------ data out
    def realize(self):
        _tact.realize(self._h)
        return self

    def _raw(self):
        t = self if self.dtype != dtypes.bfloat16 else self.cast(dtypes.float32)
        return _tact.read(t._h), t.dtype

    def numpy(self):
        if _np is None:
            raise ImportError("numpy() needs numpy")
        raw, d = self._raw()
        return _np.frombuffer(raw, dtype=d.np).reshape(self.shape)  # over the bytearray read: writable, no second copy

    def tolist(self):
        raw, d = self._raw()
        if d == dtypes.bool:
            flat = [b != 0 for b in raw]
        else:
            flat = list(struct.unpack(f"{len(raw) // d.itemsize}{d.fmt}", raw))
        for n in reversed(self.shape[1:]):
            flat = [flat[i : i + n] for i in range(0, len(flat), n)]
        return flat[0] if not self.shape else flat

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item() of a tensor of {self.numel()} elements")
        v = self.reshape(()).tolist()
        return v

    def __bool__(self):
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    # ------------------------------------------------------------ creation
    @staticmethod
    def manual_seed(seed=0):
        _tact.manual_seed(seed)

    @staticmethod
    def full(shape, fill_value, dtype=None, **kw):
        d = dtype or (dtypes.bool if isinstance(fill_value, bool) else dtypes.default_int if isinstance(fill_value, int) else dtypes.default_float)
        return Tensor(_tact.fill("full", _new_shape((shape,)), float(fill_value), d.code), **kw)

    @staticmethod
    def zeros(*shape, dtype=None, **kw):
        return Tensor.full(_new_shape(shape), 0.0, dtype or dtypes.default_float, **kw)

    @staticmethod
    def ones(*shape, dtype=None, **kw):
        return Tensor.full(_new_shape(shape), 1.0, dtype or dtypes.default_float, **kw)

    @staticmethod
    def rand(*shape, dtype=None, **kw):
        return Tensor(_tact.fill("rand", _new_shape(shape), 0.0, (dtype or dtypes.default_float).code), **kw)

    @staticmethod
    def randn(*shape, dtype=None, **kw):
        return Tensor(_tact.fill("randn", _new_shape(shape), 0.0, (dtype or dtypes.default_float).code), **kw)

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None, **kw):
        if stop is None:
            start, stop = 0, start
        d = dtype or (dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) else dtypes.default_int)
        return Tensor(_tact.arange(float(start), float(stop), float(step), d.code), **kw)

    @staticmethod
    def eye(n, m=None, dtype=None, **kw):
        m = n if m is None else m
        if not isinstance(n, int) or not isinstance(m, int) or n < 0 or m < 0:
            raise ValueError(f"eye({n}, {m}): sizes must be ints of 0 or more")
        e = Tensor(_tact.eye(max(n, m), (dtype or dtypes.default_float).code))
        return Tensor(e[:n, :m] if n != m else e, **kw)

    @staticmethod
    def _made(name, shape, dtype, a=0.0, b=0.0, **kw):
        shape = _new_shape(shape)
        return Tensor(_tact.make(name, shape, (dtype or dtypes.default_float).code, float(a), float(b)), **kw)

    @staticmethod
    def empty(*shape, dtype=None, **kw):
        return Tensor._made("empty", shape, dtype, **kw)

    @staticmethod
    def uniform(*shape, low=0.0, high=1.0, dtype=None, **kw):
        return Tensor._made("uniform", shape, dtype, low, high, **kw)

    @staticmethod
    def normal(*shape, mean=0.0, std=1.0, dtype=None, **kw):
        return Tensor._made("normal", shape, dtype, mean, std, **kw)

    @staticmethod
    def randint(*shape, low=0, high=10, dtype=None, **kw):
        return Tensor._made("randint", shape, dtype or dtypes.int32, low, high, **kw)

    @staticmethod
    def kaiming_uniform(*shape, a=0.01, dtype=None, **kw):
        return Tensor._made("kaiming_uniform", shape, dtype, a, **kw)

    @staticmethod
    def kaiming_normal(*shape, a=0.01, dtype=None, **kw):
        return Tensor._made("kaiming_normal", shape, dtype, a, **kw)

    @staticmethod
    def glorot_uniform(*shape, dtype=None, **kw):
        return Tensor._made("glorot_uniform", shape, dtype, **kw)

    @staticmethod
    def scaled_uniform(*shape, dtype=None, **kw):
        return Tensor._made("scaled_uniform", shape, dtype, **kw)

    @staticmethod
    def einsum(formula, *raw_xs):
        xs = raw_xs[0] if len(raw_xs) == 1 and isinstance(raw_xs[0], (list, tuple)) else raw_xs
        # The reference's assertions: one operand a tensor, each letter one size.
        operands = formula.replace(" ", "").split("->")[0].split(",")
        assert len(operands) == len(xs), f"einsum: {len(operands)} operands in {formula!r}, {len(xs)} tensors"
        sizes = {}
        for letters, x in zip(operands, xs):
            assert len(letters) == x.ndim, f"einsum: {letters!r} for a tensor of shape {x.shape}"
            for c, n in zip(letters, x.shape):
                assert sizes.setdefault(c, n) == n, f"einsum: {c!r} is {sizes[c]} and {n}"
        return Tensor(_tact.einsum(formula, [x._h for x in xs]))

    def full_like(self, fill_value, dtype=None, **kw):
        return Tensor.full(self.shape, fill_value, dtype or self.dtype, **kw)

    def zeros_like(self, **kw):
        return self.full_like(0, **kw)

    def ones_like(self, **kw):
        return self.full_like(1, **kw)

    # ------------------------------------------------------------ autograd
    @property
    def requires_grad(self):
        return _tact.requires_grad(self._h)

    @requires_grad.setter
    def requires_grad(self, flag):
        _tact.set_requires_grad(self._h, -1 if flag is None else int(bool(flag)))

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    @property
    def grad(self):
        g = _tact.grad(self._h)
        return None if g is None else Tensor(g)

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise ValueError("only None can be assigned to grad (it drops the gradient)")
        _tact.grad_clear(self._h)

    def backward(self, gradient=None):
        _tact.backward(self._h, None if gradient is None else gradient._h)
        return self

    def detach(self):
        return self._u("detach")

    # ------------------------------------------------------------ op plumbing
    def _u(self, name):
        return Tensor(_tact.unary(_UNARY[name], self._h))

    def _b(self, name, other, reverse=False):
        o = other._h if isinstance(other, Tensor) else other
        return Tensor(_tact.binary(_BINARY[name], o, self._h) if reverse else _tact.binary(_BINARY[name], self._h, o))

    def _axes(self, axis):
        """A reduction's axes: None (all), or a tuple each in range (the reference's IndexError otherwise)."""
        if axis is None:
            return None
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        for a in axes:
            self._resolve_dim(a)
        return axes

    def _r(self, name, axis, keepdim):
        return Tensor(_tact.reduce(_REDUCE[name], self._h, self._axes(axis), keepdim))

    def _s(self, kind, *ints):
        return Tensor(_tact.shaped(kind, self._h, ints))

    # ------------------------------------------------------------ movement
    def reshape(self, shape, *args):
        shape = _shape_args(shape, args)
        shape = tuple(self.shape[i] if s is None else s for i, s in enumerate(shape))
        if shape.count(-1) > 1:
            raise RuntimeError(f"reshape to {shape}: only one dimension can be inferred")
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple((self.numel() // known if known else 0) if s == -1 else s for s in shape)
        if math.prod(shape) != self.numel():
            raise ValueError(f"size mismatch, cannot reshape {self.shape} to {shape}")
        return self._s("reshape", *shape)

    def view(self, shape, *args):
        return self.reshape(shape, *args)

    def permute(self, order, *args):
        return self._s("permute", *_shape_args(order, args))

    def expand(self, shape, *args):
        shape = _shape_args(shape, args)
        shape = tuple(s if s != -1 else self.shape[i - len(shape) + self.ndim] for i, s in enumerate(shape))
        return self._s("expand", *shape)

    def transpose(self, dim0=1, dim1=0):
        return self._s("transpose", dim0, dim1)

    @property
    def T(self):
        return self.transpose()

    def flatten(self, start_dim=0, end_dim=-1):
        return self._s("flatten", start_dim, end_dim)

    def squeeze(self, dim=None):
        return self._s("squeeze") if dim is None else self._s("squeeze", self._resolve_dim(dim))

    def unsqueeze(self, dim):
        return self._s("unsqueeze", self._resolve_dim(dim, outer=True))

    def contiguous(self):
        return self._u("contiguous")

    def _resolve_dim(self, dim, outer=False):
        """dim in range as the reference's (an IndexError otherwise): a 0-dim tensor takes -1 and 0."""
        n = max(1, self.ndim + outer)
        if not -n <= dim < n:
            raise IndexError(f"dim={dim} out of range {[-n, n - 1]}")
        return dim + self.ndim + outer if dim < 0 else dim

    def _check_index(self, idx):
        """The reference's argument errors of an index, before tact sees it (IndexError, ValueError)."""
        if sum(i is Ellipsis for i in idx) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        used = [i for i in idx if i is not None and i is not Ellipsis]
        if len(used) > self.ndim:
            raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
        dim = 0
        for k, i in enumerate(idx):
            if i is Ellipsis:
                dim += self.ndim - len(used)  # the dims it stands for
                continue
            if i is None:
                continue
            if isinstance(i, int) and not isinstance(i, bool) and not -self.shape[dim] <= i < self.shape[dim]:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {self.shape[dim]}")
            if isinstance(i, slice) and i.step == 0:
                raise ValueError("slice step cannot be 0")
            if isinstance(i, Tensor) and not dtypes.is_int(i.dtype):
                raise IndexError(f"tensors used as indices must be int tensors, not {i.dtype}")
            dim += 1

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        # A list or a tuple inside the index (of ints, nested, or of tensors) indexes as the tensor of it.
        def as_index(i):
            if isinstance(i, (list, tuple)) and any(isinstance(e, Tensor) for e in i):
                return Tensor.stack(*[e if isinstance(e, Tensor) else Tensor(e, dtype=dtypes.int32) for e in i])
            return Tensor(list(i), dtype=dtypes.int32) if isinstance(i, (list, tuple)) else i

        idx = tuple(as_index(i) for i in idx)
        self._check_index(idx)
        try:
            return Tensor(_tact.getitem(self._h, tuple(i._h if isinstance(i, Tensor) else i for i in idx)))
        except _tact.TactError as e:
            if e.args[1] == "ESHAPE" and any(isinstance(i, Tensor) for i in idx):  # tensor indices that do not broadcast
                raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together ({e.args[2]})") from e
            raise

    def __setitem__(self, idx, value):
        """x[idx] = value: x (which must hold its own data) names its new contents, as an assign (tact_setitem)."""
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(isinstance(i, (Tensor, list)) for i in idx):
            raise TypeError("setitem with tensor indices is not supported (the reference refuses it too)")
        self._check_index(idx)
        _tact.setitem(self._h, idx, value._h if isinstance(value, Tensor) else value)

    def cat(self, *args, dim=0):
        return Tensor(_tact.join("cat", (self._h, *(a._h for a in args)), self._resolve_dim(dim)))

    def stack(self, *args, dim=0):
        return Tensor(_tact.join("stack", (self._h, *(a._h for a in args)), self._resolve_dim(dim, outer=True)))

    def to(self, device):
        return Tensor(_tact.to(self._h, device))

    # ------------------------------------------------------------ casts
    def cast(self, dtype):
        return self if dtype == self.dtype else self._s("cast", dtype.code)

    def float(self):
        return self.cast(dtypes.float32)

    def half(self):
        return self.cast(dtypes.float16)

    def int(self):
        return self.cast(dtypes.int32)

    def bool(self):
        return self.cast(dtypes.bool)

    # ------------------------------------------------------------ reductions
    # (sum, max, min, mean, any, all, prod, logsumexp: made from the C table, below)
    def var(self, axis=None, keepdim=False, correction=1):
        return Tensor(_tact.moment("var", self._h, self._axes(axis), keepdim, float(correction)))

    def std(self, axis=None, keepdim=False, correction=1):
        return Tensor(_tact.moment("std", self._h, self._axes(axis), keepdim, float(correction)))

    def argmax(self, axis=None, keepdim=False):
        if axis is None:
            return self.flatten()._s("argmax", 0, 0)
        return self._s("argmax", axis, int(keepdim))

    def argmin(self, axis=None, keepdim=False):
        if axis is None:
            return self.flatten()._s("argmin", 0, 0)
        return self._s("argmin", axis, int(keepdim))

    def softmax(self, axis=-1):
        return self._s("softmax", axis)

    def log_softmax(self, axis=-1):
        return self._s("log_softmax", axis)

    def cumsum(self, axis=0):
        return self._s("cumsum", axis)

    # ------------------------------------------------------------ more of the reference
    def _f(self, name, a, b=0.0):
        return Tensor(_tact.with_floats(name, self._h, float(a), float(b)))

    def elu(self, alpha=1.0):
        return self._f("elu", alpha)

    def celu(self, alpha=1.0):
        return self._f("celu", alpha)

    def leakyrelu(self, neg_slope=0.01):
        return self._f("leakyrelu", neg_slope)

    def softplus(self, beta=1):
        return self._f("softplus", beta)

    def clip(self, min_=None, max_=None):
        if min_ is None and max_ is None:
            raise RuntimeError("clip: at least one of min_ and max_ is needed")
        return self._f("clip", -math.inf if min_ is None else min_, math.inf if max_ is None else max_)

    def hardtanh(self, min_val=-1, max_val=1):
        return self._f("hardtanh", min_val, max_val)

    def _i(self, name, *ints, other=None):
        return Tensor(_tact.with_ints(name, self._h, ints, None if other is None else other._h))

    def one_hot(self, num_classes):
        return self._i("one_hot", num_classes)

    def triu(self, k=0):
        return self._i("triu", k)

    def tril(self, k=0):
        return self._i("tril", k)

    def lshift(self, x):
        return self._i("lshift", x)

    def rshift(self, x):
        return self._i("rshift", x)

    __lshift__, __rshift__ = lshift, rshift

    def repeat_interleave(self, repeats, dim=None):
        return (self.flatten() if dim is None else self)._i("repeat_interleave", repeats, 0 if dim is None else dim)

    def multinomial(self, num_samples=1, replacement=False):
        return self._i("multinomial", num_samples, int(replacement))

    def flip(self, axis, *args):
        return self._i("flip", *_shape_args(axis, args))

    def repeat(self, repeats, *args):
        repeats = _shape_args(repeats, args)
        if len(repeats) < self.ndim:
            raise ValueError(f"repeat: {len(repeats)} repeats for a {self.ndim}-dim tensor (at least one a dim)")
        return self._i("repeat", *repeats)

    def unflatten(self, dim, sizes):
        return self._i("unflatten", dim, *sizes)

    def gather(self, dim, index):
        return self._i("gather", dim, other=index)

    def pad(self, arg, value=0.0):
        pairs = [p for a in arg for p in ((0, 0) if a is None else a)]
        pairs += [0, 0] * (self.ndim - len(arg))
        return Tensor(_tact.pad("pad", self._h, pairs, float(value)))

    def pad2d(self, padding, value=0.0):
        return Tensor(_tact.pad("pad2d", self._h, tuple(padding), float(value)))

    def interpolate(self, size, mode="linear", align_corners=False):
        if mode != "linear":
            raise ValueError(f"interpolate: mode {mode!r} (the reference's only mode is 'linear')")
        return Tensor(_tact.pad("interpolate", self._h, tuple(size), float(bool(align_corners))))

    def lerp(self, end, weight):
        return Tensor(_tact.ternary("lerp", self._h, end._h if isinstance(end, Tensor) else end, weight._h if isinstance(weight, Tensor) else weight))

    def masked_fill(self, mask, value):
        return Tensor(_tact.ternary("masked_fill", self._h, mask._h, value._h if isinstance(value, Tensor) else value))

    def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p=0.0, is_causal=False):
        return Tensor(_tact.sdpa(self._h, key._h, value._h, None if attn_mask is None else attn_mask._h, dropout_p, is_causal, bool(Tensor.training)))

    def split(self, sizes, dim=0):
        d = dim + self.ndim if dim < 0 else dim
        if isinstance(sizes, int):
            n = self.shape[d]
            sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if sizes > 0 else [n]
        return [Tensor(h) for h in _tact.split(self._h, tuple(sizes), d)]

    def chunk(self, num, dim=0):
        n = self.shape[dim]
        step = -(-n // num) if num else n
        return self.split(step, dim)

    def binary_crossentropy(self, y):
        return self._b("binary_crossentropy", y)

    def binary_crossentropy_logits(self, y):
        return self._b("binary_crossentropy_logits", y)

    def conv_transpose2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0, output_padding=0):
        return self._win("conv_transpose2d", weight, bias, (), stride, dilation, padding, groups, output_padding=output_padding)

    # ------------------------------------------------------------ nn functions
    def _win(self, kind, weight, bias, kernel, stride, dilation, padding, groups=1, count_include_pad=True, output_padding=0):
        k = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
        st = () if stride is None else (stride, stride) if isinstance(stride, int) else tuple(stride)
        dl = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
        pd = (padding,) if isinstance(padding, int) else tuple(padding)
        op = (output_padding, output_padding) if isinstance(output_padding, int) else tuple(output_padding)
        return Tensor(_tact.window(kind, self._h, None if weight is None else weight._h, None if bias is None else bias._h, k, st, dl, pd, groups,
                                   count_include_pad, op))

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0):
        return self._win("max_pool2d", None, None, kernel_size, stride, dilation, padding)

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, count_include_pad=True):
        return self._win("avg_pool2d", None, None, kernel_size, stride, dilation, padding, 1, count_include_pad)

    def conv2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0):
        return self._win("conv2d", weight, bias, (), stride, dilation, padding, groups)

    def linear(self, weight, bias=None):
        """x @ weight + bias, weight (in, out) as the reference's."""
        return Tensor(_tact.linear(self._h, weight._h, None if bias is None else bias._h))

    def sparse_categorical_crossentropy(self, Y, ignore_index=-1, label_smoothing=0.0):
        return Tensor(_tact.sparse_ce(self._h, Y._h, ignore_index, label_smoothing))

    def dropout(self, p=0.5):
        return Tensor(_tact.dropout(self._h, p, bool(Tensor.training)))

    # ------------------------------------------------------------ binary ops
    def add(self, x, reverse=False):
        return self._b("add", x, reverse)

    def sub(self, x, reverse=False):
        return self._b("sub", x, reverse)

    def mul(self, x, reverse=False):
        return self._b("mul", x, reverse)

    def div(self, x, reverse=False, upcast=True):
        """x / y; with upcast=False ints divide as ints (truncating), as the reference's."""
        if not upcast and dtypes.is_int(self.dtype) and (isinstance(x, int) or (isinstance(x, Tensor) and dtypes.is_int(x.dtype))):
            return self._b("idiv", x, reverse)
        return self._b("div", x, reverse)

    def pow(self, x, reverse=False):
        return self._b("pow", x, reverse)

    def matmul(self, x, reverse=False):
        return self._b("matmul", x, reverse)

    def dot(self, w):
        return self._b("dot", w)

    def maximum(self, x):
        return self._b("maximum", x)

    def minimum(self, x):
        return self._b("minimum", x)

    def xor(self, x):
        return self._b("xor", x)

    def where(self, x, y):
        return Tensor(_tact.where(self._h, x._h if isinstance(x, Tensor) else x, y._h if isinstance(y, Tensor) else y))

    def assign(self, x):
        if not isinstance(x, Tensor):
            x = Tensor(x, dtype=self.dtype)
        _tact.assign(self._h, x._h)
        return self

    def __neg__(self):
        return self._u("neg")

    def __invert__(self):
        return self._u("logical_not") if self.dtype == dtypes.bool else self.xor(-1)


def _unary_method(name):
    def fn(self):
        return self._u(name)

    fn.__name__ = name
    return fn


def _binary_method(name, reverse=False):
    def fn(self, x):
        return self._b(name, x, reverse)

    return fn


def _inplace_method(op):
    def fn(self, x):
        return self.assign(op(self, x))

    return fn


# Operators: the reference's dunders, the reversed ones with the operand first.
for _d, _n in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"), ("pow", "pow"), ("matmul", "matmul")):
    setattr(Tensor, f"__{_d}__", _binary_method(_n))
    setattr(Tensor, f"__r{_d}__", _binary_method(_n, True))
    setattr(Tensor, f"__i{_d}__", _inplace_method(getattr(Tensor, f"__{_d}__")))
for _d, _n in (("mod", "mod"), ("floordiv", "idiv"), ("lt", "lt"), ("gt", "gt"), ("le", "le"), ("ge", "ge"), ("eq", "eq"), ("ne", "ne"),
               ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "xor")):
    setattr(Tensor, f"__{_d}__", _binary_method(_n))
for _d, _n in (("mod", "mod"), ("floordiv", "idiv"), ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "xor")):
    setattr(Tensor, f"__r{_d}__", _binary_method(_n, True))


def _reduce_method(name):
    def fn(self, axis=None, keepdim=False, acc_dtype=None):
        return self._r(name, axis, keepdim)

    fn.__name__ = name
    return fn


for _n in _REDUCE:
    setattr(Tensor, _n, _reduce_method(_n))
for _n in _UNARY:
    if _n not in ("detach", "contiguous", "sum_all", "mean_all", "max_all", "min_all") and not hasattr(Tensor, _n):
        setattr(Tensor, _n, _unary_method(_n))
