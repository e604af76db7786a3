"""The reference's `tinygrad.nn.state`: a model's tensors by name, and safetensors files."""
import json
import struct

from .. import _tact
from ..tensor import Tensor

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata"]


def get_state_dict(obj, prefix="", tensor_type=Tensor):
    """Every Tensor reachable from obj's attributes, lists, tuples and dicts, named by the path to it ("l1.weight")."""
    if isinstance(obj, tensor_type):
        return {prefix.strip("."): obj}
    if hasattr(obj, "_asdict"):
        return get_state_dict(obj._asdict(), prefix, tensor_type)
    state = {}
    if isinstance(obj, (list, tuple)):
        for i, x in enumerate(obj):
            state.update(get_state_dict(x, f"{prefix}{i}.", tensor_type))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            state.update(get_state_dict(v, f"{prefix}{k}.", tensor_type))
    elif hasattr(obj, "__dict__"):
        return get_state_dict(obj.__dict__, prefix, tensor_type)
    return state


def get_parameters(obj):
    return list(get_state_dict(obj).values())


def safe_save(tensors, fn, metadata=None):
    """Writes the dict of name -> Tensor to a safetensors file (tact_save_safetensors)."""
    names = list(tensors)
    _tact.safe_save(fn, names, [tensors[n]._h for n in names])


def safe_load_metadata(fn):
    """The file's header: name -> {dtype, shape, data_offsets} (checked as tact reads it)."""
    with open(fn, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{fn}: not a safetensors file (shorter than its header's length)")
        (n,) = struct.unpack("<Q", head)
        if n > 100 << 20:
            raise ValueError(f"{fn}: a header of {n} bytes")
        return json.loads(f.read(n))


def safe_load(fn):
    """Every tensor of a safetensors file, by name (tact_load_safetensors each)."""
    return {name: Tensor(_tact.safe_load(fn, name)) for name in safe_load_metadata(fn) if name != "__metadata__"}


def load_state_dict(model, state_dict, strict=True):
    """Assigns each tensor of state_dict to the model's tensor of its name."""
    own = get_state_dict(model)
    missing = [k for k in own if k not in state_dict]
    if strict and missing:
        raise KeyError(f"not in the state dict: {', '.join(missing)}")
    for k, t in own.items():
        if k in state_dict:
            t.assign(state_dict[k]).realize()
