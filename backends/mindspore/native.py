"""Native-op lowerings of the host kernels, for graphs that must run on GPU/Ascend.

``ops.Custom(func_type="pyfunc")`` runs on CPU only, so a graph for another
device spells the same functions in plain MindSpore ops; each function here
writes source lines through the emitter ``em`` and returns an expression (or
names). Bit-exact with the host kernels of ``backends.mindspore.runtime``
(IEEE semantics: subnormals kept, no flush to zero) by construction:

* **threefry2x32** (fold_in, random bits): the 20 rounds in uint32
  add/xor/shift/or, which wrap modulo 2^32 as the NumPy kernel does.
* **frexp**: ``floor(log2|x|)`` corrected by one comparison with the exact
  power of two (a constant table read by ``gather``), subnormals scaled by
  2^(p+1) first; the mantissa is ``|x|`` times two exact powers of two (no
  rounding). 0, -0, inf, nan -> (x, 0) as ``np.frexp``.
* **ldexp**: ``frexp(m)`` then ``m' * 2^a * 2^b`` where the first product is
  exact and the second rounds once (correct rounding into subnormals, overflow
  to inf) — the pieces always exact normal powers of two.
* **bitcast float <-> int**: the IEEE fields from frexp (float -> bits) or
  rebuilt as ``(field + 2^p) * 2^k`` (bits -> float); NaN becomes the quiet
  NaN of its sign (payload bits are not kept: the one documented difference).

Powers of two come from a constant table, never from ``pow``/``exp2`` (not
exact on every device).
"""
from __future__ import annotations

import numpy as np

_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


# -- threefry2x32 ----------------------------------------------------------------

def _u32(em, v: int) -> str:
    return em.scalar(v, "uint32")


def threefry(em, k0: str, k1: str, c0: str, c1: str) -> tuple[str, str]:
    """Names of (x0, x1) = threefry2x32((k0, k1), (c0, c1)) on uint32 operands."""
    ks = (k0, k1, em.tmp(f"ops.bitwise_xor(ops.bitwise_xor({k0}, {k1}), {_u32(em, 0x1BD11BDA)})"))
    x0 = em.tmp(f"ops.add({c0}, {ks[0]})")
    x1 = em.tmp(f"ops.add({c1}, {ks[1]})")
    for i in range(5):
        for r in _ROT[i % 2]:
            x0 = em.tmp(f"ops.add({x0}, {x1})")
            rot = em.tmp(f"ops.bitwise_or(ops.bitwise_left_shift({x1}, {_u32(em, r)}), "
                         f"ops.bitwise_right_shift({x1}, {_u32(em, 32 - r)}))")
            x1 = em.tmp(f"ops.bitwise_xor({rot}, {x0})")
        x0 = em.tmp(f"ops.add({x0}, {ks[(i + 1) % 3]})")
        x1 = em.tmp(f"ops.add(ops.add({x1}, {ks[(i + 2) % 3]}), {_u32(em, i + 1)})")
    return x0, x1


def _key_words(em, key: str) -> tuple[str, str]:
    return em.tmp(f"{key}[0:1]"), em.tmp(f"{key}[1:2]")


def fold_in(em, key: str, data: str) -> str:
    """uint32[2]: ``threefry(key, (0, data))`` with data wrapped to uint32 (via int64)."""
    k0, k1 = _key_words(em, key)
    d = em.tmp(f"ops.reshape(ops.cast(ops.cast({data}, ms.int64), ms.uint32), (1,))")
    y0, y1 = threefry(em, k0, k1, em.filled((1,), 0, np.uint32), d)
    return f"ops.concat(({y0}, {y1}), 0)"


def random_bits(em, key: str, shape) -> str:
    """uint32 of ``shape``: ``x0 ^ x1`` of ``threefry(key, (0, i))`` for i = 0 .. n-1."""
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape)) if shape else 1
    if n == 0:
        return f"ops.zeros({shape!r}, ms.uint32)"
    k0, k1 = _key_words(em, key)
    idx = em.tmp(f"ops.cast(ops.arange(0, {n}, 1, dtype=ms.int32), ms.uint32)")
    y0, y1 = threefry(em, k0, k1, em.filled((n,), 0, np.uint32), idx)
    return f"ops.reshape(ops.bitwise_xor({y0}, {y1}), {shape!r})"


