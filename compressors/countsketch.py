"""Count-sketch compression: sketched SGD (Ivkin et al. 2019) and FetchSGD (Rothchild et al. 2020).

A count sketch of x in R^d is a table S of R rows by c columns. With hash
functions h_r: [d] -> [c] and signs s_r: [d] -> {-1, +1},

    S[r, j] = sum of s_r(i) * x_i over the i with h_r(i) = j      (linear in x)
    est_i   = median over r of s_r(i) * S[r, h_r(i)]              (estimate of x_i)

An entry much larger than the rest of its buckets (a heavy hitter) is
estimated almost exactly. Every worker uses the same hashes, drawn from
``keys.fixed`` (the same on every worker and at every step), so the sketches
of n workers *add up* to the sketch of the summed gradient: the sketch
travels by all-reduce (Law.SUM), whose cost does not grow with n the way
top-k's all-gather does.

    k = max(1, ceil(ratio * d))  entries recovered,   c = ceil(width * k)  columns
    h_r(i) = hash32(i, a_r) mod c,   s_r(i) = 1 - 2 * (hash32(i, b_r) >> 31)
    (a_r, b_r: 2R uint32 words of random_bits(keys.fixed); hash32: compressors.kit)

``exact=True`` — sketched SGD, two SUM rounds:

    round 0:  send sketch(x_i)                          -> S = sum_i sketch(x_i)
    round 1:  K = the k largest |est| of S (the same on every worker);
              send x_i[K]                               -> sum_i x_i[K]
    decode:   mean = (1/n) sum_i x_i[K] on K, 0 elsewhere

  The values are exact. What a worker's own payloads decode to is x_i on K,
  so ``ef(countsketch(..., exact=True))`` keeps the rest in each worker's
  residual (the paper's local error accumulation).

``exact=False`` (default) — FetchSGD, one SUM round, error feedback in
sketch space:

    round 0:  send sketch(x_i)                          -> S
    decode:   E <- E + S / n       (E: the error sketch, identical on every worker)
              K = the k largest |est| of E;  delta = est of E on K;  mean = delta
              E[r, h_r(i)] <- 0 for every row r and i in K

  E accumulates, in sketch space, what has been summed but not applied
  yet, so the hashes must be the same at every step. Zeroing the buckets
  of the applied entries also drops the small entries that share them;
  the lossless alternative, E <- E - sketch(delta), keeps the estimation
  error of delta in E instead, and with small sketches (a few columns per
  recovered entry) that error compounds: in a short Fashion-MNIST MLP run
  (4 workers, lr 0.1, width 4) it diverged where zeroing trained normally.
  ``momentum(countsketch(...))`` sketches each worker's momentum; by
  linearity their sum is the sketch of the momentum of the summed
  gradients, i.e. FetchSGD's momentum in sketch space (without the paper's
  zeroing of momentum at the extracted coordinates).

Wire format: round 0 x.dtype[R * c] (the table, row-major; computed in
float32/float64 and rounded once); round 1 (exact) x.dtype[k] = x_i[K].

Per-tensor state: ``SketchIndicesState(indices)`` (exact: this step's K,
int32[k], kept from round 1's encode for decoding) or
``SketchErrorState(error, seeds)`` (FetchSGD: E, float32/float64[R * c],
and the 2R hash seeds, which encode writes because decode sees no keys).

Non-finite input: a NaN or inf in x reaches the sketch, so its entry's
estimate is non-finite and it is among the k recovered; exact=True also
makes every round-1 value NaN (max|x| * 0 is added); in FetchSGD's error
sketch the non-finite buckets are zeroed once the entries recovered from
them are applied.
Biased; not a contraction in general (K comes from the sum, not from x_i).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from compressors import quant as Q
from compressors.core import (Compressor, Law, Leaf, Round, check, compute_dtype, dtype_bits, fixed, mean_of,
                              single_round, upcast)
from compressors.kit import hash32, median_of
from compressors.ops import Array
from compressors.registry import canonical, register
from compressors.topk import densify, keep_count

MAX_ROWS = 15


class SketchIndicesState(NamedTuple):
    """countsketch(exact=True) per tensor: this step's recovered indices K (int32[k])."""

    indices: Array


class SketchErrorState(NamedTuple):
    """countsketch(exact=False) per tensor: the error sketch E (compute dtype,
    R*c entries) and the hash seeds (uint32[2R], written by every encode:
    decode does not see the keys they come from)."""

    error: Array
    seeds: Array


class Geometry(NamedTuple):
    d: int
    k: int
    rows: int
    cols: int

    @classmethod
    def of(cls, shape, ratio: float, rows: int, width: float) -> "Geometry":
        d = math.prod(shape)
        k = keep_count(ratio, d)
        return cls(d, k, rows, max(1, math.ceil(width * k)))

    @property
    def size(self) -> int:
        return self.rows * self.cols


def seeds_of(ops, key, g: Geometry) -> Array:
    """The 2R hash seeds (a_0..a_R-1, b_0..b_R-1) drawn from a key (``keys.fixed``)."""
    return ops.random_bits(key, (2 * g.rows,))


def hashes(ops, seeds: Array, idx: Array, g: Geometry, dtype) -> list[tuple[Array, Array]]:
    """Per row r, (table position r*c + h_r(i) as int32, sign s_r(i) in
    ``dtype``) of the int32 indices ``idx``."""
    u = ops.astype(idx, np.uint32)
    out = []
    for r in range(g.rows):
        pos = ops.astype(hash32(ops, u, seeds[r]) % g.cols, np.int32) + r * g.cols
        top = hash32(ops, u, seeds[g.rows + r]) >> ops.asarray(np.uint32(31))
        out.append((pos, ops.astype(top, dtype) * -2.0 + 1.0))
    return out


