"""The lowering table: one rule per traced op, emitting MindSpore source lines.

``RULES[op](em, eqn)`` writes Python lines (MindSpore functional ops and
primitives) that compute ``eqn.outs`` from ``eqn.args``; ``em`` (an
:class:`backends.mindspore.lower.Emitter`) names values, constants and
primitive instances. Every rule reproduces ``compressors/ops.py`` exactly
and works around MindSpore 2.10's CPU traps:

* float -> int casts wrap in MindSpore; ``astype`` truncates, maps NaN to 0
  and saturates with ``where`` before casting through int64;
* ``ops.topk`` is not stable: top_k sorts the int64 composite key
  ``orderkey(x) * 2**32 + (2**32 - 1 - i)``, unique, so ties go to the lowest i
  and NaN (orderkey = INT32_MAX) ranks above +inf;
* ``tensor_scatter_*`` raise out of range: indices outside ``[0, size)`` go to
  a dump slot that is sliced off;
* no uint32 ``Sub``: uint32 subtraction/negation go through int64;
* ``Maximum``/``sign`` drop NaN on CPU: NaN is put back with ``where``;
* sum uses the halving order ``s[:m/2] + s[m/2:]`` of the reference;
* AllGather takes no uint32/int8/bool/bf16: such payloads travel as int32
  (float32 for bf16) and are cast back exactly.
"""
from __future__ import annotations

import numpy as np

INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
GATHERABLE = {"float16", "float32", "float64", "int32", "int64"}


def _is_int(dt) -> bool:
    return np.dtype(dt).name in INT_DTYPES


def is_float(dt) -> bool:
    return np.dtype(dt).name in ("float16", "float32", "float64", "bfloat16")


# -- helpers ----------------------------------------------------------------------

def _binop(em, op, a, b, dt):
    """Source for ``a op b`` in dtype dt (operands already of dt)."""
    name = np.dtype(dt).name
    if name == "bool":
        fn = {"add": "ops.logical_or", "mul": "ops.logical_and", "and": "ops.logical_and",
              "or": "ops.logical_or", "xor": "ops.logical_xor", "max": "ops.logical_or",
              "min": "ops.logical_and"}.get(op)
        if fn is None:
            raise em.error(f"operator {op} on bool arrays")
        return f"{fn}({a}, {b})"
    if name == "bfloat16":  # no bf16 CPU kernels: compute in float32, round once
        res = _binop(em, op, f"ops.cast({a}, ms.float32)", f"ops.cast({b}, ms.float32)", np.float32)
        return res if op in ("lt", "le", "gt", "ge", "eq", "ne") else f"ops.cast({res}, ms.bfloat16)"
    if name == "uint32" and op == "sub":
        return (f"ops.cast(ops.sub(ops.cast({a}, ms.int64), ops.cast({b}, ms.int64)), ms.uint32)")
    fn = {"add": "ops.add", "sub": "ops.sub", "mul": "ops.mul", "truediv": "ops.div",
          "floordiv": "ops.floor_divide", "mod": "ops.remainder",
          "and": "ops.bitwise_and", "or": "ops.bitwise_or", "xor": "ops.bitwise_xor",
          "lshift": "ops.bitwise_left_shift", "rshift": "ops.bitwise_right_shift",
          "lt": "ops.less", "le": "ops.less_equal", "gt": "ops.greater", "ge": "ops.greater_equal",
          "eq": "ops.equal", "ne": "ops.not_equal"}[op]
    return f"{fn}({a}, {b})"


def _operand_dtype(eqn):
    """The common dtype two operands are brought to (JAX promotion, weak Python scalars)."""
    import jax
    import jax.numpy as jnp

    from backends.mindspore.trace import Var

    specs = [jax.ShapeDtypeStruct((), a.dtype) if isinstance(a, Var) else a for a in eqn.args]
    return np.dtype(jax.eval_shape(jnp.add, *specs).dtype)


def binary(op):
    def rule(em, eqn):
        out = eqn.outs[0]
        dt = _operand_dtype(eqn) if op in ("lt", "le", "gt", "ge", "eq", "ne") else out.dtype
        a, b = (em.operand(x, dt) for x in eqn.args)
        if op == "pow":
            em.assign(out, _pow(em, eqn, a, b, dt))
            return
        if op == "truediv" and is_float(dt) and _size(eqn.args[1]) < out.size:
            # XLA (the reference) divides by a broadcast divisor as a * (1 / b); do the same
            b = em.tmp(f"ops.div({em.scalar(1, dt)}, {b})")
            em.assign(out, f"ops.mul({a}, {b})")
            return
        if op in ("lshift", "rshift") and not _is_int(dt):
            raise em.error(f"shift on {dt}")
        em.assign(out, _binop(em, op, a, b, dt))
    return rule


