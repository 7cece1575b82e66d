"""Lowering rules of the bit-packing ops ``pack_bits`` and ``unpack_bits``. On CPU the
NumPy backend's kernels (a byte at a time) as host kernels: MindSpore's CPU shift
kernels took ~13 ms a call on 8M codes, 157 of bf16()'s 366 ms per step on 10.7M
parameters (its payload packs two 16-bit halves per word). In a native graph: codes
shifted into place by a constant shift table and summed per word (in int64, so codes
carry as in the reference), or shifted out and masked.
"""
from __future__ import annotations

import numpy as np

from backends.mindspore.rules_fused import host_call
from backends.mindspore.rules_slice import slice_source
from backends.mindspore.trace import Var


def pack_bits(em, eqn):
    from backends.common import check_bits
    (codes,), out, bits = eqn.args, eqn.outs[0], eqn.attrs["bits"]
    check_bits(bits)
    per, n = 32 // bits, codes.shape[0]
    nw = out.shape[0]
    if not em.native and n and isinstance(codes, Var):
        em.assign(out, host_call(em, "pack_bits", ("codes",), (codes,), (("bits", int(bits)),), (out,), "pack"))
        return
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
    if not em.native and count and isinstance(words, Var) and words.dtype == np.uint32:
        em.assign(out, host_call(em, "unpack_bits", ("words",), (words,), (("bits", int(bits)), ("count", int(count))),
                                 (out,), "unpack"))
        return
    mask = 0xFFFFFFFF if bits == 32 else (1 << bits) - 1
    w = em.tmp(f"ops.broadcast_to(ops.reshape({em.ref(words)}, ({nw}, 1)), ({nw}, {per}))")
    sh = em.const(np.broadcast_to(np.arange(per, dtype=np.uint32) * np.uint32(bits), (nw, per)).copy())
    u = em.tmp(f"ops.bitwise_and(ops.bitwise_right_shift({w}, {sh}), {em.scalar(mask, 'uint32')})")
    flat = em.tmp(f"ops.reshape({u}, ({nw * per},))")
    em.assign(out, slice_source(flat, (nw * per,), [(0, count, 1)]))