def sketch(ops, values: Array, h, g: Geometry) -> Array:
    """The table (R*c entries, values' dtype) of a vector given at the
    indices ``h`` was computed for: one scatter of all R rows."""
    pos = ops.concatenate([p for p, _ in h])
    signed = ops.concatenate([s * values for _, s in h])
    return ops.scatter_add(g.size, pos, signed)


def unsketch(ops, table: Array, h) -> Array:
    """est at the indices ``h`` was computed for: the median over rows."""
    return median_of(ops, [s * ops.gather(table, p) for p, s in h])


def _heavy(ops, est: Array, g: Geometry) -> tuple[Array, Array]:
    """(indices, values) of the k largest |est| (indices ascending)."""
    idx = ops.top_k_abs(est, g.k)
    return idx, ops.gather(est, idx)


def _all(ops, seeds, g: Geometry, dtype):
    return hashes(ops, seeds, ops.arange(g.d), g, dtype)


def _fetchsgd_leaf(ratio: float, rows: int, width: float, shape) -> Leaf:
    g = Geometry.of(shape, ratio, rows, width)

    def init(ops, x):
        return SketchErrorState(ops.zeros((g.size,), compute_dtype(x.dtype)), ops.zeros((2 * rows,), np.uint32))

    def compress(ops, x, state, keys):
        flat = upcast(ops, ops.reshape(x, (-1,)))
        seeds = seeds_of(ops, keys.fixed, g)
        table = sketch(ops, flat, _all(ops, seeds, g, flat.dtype), g)
        return ops.astype(table, x.dtype), SketchErrorState(state.error, seeds)

    def recover(ops, table, x, seeds):
        """(dense delta in x's dtype, the table with the delta's buckets zeroed)."""
        est = unsketch(ops, table, _all(ops, seeds, g, table.dtype))
        idx, vals = _heavy(ops, est, g)
        hit = ops.scatter_add(g.size, ops.concatenate([p for p, _ in hashes(ops, seeds, idx, g, table.dtype)]),
                              ops.full((g.rows * g.k,), 1, np.int32))
        return densify(ops, (ops.astype(vals, x.dtype), idx), x), ops.where(hit > 0, 0.0, table)

    def decompress(ops, payload, x, state):
        return recover(ops, upcast(ops, payload), x, state.seeds)[0]

    def aggregate(ops, total, x, n, state):
        out, err = recover(ops, state.error + upcast(ops, total) * (1.0 / n), x, state.seeds)
        return out, SketchErrorState(err, state.seeds)

    return single_round(law=Law.SUM, bits=lambda s, dt: g.size * dtype_bits(dt), compress=compress,
                        decompress=decompress, aggregate=aggregate, init=init, stateful=True)


def _sketched_sgd_leaf(ratio: float, rows: int, width: float, shape) -> Leaf:
    g = Geometry.of(shape, ratio, rows, width)

    def init(ops, x):
        return SketchIndicesState(ops.zeros((g.k,), np.int32))

    def encode(ops, x, state, keys, received, r):
        flat = ops.reshape(x, (-1,))
        wide = upcast(ops, flat)
        h = _all(ops, seeds_of(ops, keys.fixed, g), g, wide.dtype)
        if r == 0:
            return ops.astype(sketch(ops, wide, h, g), x.dtype), state
        idx, _ = _heavy(ops, unsketch(ops, upcast(ops, received[0]), h), g)
        return ops.gather(flat, idx) + Q.poison(ops, flat, x.dtype), SketchIndicesState(idx)

    def local(ops, x, state, own, received):
        return densify(ops, (own[1], state.indices), x)

    def decode(ops, x, state, own, received, n):
        return densify(ops, (mean_of(ops, received[1], n), state.indices), x), state

    def plan(shape, dtype):
        return (Round(Law.SUM, g.size * dtype_bits(dtype)), Round(Law.SUM, g.k * dtype_bits(dtype)))

    return Leaf(init, encode, local, decode, plan)


@register("countsketch", paper="Ivkin et al. 2019 (sketched SGD); Rothchild et al. 2020 (FetchSGD)")
def countsketch(ratio: float = 0.01, rows: int = 3, width: float = 4.0, exact: bool = False) -> Compressor:
    """Summable count sketch; recover the k = ceil(ratio*d) heavy hitters (FetchSGD, or exact values in a second round)."""
    check(isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 1,
          f"countsketch: ratio must be in (0, 1], got {ratio!r}")
    check(isinstance(rows, int) and not isinstance(rows, bool) and 1 <= rows <= MAX_ROWS,
          f"countsketch: rows must be an int in [1, {MAX_ROWS}], got {rows!r}")
    check(isinstance(width, (int, float)) and not isinstance(width, bool) and 1 <= width < 2**20,
          f"countsketch: width (columns per recovered entry) must be in [1, 2**20), got {width!r}")
    check(isinstance(exact, bool), f"countsketch: exact must be True or False, got {exact!r}")
    build = _sketched_sgd_leaf if exact else _fetchsgd_leaf
    spec = canonical("countsketch", ratio=ratio, rows=rows, width=width, exact=exact)
    return Compressor(spec, lambda shape, dtype: build(float(ratio), rows, float(width), shape),
                      doc="count sketch (sketched SGD / FetchSGD)")