def _size(a) -> int:
    return a.size if hasattr(a, "id") else int(np.asarray(a).size)


def _pow(em, eqn, a, b, dt):
    """``x ** y``: integer Python exponents by squaring (as lax.integer_pow)."""
    y = eqn.args[1]
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool) and y >= 0:
        y = int(y)
        if y == 0:
            return f"ops.ones_like({a})"
        acc, x = None, a
        while y > 0:
            if y & 1:
                acc = x if acc is None else em.tmp(f"ops.mul({acc}, {x})")
            y >>= 1
            if y:
                x = em.tmp(f"ops.mul({x}, {x})")
        return acc
    return f"ops.pow({a}, {b})"


def unary(op):
    def rule(em, eqn):
        (x,), out = eqn.args, eqn.outs[0]
        a = em.operand(x, out.dtype)
        name = out.dtype.name
        if op == "neg":
            if name == "uint32":
                em.assign(out, f"ops.cast(ops.neg(ops.cast({a}, ms.int64)), ms.uint32)")
            else:
                em.assign(out, f"ops.neg({a})")
        else:  # invert
            if name == "bool":
                em.assign(out, f"ops.logical_not({a})")
            elif _is_int(name):
                em.assign(out, f"ops.bitwise_xor({a}, {em.scalar(-1 if name.startswith('int') else np.iinfo(name).max, name)})")
            else:
                raise em.error(f"~ on {name}")
    return rule


def getitem(em, eqn):
    parts = []
    for it in eqn.attrs["index"]:
        if isinstance(it, slice):
            parts.append(":".join("" if p is None else str(p) for p in (it.start, it.stop, it.step)).rstrip(":") or ":")
        else:
            parts.append(str(it))
    x = em.ref(eqn.args[0])
    em.assign(eqn.outs[0], f"{x}[{', '.join(parts)}]")


# -- creation ------------------------------------------------------------------------

def asarray(em, eqn):
    em.assign(eqn.outs[0], em.const(eqn.attrs["value"]))


def zeros(em, eqn):
    out = eqn.outs[0]
    em.assign(out, em.filled(out.shape, 0, out.dtype))


def full(em, eqn):
    import jax.numpy as jnp
    out = eqn.outs[0]
    value = np.asarray(jnp.full((), eqn.attrs["value"], out.dtype)).astype(np.float64 if is_float(out.dtype) else out.dtype)
    em.assign(out, em.filled(out.shape, value.item(), out.dtype))


def arange(em, eqn):
    em.assign(eqn.outs[0], f"ops.arange(0, {eqn.attrs['n']}, 1, dtype=ms.int32)")


def reshape(em, eqn):
    out = eqn.outs[0]
    em.assign(out, f"ops.reshape({em.ref(eqn.args[0])}, {out.shape!r})")


def concatenate(em, eqn):
    xs = [x for x in eqn.args[0] if x.size > 0]
    out = eqn.outs[0]
    if not xs:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
    elif len(xs) == 1:
        em.assign(out, em.ref(xs[0]))
    else:
        em.assign(out, f"ops.concat(({', '.join(em.operand(x, out.dtype) for x in xs)},), {eqn.attrs['axis']})")


def stack(em, eqn):
    out = eqn.outs[0]
    em.assign(out, f"ops.stack(({', '.join(em.operand(x, out.dtype) for x in eqn.args[0])},), 0)")


def pad(em, eqn):
    (x,), out, after = eqn.args, eqn.outs[0], eqn.attrs["after"]
    if after == 0:
        em.assign(out, em.ref(x))
    elif x.size == 0:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
    else:
        em.assign(out, f"ops.concat(({em.ref(x)}, {em.filled((after,), 0, out.dtype)}), 0)")


def transpose(em, eqn):
    em.assign(eqn.outs[0], f"ops.transpose({em.ref(eqn.args[0])}, (1, 0))")


# -- elementwise --------------------------------------------------------------------------

