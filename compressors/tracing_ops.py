"""The tracing ``Ops``: runs a compressor on :class:`~compressors.traced.Var` s, recording a program.

See :mod:`compressors.program` (``Program``, ``trace_codec``).
"""
from __future__ import annotations

import inspect

import numpy as np

from compressors.fused import FUSED_NAMES, Fused
from compressors.ops import OP_NAMES
from compressors.traced import BINARY, LoweringError, Var, has_var


class TracingOps(Fused):
    """An ``Ops`` that records calls into a :class:`Program`.

    ``record_fused``: False traces a fused op through its defining
    composition; True (the cost model) records it as one equation named after
    it, its static arguments in ``attrs`` and the names of its array arguments
    in ``attrs["arg_names"]``; a set of names records those only (a lowering
    with its own rule for them traces the others through)."""

    name = "trace"

    def __init__(self, prog: Program, *, record_fused: bool | frozenset = False):
        self._prog = prog
        self.record_fused = record_fused

    def _records(self, name: str) -> bool:
        """Whether the fused op ``name`` is recorded as one equation."""
        return self.record_fused is True or (not isinstance(self.record_fused, bool) and name in self.record_fused)

    def _unknown(self, op):
        return (f"{self._prog.who}: op {op!r} is not in the ops namespace "
                f"(known: {', '.join(OP_NAMES)}); a traced program cannot hold it")

    def __getattr__(self, op):
        if op.startswith("__") or op in ("_prog", "record_fused"):
            raise AttributeError(op)
        raise LoweringError(self._unknown(op))

    def _b(self, op, args, **attrs):
        return self._prog.bind(op, args, attrs)

    # creation (constants are folded into NumPy where static)
    def asarray(self, x, dtype=None):
        if isinstance(x, Var):
            return x if dtype is None else self.astype(x, dtype)
        import jax.numpy as jnp
        with self._prog.x64_scope():
            val = np.asarray(jnp.asarray(x, dtype=dtype))
        return self._prog.bind("asarray", (), {"value": val}, const=val)

    def zeros(self, shape, dtype):
        return self._b("zeros", (), shape=tuple(int(s) for s in shape), dtype=np.dtype(dtype))

    def full(self, shape, value, dtype):
        if isinstance(value, Var):
            raise LoweringError(f"{self._prog.who}: ops.full with a traced value (use ops.where or *)")
        return self._b("full", (), shape=tuple(int(s) for s in shape), value=value, dtype=np.dtype(dtype))

    def arange(self, n):
        return self._b("arange", (), n=int(n))

    def reshape(self, x, shape):
        return self._b("reshape", (x,), shape=tuple(int(s) for s in shape))

    def concatenate(self, xs, axis=0):
        return self._b("concatenate", (tuple(xs),), axis=int(axis))

    def stack(self, xs):
        return self._b("stack", (tuple(xs),))

    def pad(self, x, after):
        return self._b("pad", (x,), after=int(after))

    def transpose(self, x):
        return self._b("transpose", (x,))

    def astype(self, x, dtype):
        return self._b("astype", (x,), dtype=np.dtype(dtype))

    def bitcast(self, x, dtype):
        return self._b("bitcast", (x,), dtype=np.dtype(dtype))

    def sum(self, x, axis=None):
        return self._b("sum", (x,), axis=axis)

    def max(self, x, axis=None):
        return self._b("max", (x,), axis=axis)

    def top_k(self, x, k):
        return self._b("top_k", (x,), k=int(k))

    def gather(self, x, idx):
        return self._b("gather", (x, idx))

    def scatter_add(self, size, idx, vals):
        return self._b("scatter_add", (idx, vals), size=int(size))

    def nonzero(self, mask, capacity):
        return self._b("nonzero", (mask,), capacity=int(capacity))

    # keys: static key arithmetic is folded to constants with the reference binding
    def _const_key(self, val, origin=None):
        val = np.asarray(val)
        return self._prog.bind("asarray", (), {"value": val}, origin=origin, const=val)

    def key(self, seed):
        if isinstance(seed, Var):
            raise LoweringError(f"{self._prog.who}: ops.key needs a static int seed")
        return self._const_key(self._prog.reference.key(seed))

    def fold_in(self, key, data):
        origin = getattr(key, "origin", None)
        if isinstance(key, Var) and key.const is not None and not isinstance(data, Var):
            return self._const_key(self._prog.reference.fold_in(key.const, data), origin)
        if not isinstance(data, Var):
            data = self.asarray(np.uint32(np.int64(data) & 0xFFFFFFFF))
        return self._prog.bind("fold_in", (key, data), {}, origin=origin)

    def random_bits(self, key, shape):
        self._prog.rng_sites += 1
        return self._b("random_bits", (key,), shape=tuple(int(s) for s in shape),
                       origin=getattr(key, "origin", None), site=self._prog.rng_sites)

    def random_words(self, key, shape):
        self._prog.rng_sites += 1
        return self._b("random_words", (key,), shape=tuple(int(s) for s in shape),
                       origin=getattr(key, "origin", None), site=self._prog.rng_sites)

    def uniform(self, key, shape):
        self._prog.rng_sites += 1
        return self._b("uniform", (key,), shape=tuple(int(s) for s in shape),
                       origin=getattr(key, "origin", None), site=self._prog.rng_sites)

    def pack_bits(self, codes, bits):
        return self._b("pack_bits", (codes,), bits=int(bits))

    def unpack_bits(self, words, bits, count):
        return self._b("unpack_bits", (words,), bits=int(bits), count=int(count))


def _elementwise(name, nargs):
    def method(self, *args):
        if len(args) != nargs:
            raise LoweringError(f"{self._prog.who}: ops.{name} takes {nargs} arrays")
        return self._prog.bind(name, tuple(args), {})
    return method


for _op, _n in (("abs", 1), ("sign", 1), ("sqrt", 1), ("floor", 1), ("isfinite", 1), ("maximum", 2),
                ("minimum", 2), ("where", 3), ("frexp", 1), ("ldexp", 2), ("matmul", 2)):
    setattr(TracingOps, _op, _elementwise(_op, _n))


def _fused(name):
    composed = getattr(Fused, name)
    sig = inspect.signature(composed)

    def method(self, *args, **kwargs):
        if not self._records(name):
            return composed(self, *args, **kwargs)
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arrays, names, static = [], [], {}
        for pname, value in list(bound.arguments.items())[1:]:
            if has_var(value):
                arrays.append(value)
                names.append(pname)
            else:
                static[pname] = value
        if name in BINARY and not static:  # Fused.add is the + operator: record it as one
            return self._prog.bind(name, tuple(arrays), {})
        return self._prog.bind(name, tuple(arrays), {**static, "arg_names": tuple(names)})

    method.__name__ = name
    method.__doc__ = composed.__doc__
    return method


for _op in FUSED_NAMES:
    setattr(TracingOps, _op, _fused(_op))

missing = set(OP_NAMES) - {n for n in dir(TracingOps) if not n.startswith("_")}
assert not missing, f"TracingOps lacks {missing}"


