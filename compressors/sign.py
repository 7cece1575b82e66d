"""Sign compressors.

signSGD with majority vote (Bernstein et al. 2018):
    worker sends s_i = sign(x_i) (1 bit per entry) and a vote weight w_i
    (0 for an all-zero tensor, else 1);  result = sign(sum_i w_i s_i)
    (ties -> 0). Aggregation is a vote, not a mean: gather-only.

Scaled sign (Karimireddy et al. 2019, the compressor of EF-signSGD):
    C(x) = (||x||_1 / d) * sign(x),   a delta-contraction with
    delta = ||x||_1^2 / (d ||x||_2^2);  use it as ``ef(scaledsign())``.

1-bit quantization with per-tensor scales (Seide et al. 2014):
    C(x)_i = mean{x_j : x_j >= 0} if x_i >= 0 else mean{x_j : x_j < 0}
    two float32 scales per tensor; meant for ``ef(onebit())``.

Signum (Bernstein et al. 2018) is signSGD on the worker's momentum
m = beta*m + (1-beta)*g; it is ``momentum(signsgd(), beta, dampening=True)``,
so its per-tensor state is ``MomentumState(inner=(), momentum=m)``. The other
sign compressors are stateless (``()``).

Range: the scales are means, summed over entries pre-scaled by 2^-k
(2^k >= d, exact), so they stay finite for any finite input; they travel as
float32, so a float64 tensor whose scale exceeds float32's range (3.4e38)
sends inf and decodes to ±inf.

Zero entries count as positive. NaN/inf input: signsgd's vote weight is NaN
(see ``compressors.signs``) so the decoded tensor is NaN; the scaled variants carry the
non-finite value in their scale, with the same outcome.
"""
from __future__ import annotations

import numpy as np

from compressors.signs import vote_weight, pack_signs, sign_bits, unpack_signs
from compressors.core import Compressor, Law, compute_dtype, fixed, single_round, tree_index, upcast
from compressors.momentum import momentum
from compressors.registry import canonical, register
from compressors.ef import ef


def _signsgd_leaf():
    def compress(ops, x, state, keys):
        return (pack_signs(ops, x), vote_weight(ops, x)), state

    def decompress(ops, payload, x):
        packed, weight = payload
        return ops.astype(unpack_signs(ops, packed, x, weight, -weight), x.dtype)

    def vote(ops, received, x, n):
        if n == 1:  # sign(+-w) = +-sign(w): the vote of one worker, without a pass over the sum
            packed, weight = tree_index(received, 0)
            s = ops.sign(weight)
            return ops.astype(unpack_signs(ops, packed, x, s, -s), x.dtype)
        total = None
        for i in range(n):
            s = decompress(ops, tree_index(received, i), x)
            total = upcast(ops, s) if total is None else total + upcast(ops, s)
        return ops.astype(ops.sign(total), x.dtype)

    return single_round(law=Law.GATHER, bits=lambda shape, dtype: sign_bits(shape) + 32,
                        compress=compress, decompress=decompress, aggregate=vote)


def _headroom(d: int) -> int:
    """k with 2^k >= d: a sum of d entries, each scaled by 2^-k, cannot exceed
    the largest |entry|, so the means below never overflow where the mean
    itself is finite. Scaling by a power of two is exact, so the result has
    the same bits as the plain sum / count (barring subnormal entries)."""
    return max(d - 1, 0).bit_length()


def _scaled_leaf(two_scales: bool):
    def compress(ops, x, state, keys):
        xf = ops.reshape(upcast(ops, x), (-1,))
        k = _headroom(xf.size)
        if two_scales:
            # sides x >= 0 and not: scaled sums, counts, x*0; and the sign bits, from one read of x
            sums, packed = ops.sign_split_pack(xf, 2.0**-k)
            # a non-finite entry (sum(x*0) = NaN) is kept visible in both scales
            bad = sums[4]
            sp = sums[0] / ops.maximum(sums[1], 1.0) * 2.0**k + bad
            sn = sums[2] / ops.maximum(sums[3], 1.0) * 2.0**k + bad
            return (packed, ops.astype(ops.stack([sp, sn]), np.float32)), state
        d = max(xf.size, 1)
        total, packed = ops.sum_abs_pack(xf, 2.0**-k)  # the L1 norm and the sign bits, from one read of x
        scales = ops.astype(ops.reshape(total / float(d) * 2.0**k, (1,)), np.float32)
        return (packed, scales), state

    def decompress(ops, payload, x):
        packed, scales = payload
        s = ops.astype(scales, compute_dtype(x.dtype))
        neg = -s[1] if two_scales else -s[0]
        return ops.astype(unpack_signs(ops, packed, x, s[0], neg), x.dtype)

    nscales = 2 if two_scales else 1
    return single_round(law=Law.GATHER, bits=lambda shape, dtype: sign_bits(shape) + 32 * nscales,
                        compress=compress, decompress=decompress)


_SIGNSGD = _signsgd_leaf()
_SCALED = _scaled_leaf(False)
_ONEBIT = _scaled_leaf(True)


@register("signsgd", paper="Bernstein et al. 2018, signSGD")
def signsgd() -> Compressor:
    """signSGD with majority vote: 1 bit per entry, result sign(sum of signs)."""
    return Compressor("signsgd()", fixed(_SIGNSGD), doc="signSGD, majority vote")


@register("signum", paper="Bernstein et al. 2018, Signum")
def signum(beta: float = 0.9) -> Compressor:
    """Signum: majority-vote signSGD on the worker's momentum (beta)."""
    return momentum(signsgd(), beta=beta, dampening=True)._replace(
        spec=canonical("signum", beta=beta), doc="Signum (momentum + sign, majority vote)")


@register("scaledsign", paper="Karimireddy et al. 2019")
def scaledsign() -> Compressor:
    """Scaled sign (||x||_1/d)*sign(x): delta-contraction; use with ef()."""
    return Compressor("scaledsign()", fixed(_SCALED), contractive=True, doc="scaled sign")


@register("efsignsgd", paper="Karimireddy et al. 2019, EF-signSGD")
def efsignsgd() -> Compressor:
    """EF-signSGD: error feedback around the scaled sign, ef(scaledsign())."""
    return ef(scaledsign())._replace(spec="efsignsgd()", doc="EF-signSGD")


@register("onebit", paper="Seide et al. 2014, 1-bit SGD")
def onebit() -> Compressor:
    """1-bit quantization with two per-tensor scales (mean of + and - parts)."""
    return Compressor("onebit()", fixed(_ONEBIT), doc="1-bit SGD quantizer")