def simple(fn):
    def rule(em, eqn):
        out = eqn.outs[0]
        em.assign(out, f"{fn}({em.operand(eqn.args[0], out.dtype)})")
    return rule


def sign(em, eqn):
    out = eqn.outs[0]
    x = em.ref(eqn.args[0])
    dt = out.dtype.name
    one, mone = em.scalar(1, dt), em.scalar(-1, dt)
    if dt.startswith("uint"):
        em.assign(out, f"ops.where(ops.greater({x}, {em.scalar(0, dt)}), {one}, {x})")
    else:
        em.assign(out, f"ops.where(ops.greater({x}, {em.scalar(0, dt)}), {one}, "
                       f"ops.where(ops.less({x}, {em.scalar(0, dt)}), {mone}, {x}))")


def floor(em, eqn):
    out = eqn.outs[0]
    x = em.ref(eqn.args[0])
    em.assign(out, f"ops.floor({x})" if is_float(out.dtype) else x)


def _isnan(em, x, dt):
    return f"ops.isnan(ops.cast({x}, ms.float32))" if np.dtype(dt).name == "bfloat16" else f"ops.isnan({x})"


def extremum(kind):
    def rule(em, eqn):
        out = eqn.outs[0]
        dt = out.dtype
        a, b = (em.operand(x, dt) for x in eqn.args)
        if dt.name == "bool":
            em.assign(out, _binop(em, kind, a, b, dt))
            return
        base = f"ops.{'maximum' if kind == 'max' else 'minimum'}({a}, {b})"
        if is_float(dt):
            base = f"ops.where(ops.logical_or({_isnan(em, a, dt)}, {_isnan(em, b, dt)}), ops.add({a}, {b}), {base})"
        em.assign(out, base)
    return rule


def where(em, eqn):
    out = eqn.outs[0]
    c = eqn.args[0]
    cond = em.ref(c) if hasattr(c, "id") else em.const(np.asarray(c, bool))
    a, b = (em.operand(x, out.dtype) for x in eqn.args[1:])
    if tuple(getattr(c, "shape", ())) != out.shape:
        cond = f"ops.broadcast_to({cond}, {out.shape!r})"
    a = a if tuple(getattr(eqn.args[1], "shape", ())) == out.shape else f"ops.broadcast_to({a}, {out.shape!r})"
    b = b if tuple(getattr(eqn.args[2], "shape", ())) == out.shape else f"ops.broadcast_to({b}, {out.shape!r})"
    em.assign(out, f"ops.where({cond}, {a}, {b})")


def isfinite(em, eqn):
    x = eqn.args[0]
    src = em.ref(x)
    if x.dtype.name == "bfloat16":
        src = f"ops.cast({src}, ms.float32)"
    em.assign(eqn.outs[0], f"ops.isfinite({src})" if is_float(x.dtype) else f"ops.ones_like({src}).astype(ms.bool_)")


def frexp(em, eqn):
    from backends.mindspore import runtime as rt
    x = eqn.args[0]
    dt = x.dtype.name
    src = em.ref(x)
    work = "float32" if dt in ("bfloat16", "float16") else dt
    if work != dt:
        src = f"ops.cast({src}, ms.float32)"
    prim = em.prim(rt.frexp_prim(work), "frexp")
    m, e = eqn.outs
    em.line(f"{em.name(m)}, {em.name(e)} = {prim}({src})")
    if work != dt:
        em.assign(m, f"ops.cast({em.name(m)}, {em.dt(dt)})")


def ldexp(em, eqn):
    from backends.mindspore import runtime as rt
    m, e = eqn.args
    out = eqn.outs[0]
    dt = out.dtype.name
    work = "float32" if dt in ("bfloat16", "float16") else dt
    prim = em.prim(rt.ldexp_prim(work), "ldexp")
    em.assign(out, f"{prim}({em.operand(m, work)}, {em.operand(e, np.int32)})")
    if work != dt:
        em.assign(out, f"ops.cast({em.name(out)}, {em.dt(dt)})")


