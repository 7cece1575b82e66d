"""Lowering rules of the casts ``astype`` and ``bitcast``. Float -> int casts
wrap in MindSpore; ``astype`` truncates, maps NaN to 0 and saturates with
``where`` before casting through int64. bf16 bit casts go through the exact
float32 upcast (bf16 bits are its high half).
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_dtypes import is_float, is_int


def astype(em, eqn):
    (x,), out = eqn.args, eqn.outs[0]
    src, dst = x.dtype, out.dtype
    a = em.ref(x)
    if is_float(src) and is_int(dst):
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
        em.alias(out, x)
    elif src.name == "bfloat16" and dst.name == "float32" and em.f32_of(x) is not None:
        em.alias(out, em.f32_of(x))  # the exact upcast is already there
    elif not em.native and src.name == "float32" and dst.name == "bfloat16" and x.size and x.shape != ():
        # on CPU the rounded value is made as its float32 carrier (the shadow later ops read);
        # the bfloat16 tensor itself only where something reads it
        from backends.mindspore import runtime as rt
        up = em.prog.new_var(out.shape, np.float32)
        em.assign(up, f"{em.host(rt.bf16_round_prim, op='astype', hint='bf16')}({a})")
        em.carried(out, up)
        em.assign(out, f"ops.cast({em.ref(up)}, ms.bfloat16)")
    elif not em.native and {src.name, dst.name} == {"float32", "float16"} and x.size and x.shape != ():
        # MindSpore's CPU Cast float32 <-> float16 is ~5x slower than the NumPy backend's kernels
        # (10.7M there and back: 23.1 vs 4.3 ms, benchmarks/bench_ms_floor.py): those, as host kernels
        from backends.mindspore.rules_fused import host_call
        em.assign(out, host_call(em, "astype", ("x",), (x,), (("dtype", dst),), (out,), hint="astype"))
    else:
        em.assign(out, f"ops.cast({a}, {em.dt(dst)})")


def float_bits(em, x: str, src, dst) -> str:
    """Bit cast between a float and an int of one width: host kernel on CPU, native ops
    (``backends.mindspore.native``) in a graph for another device."""
    from backends.mindspore import native
    from backends.mindspore import runtime as rt
    if em.native:
        return native.float_to_bits(em, x, src, dst) if is_float(src) else native.bits_to_float(em, x, src, dst)
    return f"{em.host(rt.bitcast_prim, dst, op='bitcast', hint='bitcast')}({x})"


def bitcast(em, eqn):
    (x,), out = eqn.args, eqn.outs[0]
    src, dst = x.dtype, out.dtype
    if src.itemsize != dst.itemsize:
        raise em.error(f"bitcast {src.name} -> {dst.name} (widths differ)")
    if src == dst:
        em.alias(out, x)
    elif is_int(src) and is_int(dst):
        em.assign(out, f"ops.cast({em.ref(x)}, {em.dt(dst)})")
    elif src.name == "bfloat16":  # bf16 bits = high half of the exact float32 upcast
        up = em.f32_of(x)
        f = em.ref(up) if up is not None else em.tmp(f"ops.cast({em.ref(x)}, ms.float32)")
        if not em.native and dst.name == "uint16" and x.size and x.shape != ():
            from backends.mindspore import runtime as rt
            em.assign(out, f"{em.host(rt.bf16_bits_prim, op='bitcast', hint='bf16bits')}({f})")
            return
        u = em.tmp(float_bits(em, f, np.float32, np.uint32))
        em.assign(out, f"ops.cast(ops.bitwise_right_shift({u}, {em.scalar(16, 'uint32')}), {em.dt(dst)})")
    elif dst.name == "bfloat16":
        up = em.prog.new_var(out.shape, np.float32)  # the float32 with those high bits: out's exact upcast
        if not em.native and x.size and x.shape != ():  # (a pyfunc cannot return an empty or 0-d tensor)
            from backends.mindspore import runtime as rt
            u16 = em.ref(x) if src.name == "uint16" else f"ops.cast({em.ref(x)}, ms.uint16)"
            em.assign(up, f"{em.host(rt.bits_bf16_prim, op='bitcast', hint='bf16val')}({u16})")
        else:
            u = em.tmp(f"ops.bitwise_left_shift(ops.cast(ops.cast({em.ref(x)}, ms.uint16), ms.uint32), "
                       f"{em.scalar(16, 'uint32')})")
            em.assign(up, float_bits(em, u, np.uint32, np.float32))
        em.carried(out, up)
        em.assign(out, f"ops.cast({em.ref(up)}, ms.bfloat16)")
    else:
        em.assign(out, float_bits(em, em.ref(x), src, dst))
