"""tact's dtypes under the reference's names (tinygrad's `dtypes`)."""
from . import _tact


class DType:
    __slots__ = ("code", "name", "itemsize", "fmt", "np")

    def __init__(self, code, name, itemsize, fmt, np):
        self.code, self.name, self.itemsize, self.fmt, self.np = code, name, itemsize, fmt, np

    def __repr__(self):
        return f"dtypes.{self.name}"

    def __eq__(self, other):
        return isinstance(other, DType) and other.code == self.code

    def __hash__(self):
        return self.code


def _d(name, itemsize, fmt, np):
    return DType(getattr(_tact, "DT_" + name.upper()), name, itemsize, fmt, np)


class dtypes:
    bool = _d("bool", 1, "?", "bool")
    int8 = _d("int8", 1, "b", "int8")
    uint8 = _d("uint8", 1, "B", "uint8")
    int16 = _d("int16", 2, "h", "int16")
    uint16 = _d("uint16", 2, "H", "uint16")
    int32 = _d("int32", 4, "i", "int32")
    uint32 = _d("uint32", 4, "I", "uint32")
    int64 = _d("int64", 8, "q", "int64")
    uint64 = _d("uint64", 8, "Q", "uint64")
    float16 = _d("float16", 2, "e", "float16")
    bfloat16 = _d("bfloat16", 2, None, None)
    float32 = _d("float32", 4, "f", "float32")
    float64 = _d("float64", 8, "d", "float64")
    # The reference's aliases.
    half, float, double = float16, float32, float64
    char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64
    default_float = float32
    default_int = int32

    @staticmethod
    def is_float(d):
        return d in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)

    @staticmethod
    def is_int(d):
        return d in _INTS

    @staticmethod
    def is_unsigned(d):
        return d in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)


_INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
BY_CODE = {d.code: d for d in (dtypes.bool, *_INTS, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)}
BY_NP = {d.np: d for d in BY_CODE.values() if d.np}