def astype(em, eqn):
    (x,), out = eqn.args, eqn.outs[0]
    src, dst = x.dtype, out.dtype
    a = em.ref(x)
    if is_float(src) and _is_int(dst):
        work = "float64" if src.name == "float64" else "float32"
        if src.name != work:
            a = em.tmp(f"ops.cast({a}, ms.{work})")
        info = np.iinfo(dst)
        lo, top = float(info.min), float(info.max) + 1.0  # both exact powers of two (or 0)
        t = em.tmp(f"ops.trunc({a})")
        ok = em.tmp(f"ops.logical_and(ops.greater_equal({t}, {em.scalar(lo, work)}), ops.less({t}, {em.scalar(top, work)}))")
        safe = em.tmp(f"ops.cast(ops.cast(ops.where({ok}, {t}, {em.scalar(0, work)}), ms.int64), {em.dt(dst)})")
        hi_ = em.tmp(f"ops.where(ops.greater_equal({t}, {em.scalar(top, work)}), {em.scalar(info.max, dst)}, {safe})")
        em.assign(out, f"ops.where(ops.less({t}, {em.scalar(lo, work)}), {em.scalar(info.min, dst)}, {hi_})")
    elif src == dst:
        em.assign(out, a)
    else:
        em.assign(out, f"ops.cast({a}, {em.dt(dst)})")


def bitcast(em, eqn):
    from backends.mindspore import runtime as rt
    (x,), out = eqn.args, eqn.outs[0]
    src, dst = x.dtype, out.dtype
    if src.itemsize != dst.itemsize:
        raise em.error(f"bitcast {src.name} -> {dst.name} (widths differ)")
    if src == dst:
        em.assign(out, em.ref(x))
    elif _is_int(src) and _is_int(dst):
        em.assign(out, f"ops.cast({em.ref(x)}, {em.dt(dst)})")
    elif src.name == "bfloat16":  # bf16 bits = high half of the exact float32 upcast
        u = em.tmp(f"{em.prim(rt.bitcast_prim(np.uint32), 'bitcast')}(ops.cast({em.ref(x)}, ms.float32))")
        em.assign(out, f"ops.cast(ops.bitwise_right_shift({u}, {em.scalar(16, 'uint32')}), {em.dt(dst)})")
    elif dst.name == "bfloat16":
        u = em.tmp(f"ops.bitwise_left_shift(ops.cast(ops.cast({em.ref(x)}, ms.uint16), ms.uint32), {em.scalar(16, 'uint32')})")
        em.assign(out, f"ops.cast({em.prim(rt.bitcast_prim(np.float32), 'bitcast')}({u}), ms.bfloat16)")
    else:
        em.assign(out, f"{em.prim(rt.bitcast_prim(dst), 'bitcast')}({em.ref(x)})")


# -- reductions --------------------------------------------------------------------------

def sum_(em, eqn):
    (x,), out, axis = eqn.args, eqn.outs[0], eqn.attrs["axis"]
    dt = out.dtype
    a = em.ref(x)
    if axis is None:
        a, nd = em.tmp(f"ops.reshape({a}, ({x.size},))"), 1
        shape = (x.size,)
    else:
        nd = x.ndim
        axis = axis % nd
        perm = tuple(i for i in range(nd) if i != axis) + (axis,)
        shape = tuple(x.shape[i] for i in perm)
        if perm != tuple(range(nd)):
            a = em.tmp(f"ops.transpose({a}, {perm!r})")
    m = shape[-1]
    lead = ":, " * (nd - 1)
    if m == 0:
        em.assign(out, em.filled(out.shape, 0, dt))
        return
    p = 1 if m <= 1 else 1 << (m - 1).bit_length()
    if p != m:
        a = em.tmp(f"ops.concat(({a}, {em.filled(shape[:-1] + (p - m,), 0, dt)}), {nd - 1})")
    while p > 1:
        p //= 2
        a = em.tmp(_binop(em, "add", f"{a}[{lead}:{p}]", f"{a}[{lead}{p}:]", dt))
        if eqn.attrs.get("round_to"):  # a bf16 sum computed in float32: round every level
            a = em.tmp(f"ops.cast(ops.cast({a}, ms.{eqn.attrs['round_to']}), {em.dt(dt)})")
    em.assign(out, f"{a}[{lead}0]")


def max_(em, eqn):
    (x,), out, axis = eqn.args, eqn.outs[0], eqn.attrs["axis"]
    a = em.ref(x)
    ax = "()" if axis is None else str(int(axis))
    base = f"{em.prim_expr('ops.ReduceMax()', 'rmax')}({a}, {ax})"
    if is_float(x.dtype):
        anynan = f"{em.prim_expr('ops.ReduceAny()', 'rany')}({_isnan(em, a, x.dtype)}, {ax})"
        base = f"ops.where({anynan}, {em.filled(out.shape, float('nan'), out.dtype)}, {base})"
    em.assign(out, base)