def random_words(em, key: str, shape) -> str:
    """uint32 of ``shape``: word 2j is x0 and 2j + 1 is x1 of ``threefry(key, (0, j))``."""
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape)) if shape else 1
    if n == 0:
        return f"ops.zeros({shape!r}, ms.uint32)"
    blocks = -(-n // 2)
    k0, k1 = _key_words(em, key)
    idx = em.tmp(f"ops.cast(ops.arange(0, {blocks}, 1, dtype=ms.int32), ms.uint32)")
    y0, y1 = threefry(em, k0, k1, em.filled((blocks,), 0, np.uint32), idx)
    pairs = em.tmp(f"ops.reshape(ops.stack(({y0}, {y1}), 1), ({2 * blocks},))")
    return f"ops.reshape({pairs}[0:{n}], {shape!r})"


# -- exact powers of two ---------------------------------------------------------

def _fi(work):
    return np.finfo(np.dtype(work))


def _pow2(em, k: str, work) -> str:
    """2^k (k an int32 expression, within the normal range of ``work``) read from a table."""
    fi = _fi(work)
    lo, hi = fi.minexp, fi.maxexp - 1
    key = ("pow2", np.dtype(work).name)
    if key not in em.memo:
        em.memo[key] = em.const(np.ldexp(np.ones(hi - lo + 1, work), np.arange(lo, hi + 1)).astype(work))
    return f"ops.gather({em.memo[key]}, ops.add({k}, {em.scalar(-lo, 'int32')}), 0)"


def signbit(em, x: str, work) -> str:
    """Whether float ``x`` has its sign bit set (-0 included: atan2(-0, -1) = -pi); NaN -> False.
    ``ops.signbit`` is ``x < 0`` on MindSpore's CPU kernels, which miss -0."""
    w = np.dtype(work).name
    return f"ops.less(ops.atan2({x}, ops.full_like({x}, -1.0)), {em.scalar(0, w)})"


def _clip(em, k: str, lo: int, hi: int) -> str:
    return em.tmp(f"ops.minimum(ops.maximum({k}, {em.scalar(lo, 'int32')}), {em.scalar(hi, 'int32')})")


# -- frexp / ldexp -----------------------------------------------------------------

def frexp(em, x: str, work) -> tuple[str, str]:
    """(mantissa in ``work``, int32 exponent) of ``x`` (already ``work``: float32 or float64)."""
    fi, w = _fi(work), np.dtype(work).name
    a = em.tmp(f"ops.abs({x})")
    fin = em.tmp(f"ops.logical_and(ops.isfinite({x}), ops.not_equal({x}, {em.scalar(0, w)}))")
    tiny = em.tmp(f"ops.less({a}, {em.scalar(float(fi.tiny), w)})")
    scaled = em.tmp(f"ops.where({tiny}, ops.mul({a}, {em.scalar(2.0 ** (fi.nmant + 1), w)}), {a})")
    safe = em.tmp(f"ops.where({fin}, {scaled}, ops.ones_like({a}))")
    e0 = _clip(em, em.tmp(f"ops.cast(ops.floor(ops.log2({safe})), ms.int32)"), fi.minexp, fi.maxexp - 1)
    p = em.tmp(_pow2(em, e0, work))
    lower = em.tmp(f"ops.cast(ops.less({safe}, {p}), ms.int32)")
    upper = em.tmp(f"ops.cast(ops.greater_equal({safe}, ops.mul({p}, {em.scalar(2, w)})), ms.int32)")
    e1 = _clip(em, em.tmp(f"ops.add(ops.sub({e0}, {lower}), {upper})"), fi.minexp, fi.maxexp - 1)
    neg = em.tmp(f"ops.neg(ops.add({e1}, {em.scalar(1, 'int32')}))")  # -(frexp exponent)
    h1 = em.tmp(f"ops.floor_divide({neg}, {em.scalar(2, 'int32')})")
    m = em.tmp(f"ops.mul(ops.mul({safe}, {_pow2(em, h1, work)}), {_pow2(em, f'ops.sub({neg}, {h1})', work)})")
    signed = em.tmp(f"ops.where({signbit(em, x, work)}, ops.neg({m}), {m})")
    e = em.tmp(f"ops.sub(ops.add({e1}, {em.scalar(1, 'int32')}), "
               f"ops.mul(ops.cast({tiny}, ms.int32), {em.scalar(fi.nmant + 1, 'int32')}))")
    return (em.tmp(f"ops.where({fin}, {signed}, {x})"),
            em.tmp(f"ops.where({fin}, {e}, ops.zeros_like({e}))"))


def ldexp(em, m: str, e: str, work) -> str:
    """``m * 2^e`` correctly rounded in ``work`` (m in ``work``, e int32)."""
    fi, w = _fi(work), np.dtype(work).name
    span = fi.maxexp - fi.minexp + fi.nmant + 4
    mm, em_ = frexp(em, m, work)
    t = em.tmp(f"ops.add({em_}, {_clip(em, e, -span, span)})")
    normal = em.tmp(f"ops.greater_equal({t}, {em.scalar(fi.minexp + 1, 'int32')})")
    shift = fi.nmant + 4
    tn = _clip(em, t, fi.minexp + 1, fi.maxexp + 1)
    t1 = em.tmp(f"ops.floor_divide({tn}, {em.scalar(2, 'int32')})")
    ts = _clip(em, t, fi.minexp - fi.nmant - 3, fi.minexp)
    pa = em.tmp(f"ops.where({normal}, {t1}, ops.add({ts}, {em.scalar(shift, 'int32')}))")
    pb = em.tmp(f"ops.where({normal}, ops.sub({tn}, {t1}), {em.scalar(-shift, 'int32')})")
    r = em.tmp(f"ops.mul(ops.mul({mm}, {_pow2(em, pa, work)}), {_pow2(em, pb, work)})")
    keep = em.tmp(f"ops.logical_or(ops.equal({m}, {em.scalar(0, w)}), ops.logical_not(ops.isfinite({m})))")
    return f"ops.where({keep}, {m}, {r})"


# -- bit casts --------------------------------------------------------------------

WORK = {"float16": "float32", "float32": "float32", "float64": "float64"}


def float_to_bits(em, x: str, src, dst) -> str:
    """The IEEE bits of float ``x`` (dtype ``src``) as the same-width int dtype ``dst``."""
    src, dst = np.dtype(src), np.dtype(dst)
    fs, work = _fi(src), WORK[src.name]
    p, bias, top = fs.nmant, -fs.minexp + 1, (1 << fs.nexp) - 1
    nbits = 8 * src.itemsize
    xw = x if src.name == work else em.tmp(f"ops.cast({x}, ms.{work})")
    m, e = frexp(em, em.tmp(f"ops.abs({xw})"), work)
    normal = em.tmp(f"ops.greater_equal({e}, {em.scalar(fs.minexp + 1, 'int32')})")
    k = bias - 1 + p  # subnormal field = |x| * 2^k
    k1 = k // 2
    sub = f"ops.mul(ops.mul(ops.abs({xw}), {em.scalar(2.0 ** k1, work)}), {em.scalar(2.0 ** (k - k1), work)})"
    nrm = f"ops.sub(ops.mul({m}, {em.scalar(2.0 ** (p + 1), work)}), {em.scalar(2.0 ** p, work)})"
    field = em.tmp(f"ops.cast(ops.where({normal}, {nrm}, {sub}), ms.int64)")
    biased = em.tmp(f"ops.cast(ops.where({normal}, ops.add({e}, {em.scalar(bias - 1, 'int32')}), "
                    f"ops.zeros_like({e})), ms.int64)")
    mag = em.tmp(f"ops.add(ops.mul({biased}, {em.scalar(1 << p, 'int64')}), {field})")
    inf = em.scalar(top << p, "int64")
    nan = em.scalar((top << p) | (1 << (p - 1)), "int64")
    zero = em.scalar(0, "int64")
    mag = em.tmp(f"ops.where(ops.isnan({xw}), {nan}, ops.where(ops.isinf({xw}), {inf}, "
                 f"ops.where(ops.equal({xw}, {em.scalar(0, work)}), {zero}, {mag})))")
    neg = em.tmp(signbit(em, xw, work))
    if nbits == 64:  # signed value of sign|mag = mag - 2^63
        out = em.tmp(f"ops.where({neg}, ops.add({mag}, {em.scalar(-(1 << 63), 'int64')}), {mag})")
    elif dst.kind == "i":
        out = em.tmp(f"ops.where({neg}, ops.sub({mag}, {em.scalar(1 << (nbits - 1), 'int64')}), {mag})")
    else:
        out = em.tmp(f"ops.where({neg}, ops.add({mag}, {em.scalar(1 << (nbits - 1), 'int64')}), {mag})")
    return f"ops.cast({out}, {em.dt(dst)})"


def bits_to_float(em, u: str, src, dst) -> str:
    """The float ``dst`` whose IEEE bits are the int ``u`` (dtype ``src``, same width)."""
    src, dst = np.dtype(src), np.dtype(dst)
    fd, work = _fi(dst), WORK[dst.name]
    p, bias, top = fd.nmant, -fd.minexp + 1, (1 << fd.nexp) - 1
    nbits = 8 * dst.itemsize
    v = em.tmp(f"ops.cast({u}, ms.int64)")
    if nbits == 64:
        neg = em.tmp(f"ops.less({v}, {em.scalar(0, 'int64')})")
        v = em.tmp(f"ops.bitwise_and({v}, {em.scalar((1 << 63) - 1, 'int64')})")
    else:
        v = em.tmp(f"ops.bitwise_and({v}, {em.scalar((1 << nbits) - 1, 'int64')})")
        neg = em.tmp(f"ops.greater_equal({v}, {em.scalar(1 << (nbits - 1), 'int64')})")
        v = em.tmp(f"ops.bitwise_and({v}, {em.scalar((1 << (nbits - 1)) - 1, 'int64')})")
    biased = em.tmp(f"ops.cast(ops.bitwise_right_shift({v}, {em.scalar(p, 'int64')}), ms.int32)")
    field = em.tmp(f"ops.bitwise_and({v}, {em.scalar((1 << p) - 1, 'int64')})")
    is_norm = em.tmp(f"ops.greater({biased}, {em.scalar(0, 'int32')})")
    mant = em.tmp(f"ops.cast(ops.where({is_norm}, ops.add({field}, {em.scalar(1 << p, 'int64')}), {field}), ms.{work})")
    # value = mant * 2^k, k = max(biased, 1) - bias - p, as two exact normal powers of two
    k = em.tmp(f"ops.sub(ops.maximum({biased}, {em.scalar(1, 'int32')}), {em.scalar(bias + p, 'int32')})")
    k = _clip(em, k, 2 * _fi(work).minexp + 2, 2 * (_fi(work).maxexp - 1))
    k1 = em.tmp(f"ops.floor_divide({k}, {em.scalar(2, 'int32')})")
    val = em.tmp(f"ops.mul(ops.mul({mant}, {_pow2(em, k1, work)}), {_pow2(em, f'ops.sub({k}, {k1})', work)})")
    special = em.tmp(f"ops.equal({biased}, {em.scalar(top, 'int32')})")
    inf_nan = em.tmp(f"ops.where(ops.equal({field}, {em.scalar(0, 'int64')}), {em.scalar(np.inf, work)}, "
                     f"{em.scalar(np.nan, work)})")
    val = em.tmp(f"ops.where({special}, {inf_nan}, {val})")
    val = em.tmp(f"ops.where({neg}, ops.neg({val}), {val})")
    return val if dst.name == work else f"ops.cast({val}, {em.dt(dst)})"
