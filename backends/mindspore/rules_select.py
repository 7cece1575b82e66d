"""Lowering rules of the selection ops: ``top_k`` (and the fused ``top_k_abs``),
``gather``, ``scatter_add``, ``nonzero``. On CPU top_k is the NumPy backend's
selection as a host kernel; in a native graph ``ops.topk``, which is not stable: top_k
sorts the int64 composite key ``orderkey(x) * 2**32 + (2**32 - 1 - i)``,
unique, so ties go to the lowest i
and NaN (orderkey = INT32_MAX) ranks above +inf. float64 in a native graph:
the int64 orderkey leaves no room for i, so it is first replaced by its rank
among the k largest keys (0 below them). ``tensor_scatter_*`` raise out of
range: indices outside ``[0, size)`` go to a dump slot that is sliced off
(scatter_add of float32/float64 on CPU is a host kernel instead, the NumPy
backend's, which drops them); gather reads 0 there.
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_fused import host_call
from backends.mindspore.rules_slice import slice_source
from backends.mindspore.trace import Var


HOST_TOP_K = ("float32", "float64", "int32", "int16", "int8", "uint8", "uint16")


def top_k(em, eqn):
    """On CPU the NumPy backend's selection as a host kernel (MindSpore's int64 ``ops.topk``
    of the composite key took 190 of randomk's 265 ms on 10.7M); elsewhere the native key."""
    (x,), (vals, idx), k = eqn.args, eqn.outs, eqn.attrs["k"]
    src = em.ref(x)
    if not em.native and x.dtype.name in HOST_TOP_K and 0 < k <= x.size and x.ndim == 1:
        em.line(f"{em.name(vals)}, {em.name(idx)} = "
                + host_call(em, "top_k", ("x",), (x,), (("k", int(k)),), (vals, idx), hint="topk"))
        return
    em.assign(idx, _descending(em, src, x.dtype.name, x.size, k))
    if em.used(vals):  # often only the indices are read
        em.assign(vals, f"ops.gather({src}, {em.name(idx)}, 0)")


def top_k_abs(em, eqn):
    """``top_k(abs(x), k)``'s indices in ascending order: the composition marks them in an
    n-entry mask and lists it (scatter, cumsum, scatter: four passes over x); distinct
    indices sort exactly by one k-entry top-k of their negations."""
    (x,), idx, k = eqn.args, eqn.outs[0], eqn.attrs["k"]
    if k == 0:
        em.assign(idx, "ops.zeros((0,), ms.int32)")
        return
    a = em.tmp(f"ops.abs({em.ref(x)})")
    desc = _descending(em, a, x.dtype.name, x.size, k)  # (on CPU float32/float64 run the fused host kernel)
    em.assign(idx, f"ops.neg(ops.topk(ops.neg({desc}), {k})[0])")