def matmul(em, eqn):
    a, b = eqn.args
    em.assign(eqn.outs[0], f"ops.matmul({em.ref(a)}, {em.ref(b)})")


# -- selection -----------------------------------------------------------------------------

def top_k(em, eqn):
    from backends.mindspore import runtime as rt
    (x,), (vals, idx), k = eqn.args, eqn.outs, eqn.attrs["k"]
    n = x.size
    dt = x.dtype.name
    src = em.ref(x)
    if dt in ("float16", "bfloat16", "float32"):
        f = src if dt == "float32" else em.tmp(f"ops.cast({src}, ms.float32)")
        bits = em.tmp(f"{em.prim(rt.bitcast_prim(np.int32), 'bitcast')}({f})")
        # IEEE totalOrder as an int32: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN
        key = em.tmp(f"ops.where(ops.less({bits}, {em.scalar(0, 'int32')}), "
                     f"ops.bitwise_xor({bits}, {em.scalar(0x7FFFFFFF, 'int32')}), {bits})")
    elif dt in ("int32", "int16", "int8", "uint8", "uint16"):
        key = src
    elif dt == "float64":
        em.line(f"{em.name(vals)}, {em.name(idx)} = {em.prim(rt.topk64_prim(k), 'topk')}({src})")
        return
    else:
        raise em.error(f"top_k on {dt} (supported: float16/bfloat16/float32 and small ints)")
    comp = em.tmp(f"ops.add(ops.mul(ops.cast({key}, ms.int64), {em.scalar(2**32, 'int64')}), "
                  f"ops.sub({em.scalar(2**32 - 1, 'int64')}, ops.cast(ops.arange(0, {n}, 1, dtype=ms.int32), ms.int64)))")
    top = em.tmp(f"ops.topk({comp}, {k})[0]")
    em.assign(idx, f"ops.cast(ops.sub({em.scalar(2**32 - 1, 'int64')}, ops.remainder({top}, {em.scalar(2**32, 'int64')})), ms.int32)")
    em.assign(vals, f"ops.gather({src}, {em.name(idx)}, 0)")


def gather(em, eqn):
    (x, idx), out = eqn.args, eqn.outs[0]
    n = x.size
    if n == 0 or out.size == 0:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
        return
    i = em.operand(idx, np.int32)
    ok = em.tmp(f"ops.logical_and(ops.greater_equal({i}, {em.scalar(0, 'int32')}), ops.less({i}, {em.scalar(n, 'int32')}))")
    safe = em.tmp(f"ops.where({ok}, {i}, {em.scalar(0, 'int32')})")
    got = em.tmp(f"ops.gather({em.ref(x)}, {safe}, 0)")
    em.assign(out, f"ops.where({ok}, {got}, {em.filled(out.shape, 0, out.dtype)})")


def scatter_add(em, eqn):
    from backends.mindspore import runtime as rt
    (idx, vals), out, size = eqn.args, eqn.outs[0], eqn.attrs["size"]
    if vals.size == 0:
        em.assign(out, em.filled(out.shape, 0, out.dtype))
        return
    if eqn.attrs.get("round_to") == "bfloat16":
        prim = em.prim(rt.scatter_add_bf16_prim(size), "scat")
        em.assign(out, f"{prim}(ops.reshape({em.operand(idx, np.int32)}, ({vals.size},)), "
                       f"ops.reshape({em.ref(vals)}, ({vals.size},)))")
        return
    i = em.tmp(f"ops.reshape({em.operand(idx, np.int32)}, ({vals.size},))")
    ok = em.tmp(f"ops.logical_and(ops.greater_equal({i}, {em.scalar(0, 'int32')}), ops.less({i}, {em.scalar(size, 'int32')}))")
    tgt = em.tmp(f"ops.reshape(ops.where({ok}, {i}, {em.scalar(size, 'int32')}), ({vals.size}, 1))")
    v = em.tmp(f"ops.reshape({em.ref(vals)}, ({vals.size},))")
    buf = em.tmp(f"ops.tensor_scatter_add({em.filled((size + 1,), 0, out.dtype)}, {tgt}, {v})")
    em.assign(out, f"{buf}[:{size}]")


