"""MindSpore binding of the ops namespace (``backends.get("mindspore")``), on CPU by default.

Every op is executed with the *same* generated MindSpore code the lowering
compiles into graphs: a call traces one op (``backends.mindspore.trace``),
emits it through the rule table (``backends.mindspore.rules``) and runs the
result op by op (PyNative). So this binding and lowered graphs cannot drift
apart, and both reproduce ``compressors/ops.py`` exactly (saturating casts
with NaN -> 0, stable top-k, drop-mode scatter, threefry bits, halving-order
sum) despite MindSpore's CPU quirks (see the rules module).

Arrays are :class:`MSArray` — a ``mindspore.Tensor`` (``.tensor``) with the
namespace's array protocol: NumPy dtypes, and operators that go through the
same rules (so ``x - y`` on uint32 or ``x / broadcast`` match the reference).
Plain ``mindspore.Tensor`` s and NumPy arrays are accepted as inputs.
Eager execution is for tests and notebooks; training lowers the whole
compressor into one graph (``backends.mindspore.lower``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compressors.fused import Fused
from compressors.ops import OP_NAMES

_CACHE: dict = {}


class MSArray:
    """A MindSpore tensor with the ops namespace's array protocol (NumPy dtypes,
    exact ``+ - * / < & << [i]`` semantics through the lowering rules)."""

    __slots__ = ("tensor",)
    __array_priority__ = 1000

    def __init__(self, tensor):
        self.tensor = tensor

    shape = property(lambda self: tuple(int(s) for s in self.tensor.shape))
    dtype = property(lambda self: _np_dtype(self.tensor))
    ndim = property(lambda self: len(self.tensor.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def asnumpy(self) -> np.ndarray:
        from backends.mindspore.lower import to_np
        return to_np(self.tensor)

    def __array__(self, dtype=None, copy=None):
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"MSArray({self.asnumpy()!r})"

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __float__(self):
        return float(self.asnumpy())

    def __int__(self):
        return int(self.asnumpy())

    def __bool__(self):
        return bool(self.asnumpy())

    def __getitem__(self, idx):
        return _run("getitem", (self,), {"index": idx})

    __hash__ = object.__hash__


def _proto(name, reflected=False):
    def method(self, *other):
        args = (other[0], self) if reflected else (self, *other)
        return _run(name, args, {})
    return method


_BIN = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "gt", "ge", "eq", "ne", "and", "or",
        "xor", "lshift", "rshift")
for _n in _BIN:
    setattr(MSArray, f"__{_n}__", _proto(_n))
    if _n not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(MSArray, f"__r{_n}__", _proto(_n, True))
MSArray.__neg__ = _proto("neg")
MSArray.__invert__ = _proto("invert")


def _is_tensor(x) -> bool:
    import mindspore as ms
    return isinstance(x, (ms.Tensor, np.ndarray, MSArray)) and not isinstance(x, np.generic)


def _np_dtype(t):
    import mindspore as ms
    if isinstance(t, MSArray):
        return t.dtype
    if isinstance(t, np.ndarray):
        return t.dtype
    if t.dtype == ms.bfloat16:
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    if t.dtype == ms.bool_:
        return np.dtype(bool)
    return np.dtype(str(t.dtype).lower())


def _signature(x):
    if _is_tensor(x):
        return ("T", tuple(x.shape), _np_dtype(x).name)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_signature(a) for a in x))
    if isinstance(x, np.generic):
        return ("S", repr(x), x.dtype.name)
    return ("S", repr(x), type(x).__name__)


def _run(op: str, args: tuple, kwargs: dict):
    from backends.mindspore.lower import to_ms, program_cell
    from backends.mindspore.runtime import setup
    from backends.mindspore.trace import BINARY, UNARY, Program, TracingOps

    setup()
    key = (op, _signature(args), tuple(sorted((k, _signature(v)) for k, v in kwargs.items())))
    tensors: list = []

    def collect(x):
        if _is_tensor(x):
            tensors.append(x)
        elif isinstance(x, (list, tuple)):
            for a in x:
                collect(a)

    collect(args)
    collect(list(kwargs.values()))
    entry = _CACHE.get(key)
    if entry is None:
        prog = Program(f"mindspore op {op}")
        tops = TracingOps(prog)

        def swap(x):
            if _is_tensor(x):
                return prog.input(tuple(x.shape), _np_dtype(x))
            if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
                return type(x)(swap(a) for a in x)
            return x

        sargs = swap(args)
        if op in BINARY:
            out = BINARY[op](*sargs)
        elif op in UNARY:
            out = UNARY[op](*sargs)
        elif op == "getitem":
            out = sargs[0][kwargs["index"]]
        else:
            out = getattr(tops, op)(*sargs, **{k: swap(v) for k, v in kwargs.items()})
        single = not isinstance(out, tuple)
        outs = [out] if single else list(out)
        entry = (program_cell(prog, outs, f"mindspore op {op}"), single)
        _CACHE[key] = entry
    cell, single = entry
    res = cell.construct(*[t.tensor if isinstance(t, MSArray) else to_ms(t) if isinstance(t, np.ndarray) else t
                           for t in tensors])
    res = [MSArray(r) for r in res]
    return res[0] if single else tuple(res)


class MindSporeOps(Fused):
    """The ops namespace on MindSpore tensors (see module docstring)."""

    name = "mindspore"


def _method(op):
    def method(self, *args: Any, **kwargs: Any):
        return _run(op, args, kwargs)
    method.__name__ = op
    return method


for _op in OP_NAMES:
    setattr(MindSporeOps, _op, _method(_op))

OPS = MindSporeOps()
