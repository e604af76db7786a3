"""The reference's nn layers (tinygrad 0.9.2 `tinygrad.nn`), made and applied
by tact's C layers (`tact_layer_*`: the same initialization as `tact train`).
`Tensor.training` selects batch statistics and active dropout, as in the
reference."""
from .. import _tact
from ..tensor import Tensor

__all__ = ["Linear", "Conv2d", "BatchNorm2d", "BatchNorm", "LayerNorm", "Embedding", "optim", "state"]


def _pair(v, n=2):
    return (v,) * n if isinstance(v, int) else tuple(v)


class _Layer:
    _kind = ""
    _eps = 1e-5
    _momentum = 0.1
    _naxes = 0
    _stride = _dilation = _padding = ()
    _groups = 1

    def _made(self, kind, sizes, a=1, b=1):
        w, bias, rm, rv = _tact.layer_new(kind, sizes, self._eps, self._momentum, a, b, self._stride, self._dilation, self._padding, self._groups)
        self.weight = None if w is None else Tensor(w)
        self.bias = None if bias is None else Tensor(bias)
        if rm is not None:
            self.running_mean, self.running_var = Tensor(rm), Tensor(rv)

    def __call__(self, x):
        h = lambda t: None if t is None else t._h  # noqa: E731
        return Tensor(
            _tact.layer_forward(self._kind, x._h, h(getattr(self, "weight", None)), h(getattr(self, "bias", None)),
                                h(getattr(self, "running_mean", None)), h(getattr(self, "running_var", None)), self._eps, self._momentum,
                                0.0, int(bool(Tensor.training)), self._naxes, self._stride, self._dilation, self._padding, self._groups))


class Linear(_Layer):
    """Linear(in_features, out_features, bias=True): x @ weight.T + bias."""

    _kind = "linear"

    def __init__(self, in_features, out_features, bias=True):
        self._made("linear", (in_features, out_features), int(bias))


class Conv2d(_Layer):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True)."""

    _kind = "conv2d"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
        self._stride, self._dilation, self._groups = _pair(stride), _pair(dilation), groups
        self._padding = (padding,) if isinstance(padding, int) else tuple(padding)
        k = _pair(kernel_size)
        self._made("conv2d", (in_channels, out_channels // 1, k[0], k[1]), int(bias))


class BatchNorm2d(_Layer):
    """BatchNorm2d(sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1)."""

    _kind = "batchnorm"

    def __init__(self, sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1):
        self._eps, self._momentum = eps, momentum
        self._made("batchnorm", (sz,), int(affine), int(track_running_stats))


BatchNorm = BatchNorm2d


class LayerNorm(_Layer):
    """LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)."""

    _kind = "layernorm"

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self._eps, self._naxes = eps, len(shape)
        self._made("layernorm", shape, int(elementwise_affine))


class Embedding(_Layer):
    """Embedding(vocab_size, embed_size): rows of weight picked by int indices."""

    _kind = "embedding"

    def __init__(self, vocab_size, embed_size):
        self._made("embedding", (vocab_size, embed_size))


from . import optim, state  # noqa: E402
