"""LLVM intrinsics for the Numba kernels: bit casts between float32 and
uint32 (register moves, so the loops that use them still vectorize) and the
trailing-zero count the top-k collection walks its bit masks with.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def f32_bits(typingctx, x):
    """Bit pattern of a float32 as uint32 (a register move, vectorizable)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def bits_f32(typingctx, x):
    """float32 with the bit pattern of the low 32 bits of an integer."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if x.bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        elif x.bitwidth < 32:
            v = builder.zext(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(x), codegen


@intrinsic
def ctz(typingctx, v):
    """Count of trailing zero bits of a nonzero uint64 (LLVM cttz)."""
    if v != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen
