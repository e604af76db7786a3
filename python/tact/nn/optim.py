"""The reference's optimizers (`tinygrad.nn.optim`) over tact's (`tact_optim_*`)."""
from .. import _tact

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer:
    def __init__(self, params, kind, lr, momentum=0.0, weight_decay=0.0, nesterov=False, b1=0.9, b2=0.999, eps=1e-8):
        # The Tensors stay alive with the optimizer (it updates them in place).
        # As the reference's: an unset requires_grad becomes True; tensors that
        # do not require a gradient (a batch norm's running statistics) are
        # buffers, whose pending updates each step realizes.
        self.params = list(params)
        for p in self.params:
            if p.requires_grad is None:
                p.requires_grad = True
        self._o = _tact.optim_new(kind, [p._h for p in self.params], lr, momentum, weight_decay, nesterov, b1, b2, eps)

    def step(self):
        """One update of every parameter from its gradient, realized."""
        _tact.optim("step", self._o)

    def zero_grad(self):
        _tact.optim("zero_grad", self._o)

    @property
    def lr(self):
        return _tact.optim("lr", self._o)

    @lr.setter
    def lr(self, value):
        _tact.optim("set_lr", self._o, float(value))


def SGD(params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False):
    if classic:
        raise NotImplementedError("SGD(classic=True): tact's SGD is the reference's default form only")
    return Optimizer(params, 0, lr, momentum, weight_decay, nesterov)


def Adam(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
    return Optimizer(params, 1, lr, b1=b1, b2=b2, eps=eps)


def AdamW(params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01):
    return Optimizer(params, 2, lr, weight_decay=weight_decay, b1=b1, b2=b2, eps=eps)