def nonzero(em, eqn):
    (mask,), out, cap = eqn.args, eqn.outs[0], eqn.attrs["capacity"]
    n = mask.size
    if cap == 0:
        em.assign(out, em.filled((0,), 0, np.int32))
        return
    m = em.ref(mask)
    cs = em.tmp(f"ops.cumsum(ops.cast({m}, ms.int32), 0)")
    take = em.tmp(f"ops.logical_and({m}, ops.less_equal({cs}, {em.scalar(cap, 'int32')}))")
    tgt = em.tmp(f"ops.reshape(ops.where({take}, ops.sub({cs}, {em.scalar(1, 'int32')}), {em.scalar(cap, 'int32')}), ({n}, 1))")
    val = em.tmp(f"ops.where({take}, ops.sub(ops.arange(0, {n}, 1, dtype=ms.int32), {em.scalar(n, 'int32')}), "
                 f"{em.scalar(0, 'int32')})")
    buf = em.tmp(f"ops.tensor_scatter_add({em.filled((cap + 1,), 0, np.int32)}, {tgt}, {val})")
    em.assign(out, f"ops.add({buf}[:{cap}], {em.scalar(n, 'int32')})")


# -- randomness ------------------------------------------------------------------------------

def fold_in(em, eqn):
    from backends.mindspore import runtime as rt
    key, data = eqn.args
    em.assign(eqn.outs[0], f"{em.prim(rt.fold_in_prim(), 'foldin')}({em.ref(key)}, {em.ref(data)})")


def _fast_seeds(em, eqn):
    origin = eqn.outs[0].origin or eqn.args[0].origin or ("worker", em.rank)
    salt = 0 if origin[0] == "shared" else 7919 * (int(origin[1]) + 1)
    return 1 + em.seed % 1_000_003, 1 + eqn.attrs["site"] * 1009 + salt


def random_bits(em, eqn):
    from backends.mindspore import runtime as rt
    (key,), out, shape = eqn.args, eqn.outs[0], eqn.attrs["shape"]
    if em.rng == "exact":
        em.assign(out, f"ops.reshape({em.prim(rt.random_bits_prim(shape or (1,)), 'bits')}({em.ref(key)}), {shape!r})")
        return
    s1, s2 = _fast_seeds(em, eqn)
    hi = em.prim_expr(f"ops.UniformInt(seed={s1}, seed2={s2})", "uint")
    lo = em.prim_expr(f"ops.UniformInt(seed={s1}, seed2={s2 + 1})", "uint")
    lim0, lim1 = em.scalar(0, "int32"), em.scalar(65536, "int32")
    em.assign(out, f"ops.cast(ops.add(ops.mul(ops.cast({hi}({shape!r}, {lim0}, {lim1}), ms.int64), "
                   f"{em.scalar(65536, 'int64')}), ops.cast({lo}({shape!r}, {lim0}, {lim1}), ms.int64)), ms.uint32)")


def uniform(em, eqn):
    from backends.mindspore import runtime as rt
    (key,), out, shape = eqn.args, eqn.outs[0], eqn.attrs["shape"]
    if em.rng == "exact":
        bits = em.tmp(f"ops.reshape({em.prim(rt.random_bits_prim(shape or (1,)), 'bits')}({em.ref(key)}), {shape!r})")
        em.assign(out, f"ops.mul(ops.cast(ops.bitwise_right_shift({bits}, {em.scalar(9, 'uint32')}), ms.float32), "
                       f"{em.scalar(2.0 ** -23, 'float32')})")
        return
    s1, s2 = _fast_seeds(em, eqn)
    em.assign(out, f"{em.prim_expr(f'ops.UniformReal(seed={s1}, seed2={s2})', 'unif')}({shape!r})")


# -- bit packing ------------------------------------------------------------------------------

def pack_bits(em, eqn):
    from backends.common import check_bits
    (codes,), out, bits = eqn.args, eqn.outs[0], eqn.attrs["bits"]
    check_bits(bits)
    per, n = 32 // bits, codes.shape[0]
    nw = out.shape[0]
    c = em.operand(codes, np.uint32)
    if nw * per != n:
        c = em.tmp(f"ops.concat(({c}, {em.filled((nw * per - n,), 0, np.uint32)}), 0)") if n else \
            em.filled((nw * per,), 0, np.uint32)
    c = em.tmp(f"ops.reshape({c}, ({nw}, {per}))")
    sh = em.const(np.broadcast_to(np.arange(per, dtype=np.uint32) * np.uint32(bits), (nw, per)).copy())
    w = em.tmp(f"ops.cast(ops.bitwise_left_shift({c}, {sh}), ms.int64)")
    em.assign(out, f"ops.cast({em.prim_expr('ops.ReduceSum()', 'rsum')}({w}, 1), ms.uint32)")


