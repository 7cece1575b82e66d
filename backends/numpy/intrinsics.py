"""LLVM intrinsics for the Numba kernels: bit casts between float32 and
uint32 (register moves, so the loops that use them still vectorize), the IEEE
conversions between float32 and binary16 bits (LLVM ``fptrunc``/``fpext``: one
vector instruction each where the CPU has them, F16C on x86), the
trailing-zero count the top-k collection walks its bit masks with, and 32
compares turned into one word by a mask move (the sign packers, natural compression's sign
words, the quantizer's 1-bit codes; a vector of i1 bit-cast to i32 puts element t at bit t on
the little-endian hosts kfsim runs on).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
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
def f32_to_half_bits(typingctx, x):
    """binary16 bits of a float32, rounded to nearest even (the default rounding mode): LLVM
    ``fptrunc`` to half. A NaN's bits are the target's (callers that fix them select them)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def half_bits_to_f32(typingctx, h):
    """float32 of binary16 bits (exact): LLVM ``fpext`` from half. A signalling NaN comes back
    quieted (callers that keep it clear the bit)."""
    if h != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def ctz(typingctx, v):
    """Count of trailing zero bits of a nonzero uint64 (LLVM cttz)."""
    if v != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@intrinsic
def prefetch(typingctx, arr, i):
    """Hint that ``arr[i]`` (a 1-D C-contiguous array; i in range) will be
    used soon (``llvm.prefetch`` into all cache levels: no effect on results,
    and no fault)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
            and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(8).as_pointer())
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
            ir.VoidType(), [ir.IntType(8).as_pointer()] + [ir.IntType(32)] * 3), "llvm.prefetch.p0i8")
        builder.call(fn, [ptr, ir.IntType(32)(0), ir.IntType(32)(3), ir.IntType(32)(1)])
        return context.get_dummy_value()

    return types.void(arr, i), codegen


def _vector_at(context, builder, aryty, ary, i, elem):
    """The 32 entries of the 1-D C-contiguous array ``ary`` from index i, loaded as one
    ``<32 x elem>`` vector (elem: an LLVM type of the array's width)."""
    data = context.make_array(aryty)(context, builder, ary).data
    vec = ir.VectorType(elem, 32)
    return builder.load(builder.bitcast(builder.gep(data, [i]), vec.as_pointer()), align=aryty.dtype.bitwidth // 8)


@intrinsic
def negative_bits32(typingctx, arr, i):
    """uint32 whose bit t is ``arr[i + t] < 0`` for t < 32 (an ordered compare: NaN and -0.0
    give 0; ``arr`` a 1-D C-contiguous float32/float64 array with 32 entries from i): vector
    compares and a mask move, no byte per entry."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
            and arr.dtype in (types.float32, types.float64) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        v = _vector_at(context, builder, aryty, args[0], args[1], context.get_value_type(aryty.dtype))
        lt = builder.fcmp_ordered("<", v, ir.Constant(v.type, [0.0] * 32))
        return builder.bitcast(lt, ir.IntType(32))

    return types.uint32(arr, i), codegen


@intrinsic
def signed_code_bits32(typingctx, arr, codes, i):
    """uint32 whose bit t is ``(arr[i + t] < 0 and codes[i + t] != 0) or arr[i + t] is NaN``
    for t < 32: natural compression's sign bits (a negative entry keeps its sign only where its
    code is not 0, NaN is sent as sign 1 with code 0). ``arr`` a 1-D C-contiguous float32/float64
    array and ``codes`` a 1-D C-contiguous uint8 array, both with 32 entries from i: vector
    compares and one mask move per word, no byte per entry. The tests are on the entries' bits
    (sign bit set, magnitude beyond inf's), not float compares: under XLA's host callbacks the
    thread reads subnormals as zero (DAZ), and a negative subnormal that rounds to 2^-126 keeps
    its sign (``x < 0`` and the sign bit agree where the code is not 0)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
            and arr.dtype in (types.float32, types.float64)
            and isinstance(codes, types.Array) and codes.ndim == 1 and codes.layout == "C"
            and codes.dtype == types.uint8 and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        aryty, codety = signature.args[0], signature.args[1]
        width = aryty.dtype.bitwidth
        v = _vector_at(context, builder, aryty, args[0], args[2], ir.IntType(width))
        c = _vector_at(context, builder, codety, args[1], args[2], ir.IntType(8))
        vec, bvec = v.type, c.type
        neg = builder.icmp_signed("<", v, ir.Constant(vec, [0] * 32))
        coded = builder.icmp_unsigned("!=", c, ir.Constant(bvec, [0] * 32))
        magnitude = builder.and_(v, ir.Constant(vec, [(1 << (width - 1)) - 1] * 32))
        inf = 0x7F800000 if width == 32 else 0x7FF0000000000000
        nan = builder.icmp_unsigned(">", magnitude, ir.Constant(vec, [inf] * 32))
        return builder.bitcast(builder.or_(builder.and_(neg, coded), nan), ir.IntType(32))

    return types.uint32(arr, codes, i), codegen


@intrinsic
def round_bits32(typingctx, x, i, h, j, o, s):
    """uint32 whose bit t (t < 32) is ``h[j + t] + 1/2 < (x[i + t] - o)·s``, compared in x's float
    type (ordered: NaN gives 0; no fused multiply-add): the 1-bit codes {0, 1} of
    ``fused_quant.round_codes`` with s = inv_scale·2^16, as vector compares and one mask move.
    x a 1-D C-contiguous float32/float64 array, h one of uint16 uniforms' high halves, o and s
    of x's dtype."""
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C"
            and x.dtype in (types.float32, types.float64) and o == x.dtype and s == x.dtype
            and isinstance(h, types.Array) and h.ndim == 1 and h.layout == "C" and h.dtype == types.uint16
            and isinstance(i, types.Integer) and isinstance(j, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        xv = _vector_at(context, builder, signature.args[0], args[0], args[1], context.get_value_type(x.dtype))
        hv = _vector_at(context, builder, signature.args[2], args[2], args[3], ir.IntType(16))
        fv = xv.type
        lanes = ir.Constant(ir.VectorType(ir.IntType(32), 32), [0] * 32)

        def splat(value):
            one = builder.insert_element(ir.Constant(fv, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(one, ir.Constant(fv, ir.Undefined), lanes)

        y = builder.fmul(builder.fsub(xv, splat(args[4])), splat(args[5]))
        u = builder.fadd(builder.uitofp(hv, fv), ir.Constant(fv, [0.5] * 32))
        return builder.bitcast(builder.fcmp_ordered("<", u, y), ir.IntType(32))

    return types.uint32(x, i, h, j, o, s), codegen