def _descending(em, src: str, dt: str, n: int, k: int) -> str:
    """int32 indices of the k largest of the 1-D ``src`` (dtype ``dt``, n entries), largest
    first, ties to the lowest index (an expression), from MindSpore's own ops."""
    from backends.mindspore.rules_casts import float_bits
    if dt in ("float16", "bfloat16", "float32"):
        f = src if dt == "float32" else em.tmp(f"ops.cast({src}, ms.float32)")
        bits = em.tmp(float_bits(em, f, np.float32, np.int32))
        # IEEE totalOrder as an int32: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN
        key = em.tmp(f"ops.where(ops.less({bits}, {em.scalar(0, 'int32')}), "
                     f"ops.bitwise_xor({bits}, {em.scalar(0x7FFFFFFF, 'int32')}), {bits})")
    elif dt in ("int32", "int16", "int8", "uint8", "uint16"):
        key = src
    elif dt == "float64":  # native: the int64 totalOrder key has no room for the index: rank it first
        bits = em.tmp(float_bits(em, src, np.float64, np.int64))
        full = em.tmp(f"ops.where(ops.less({bits}, {em.scalar(0, 'int64')}), "
                      f"ops.bitwise_xor({bits}, {em.scalar(2**63 - 1, 'int64')}), {bits})")
        asc = em.tmp(f"ops.flip(ops.topk({full}, {k})[0], (0,))")  # the k largest keys, ascending
        # k - #(those above the key): in [1, k] for the candidates (key >= the k-th largest), else 0
        key = em.tmp(f"ops.cast(ops.searchsorted({asc}, {full}, right=True), ms.int64)")
    else:
        raise em.error(f"top_k on {dt} (supported: float16/bfloat16/float32/float64 and small ints)")
    comp = em.tmp(f"ops.add(ops.mul(ops.cast({key}, ms.int64), {em.scalar(2**32, 'int64')}), "
                  f"ops.sub({em.scalar(2**32 - 1, 'int64')}, ops.cast(ops.arange(0, {n}, 1, dtype=ms.int32), ms.int64)))")
    top = em.tmp(f"ops.topk({comp}, {k})[0]")
    return (f"ops.cast(ops.sub({em.scalar(2**32 - 1, 'int64')}, ops.remainder({top}, {em.scalar(2**32, 'int64')})), "
            "ms.int32)")


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
        prim = em.host(rt.scatter_add_bf16_prim, size, op="scatter_add", hint="scat")
        em.assign(out, f"{prim}(ops.reshape({em.operand(idx, np.int32)}, ({vals.size},)), "
                       f"ops.reshape({em.ref(vals)}, ({vals.size},)))")
        return
    if not em.native and out.dtype.name in ("float32", "float64") and size > 0 and isinstance(idx, Var):
        # on CPU a host kernel: one pass writing the output, where MindSpore's scatter copies a
        # zero buffer (size + 1: the dump slot) and slicing the slot off copies it again
        em.assign(out, host_call(em, "scatter_add", ("idx", "vals"), (idx, vals), (("size", size),), (out,), "scat"))
        return
    i = em.tmp(f"ops.reshape({em.operand(idx, np.int32)}, ({vals.size},))")
    ok = em.tmp(f"ops.logical_and(ops.greater_equal({i}, {em.scalar(0, 'int32')}), ops.less({i}, {em.scalar(size, 'int32')}))")
    tgt = em.tmp(f"ops.reshape(ops.where({ok}, {i}, {em.scalar(size, 'int32')}), ({vals.size}, 1))")
    v = em.tmp(f"ops.reshape({em.ref(vals)}, ({vals.size},))")
    buf = em.tmp(f"ops.tensor_scatter_add({em.filled((size + 1,), 0, out.dtype)}, {tgt}, {v})")
    em.assign(out, slice_source(buf, (size + 1,), [(0, size, 1)]))


def nonzero(em, eqn):
    (mask,), out, cap = eqn.args, eqn.outs[0], eqn.attrs["capacity"]
    n = mask.size
    if cap == 0 or n == 0:  # nothing to find: every slot holds the padding, mask.size
        em.assign(out, em.filled((cap,), n, np.int32))
        return
    if not em.native:  # on CPU a host kernel: the scatter below copies its buffer twice (32 ms for 10^7)
        em.assign(out, host_call(em, "nonzero", ("mask",), (mask,), (("capacity", cap),), (out,), "nonzero"))
        return
    m = em.ref(mask) if mask.ndim == 1 else em.tmp(f"ops.reshape({em.ref(mask)}, ({n},))")  # flat positions
    cs = em.tmp(f"ops.cumsum(ops.cast({m}, ms.int32), 0)")
    take = em.tmp(f"ops.logical_and({m}, ops.less_equal({cs}, {em.scalar(cap, 'int32')}))")
    tgt = em.tmp(f"ops.reshape(ops.where({take}, ops.sub({cs}, {em.scalar(1, 'int32')}), {em.scalar(cap, 'int32')}), ({n}, 1))")
    val = em.tmp(f"ops.where({take}, ops.sub(ops.arange(0, {n}, 1, dtype=ms.int32), {em.scalar(n, 'int32')}), "
                 f"{em.scalar(0, 'int32')})")
    buf = em.tmp(f"ops.tensor_scatter_add({em.filled((cap + 1,), 0, np.int32)}, {tgt}, {val})")
    em.assign(out, f"ops.add({slice_source(buf, (cap + 1,), [(0, cap, 1)])}, {em.scalar(n, 'int32')})")