def unpack_bits(em, eqn):
    from backends.common import check_bits
    (words,), out, bits, count = eqn.args, eqn.outs[0], eqn.attrs["bits"], eqn.attrs["count"]
    check_bits(bits)
    per, nw = 32 // bits, words.shape[0]
    mask = 0xFFFFFFFF if bits == 32 else (1 << bits) - 1
    w = em.tmp(f"ops.broadcast_to(ops.reshape({em.ref(words)}, ({nw}, 1)), ({nw}, {per}))")
    sh = em.const(np.broadcast_to(np.arange(per, dtype=np.uint32) * np.uint32(bits), (nw, per)).copy())
    u = em.tmp(f"ops.bitwise_and(ops.bitwise_right_shift({w}, {sh}), {em.scalar(mask, 'uint32')})")
    em.assign(out, f"ops.reshape({u}, ({nw * per},))[:{count}]")


# -- collectives (distributed lowering only) -----------------------------------------------------

def comm_sum(em, eqn):
    """SUM round: AllReduce (float32/float16; bf16 via float32); other dtypes gather + rank-order sum."""
    (x,), out = eqn.args, eqn.outs[0]
    dt = x.dtype.name
    a = em.ref(x)
    if eqn.attrs.get("via") == "allgather":
        pass
    elif dt in ("float32", "float16"):
        em.assign(out, f"{em.prim_expr('ops.AllReduce()', 'allreduce')}({a})")
        return
    elif dt == "bfloat16":
        em.assign(out, f"ops.cast({em.prim_expr('ops.AllReduce()', 'allreduce')}(ops.cast({a}, ms.float32)), ms.bfloat16)")
        return
    g = _allgather(em, a, x.shape, x.dtype, eqn.attrs["n"])  # exact rank-order sum
    total = f"{g}[0]"
    for i in range(1, eqn.attrs["n"]):
        total = em.tmp(_binop(em, "add", total, f"{g}[{i}]", x.dtype))
    em.assign(out, total)


def _allgather(em, a, shape, dtype, n):
    dt = np.dtype(dtype).name
    wire = dt if dt in GATHERABLE else ("float32" if dt == "bfloat16" else "int32")
    if wire != dt:
        a = f"ops.cast({a}, ms.{wire})"
    row = shape if shape else (1,)
    g = em.tmp(f"{em.prim_expr('ops.AllGather()', 'allgather')}(ops.reshape({a}, {(1,) + tuple(row)!r}))")
    g = em.tmp(f"ops.reshape({g}, {(n,) + tuple(shape)!r})")
    if wire != dt:
        g = em.tmp(f"ops.cast({g}, {em.dt(dt)})")
    return g


def comm_gather(em, eqn):
    """GATHER round: AllGather, stacked on a new leading worker axis."""
    (x,), out = eqn.args, eqn.outs[0]
    em.assign(out, _allgather(em, em.ref(x), x.shape, x.dtype, eqn.attrs["n"]))


RULES = {
    **{op: binary(op) for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "gt",
                                 "ge", "eq", "ne", "and", "or", "xor", "lshift", "rshift")},
    "neg": unary("neg"), "invert": unary("invert"), "getitem": getitem,
    "asarray": asarray, "zeros": zeros, "full": full, "arange": arange, "reshape": reshape,
    "concatenate": concatenate, "stack": stack, "pad": pad, "transpose": transpose,
    "abs": simple("ops.abs"), "sign": sign, "sqrt": simple("ops.sqrt"), "floor": floor,
    "maximum": extremum("max"), "minimum": extremum("min"), "where": where, "isfinite": isfinite,
    "frexp": frexp, "ldexp": ldexp, "astype": astype, "bitcast": bitcast,
    "sum": sum_, "max": max_, "matmul": matmul,
    "top_k": top_k, "gather": gather, "scatter_add": scatter_add, "nonzero": nonzero,
    "fold_in": fold_in, "random_bits": random_bits, "uniform": uniform,
    "pack_bits": pack_bits, "unpack_bits": unpack_bits,
    "comm_sum": comm_sum, "comm_gather": comm_gather,
}
