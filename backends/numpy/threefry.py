"""Threefry-2x32 (Salmon et al. 2011, "Parallel random numbers: as easy as
1, 2, 3") in NumPy and Numba, bit-identical to ``jax.random``.

The block function maps a key (k0, k1) and a counter (x0, x1), all uint32,
to two uint32 words through 20 rounds of

    x0 <- x0 + x1;   x1 <- rotl(x1, R[r]) ^ x0,     R = (13, 15, 26, 6 | 17, 29, 16, 24)

with the key schedule ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA) injected before
the first round and after every fourth: after block j (j = 1..5)
``x0 += ks[j % 3]; x1 += ks[(j + 1) % 3] + j``.

JAX's key derivation, reproduced here:

* ``key(seed) = (0, seed mod 2**32)`` for seeds in the int32/uint32 range,
  as ``jax.random.PRNGKey`` in JAX's default 32-bit mode (with
  ``jax_enable_x64`` JAX uses the high word of a 64-bit seed instead; the
  two agree for ``0 <= seed < 2**32``).
* ``fold_in(key, d) = threefry(key, (0, d))``, both output words.
* ``random_bits(key, shape)[i] = y0 ^ y1`` with
  ``(y0, y1) = threefry(key, (i >> 32, i & 0xFFFFFFFF))`` for the row-major
  flat index i: the *partitionable* layout (``jax_threefry_partitionable``,
  JAX's default since 0.5), where each element depends only on its index.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from backends.numpy.intrinsics import bits_f32

_M32 = 0xFFFFFFFF
_PARITY = 0x1BD11BDA
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(k0, k1, x0, x1) -> tuple[np.ndarray, np.ndarray]:
    """The block function on uint32 arrays (NumPy reference; broadcasting)."""
    k0, k1 = np.uint32(k0), np.uint32(k1)
    x0 = np.asarray(x0, np.uint32).copy()
    x1 = np.asarray(x1, np.uint32).copy()
    ks = (k0, k1, np.uint32(k0 ^ k1 ^ np.uint32(_PARITY)))
    with np.errstate(over="ignore"):  # uint32 arithmetic wraps by design
        return _blocks(ks, x0, x1)


def _blocks(ks, x0, x1):
    x0 += ks[0]
    x1 += ks[1]
    for j in range(1, 6):
        for r in _ROT[(j - 1) % 2]:
            x0 += x1
            x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
            x1 ^= x0
        x0 += ks[j % 3]
        x1 += ks[(j + 1) % 3]
        x1 += np.uint32(j)
    return x0, x1


def key(seed: int) -> np.ndarray:
    """uint32[2] key of an integer seed, as ``jax.random.PRNGKey`` (32-bit mode)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"key: seed must be an integer, got {seed!r}")
    return np.array([0, int(seed) & _M32], np.uint32)


def check_key(k) -> np.ndarray:
    k = np.asarray(k)
    if k.shape != (2,) or k.dtype != np.uint32:
        raise ValueError(f"expected a uint32[2] key, got {k.dtype}{list(k.shape)}")
    return k


def fold_in(k, data) -> np.ndarray:
    """New key from a key and a uint32 datum, as ``jax.random.fold_in``."""
    k = check_key(k)
    d = np.asarray(data)
    if d.shape != () or not (np.issubdtype(d.dtype, np.integer)):
        raise ValueError(f"fold_in: data must be an integer scalar, got {data!r}")
    v = int(d)
    if not 0 <= v <= _M32:
        raise ValueError(f"fold_in: data must be in [0, 2**32), got {v}")
    y0, y1 = _fold_in_words(np.uint32(k[0]), np.uint32(k[1]), np.uint32(v))
    return np.array([y0, y1], np.uint32)


_U = np.uint32


@numba.njit(cache=True, nogil=True, inline="always")
def _rotl(v, r):
    return _U((v << _U(r)) | (v >> _U(32 - r)))


@numba.njit(cache=True, nogil=True, inline="always")
def key_schedule(k0, k1):
    """(a, b, c) = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA) as uint32: the key words
    :func:`threefry_hash` takes."""
    a = _U(k0)
    b = _U(k1)
    return a, b, _U(a ^ b ^ _U(_PARITY))


@numba.njit(cache=True, nogil=True, inline="always")
def threefry_hash(a, b, c, ctr):
    """y0 ^ y1 of threefry((a, b), (0, counter)) given ctr = counter + b
    (the first key injection) and c = a ^ b ^ 0x1BD11BDA."""
    x0, x1 = threefry_pair(a, b, c, ctr)
    return x0 ^ x1


@numba.njit(cache=True, nogil=True, inline="always")
def threefry_pair(a, b, c, ctr):
    """(y0, y1) = threefry((a, b), (0, counter)), both output words; ctr and c as
    :func:`threefry_hash`'s."""
    x0 = a
    x1 = ctr
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 13) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 15) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 26) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 6) ^ x0)
    x0 = _U(x0 + b); x1 = _U(x1 + _U(c + _U(1)))
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 17) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 29) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 16) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 24) ^ x0)
    x0 = _U(x0 + c); x1 = _U(x1 + _U(a + _U(2)))
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 13) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 15) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 26) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 6) ^ x0)
    x0 = _U(x0 + a); x1 = _U(x1 + _U(b + _U(3)))
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 17) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 29) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 16) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 24) ^ x0)
    x0 = _U(x0 + b); x1 = _U(x1 + _U(c + _U(4)))
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 13) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 15) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 26) ^ x0)
    x0 = _U(x0 + x1); x1 = _U(_rotl(x1, 6) ^ x0)
    x0 = _U(x0 + c); x1 = _U(x1 + _U(a + _U(5)))
    return x0, x1


@numba.njit(cache=True, nogil=True)
def _fold_in_words(k0, k1, d):
    """threefry((k0, k1), (0, d)), both words: the compiled block function, not the NumPy
    reference's 20 rounds of scalar ufunc calls (60 us a call, three per round trip of every
    compressor: about 180 of the ~300 us a NumPy codec call cost on any tensor)."""
    a, b, c = key_schedule(k0, k1)
    return threefry_pair(a, b, c, _U(_U(d) + b))


@numba.njit(cache=True, nogil=True)
def fill_words(a, b, c, m0, m1, hw):
    """Words [2·(m0 // 2), 2·ceil(m1 / 2)) of :func:`random_words`' stream into hw
    (word m at hw[m - 2·(m0 // 2)]): word 2j is y0 and 2j + 1 is y1 of the block of counter j.
    ``c`` as :func:`threefry_hash`'s; the key words a, b."""
    j0 = m0 >> 1
    _fill_blocks(a, b, c, _U(_U(j0) + b), ((m1 + 1) >> 1) - j0, hw)


@numba.njit(cache=True, nogil=True, inline="always")
def _fill_blocks(a, b, c, base, n, hs):
    """hs[2j], hs[2j + 1] = y0, y1 of the block of counter j + base - b, for j < n.

    Two streams per iteration (blocks j and j + n // 2): a block's 20 rounds are one chain of
    dependent adds, rotates and xors, and the vector loop over single blocks waits on it; two
    independent chains fill the pipeline. Ad hoc, one process, the two forms alternated, best of
    15, on 25M float32 (bit-identical outputs): the draws alone (12.5M blocks, 2 cores) 6.7 ->
    6.1 ms; natural_pack 11.1 -> 10.7 ms, 4-bit minmax_quantize_pack 8.7 -> 8.4, 8-bit 8.4 -> 8.2
    (every one of 9 comparisons in three noisy runs favoured two streams, by 2-21 %)."""
    q = n >> 1
    for j in range(q):
        y0, y1 = threefry_pair(a, b, c, _U(_U(j) + base))
        hs[2 * j] = y0
        hs[2 * j + 1] = y1
        z0, z1 = threefry_pair(a, b, c, _U(_U(j + q) + base))
        hs[2 * (j + q)] = z0
        hs[2 * (j + q) + 1] = z1
    for j in range(2 * q, n):
        y0, y1 = threefry_pair(a, b, c, _U(_U(j) + base))
        hs[2 * j] = y0
        hs[2 * j + 1] = y1


@numba.njit(cache=True, nogil=True)
def _bits_kernel(k0, k1, start, out):
    """out[i] = y0 ^ y1 of threefry((k0, k1), (0, start + i)), start + out.size <= 2**32.

    Every step is cast back to uint32 so LLVM vectorizes 16 lanes wide."""
    a, b, c = key_schedule(k0, k1)
    base = _U(_U(start) + b)
    for i in range(out.size):
        out[i] = threefry_hash(a, b, c, _U(_U(i) + base))


@numba.njit(cache=True, nogil=True)
def _uniform_kernel(k0, k1, start, out):
    """out[i] = bitcast((bits >> 9) | 0x3F800000) - 1 for the same bits."""
    a, b, c = key_schedule(k0, k1)
    base = _U(_U(start) + b)
    for i in range(out.size):
        h = threefry_hash(a, b, c, _U(_U(i) + base))
        out[i] = bits_f32((h >> _U(9)) | _U(0x3F800000)) - np.float32(1.0)


@numba.njit(cache=True, nogil=True)
def _words_kernel(k0, k1, start, out):
    """out[t] = word start + t of :func:`random_words`' stream (start even)."""
    a, b, c = key_schedule(k0, k1)
    fill_words(a, b, c, start, start + out.size, out)


@numba.njit(cache=True, parallel=True)
def _words_parallel(k0, k1, out, chunk):
    nchunks = (out.size + chunk - 1) // chunk
    for j in numba.prange(nchunks):
        lo = j * chunk
        hi = min(out.size, lo + chunk)
        _words_kernel(k0, k1, lo, out[lo:hi])


@numba.njit(cache=True, parallel=True)
def _bits_parallel(k0, k1, out, chunk):
    nchunks = (out.size + chunk - 1) // chunk
    for j in numba.prange(nchunks):
        lo = j * chunk
        hi = min(out.size, lo + chunk)
        _bits_kernel(k0, k1, lo, out[lo:hi])


@numba.njit(cache=True, parallel=True)
def _uniform_parallel(k0, k1, out, chunk):
    nchunks = (out.size + chunk - 1) // chunk
    for j in numba.prange(nchunks):
        lo = j * chunk
        hi = min(out.size, lo + chunk)
        _uniform_kernel(k0, k1, lo, out[lo:hi])


@numba.njit(cache=True, parallel=True)
def _draw_only(k0, k1, blocks, chunk):
    """Xor of both words of ``blocks`` threefry blocks, all cores, nothing stored: the
    arithmetic of the draws alone (:func:`draw_seconds`)."""
    a, b, c = key_schedule(k0, k1)
    nchunks = (blocks + chunk - 1) // chunk
    acc = np.zeros(nchunks, np.uint32)
    for j in numba.prange(nchunks):
        lo = j * chunk
        base = _U(_U(lo) + b)
        h = _U(0)
        for i in range(min(blocks, lo + chunk) - lo):
            y0, y1 = threefry_pair(a, b, c, _U(_U(i) + base))
            h ^= y0 ^ y1
        acc[j] = h
    return acc


def draw_blocks(blocks: int) -> np.ndarray:
    """Compute ``blocks`` threefry blocks on all cores, storing only one xor per 65536 blocks
    (what :func:`draw_seconds` times; key (0, 1))."""
    return _draw_only(np.uint32(0), np.uint32(1), max(int(blocks), 0), 1 << 16)


def draw_seconds(blocks: int, repeat: int = 5) -> float:
    """Least seconds of computing ``blocks`` threefry blocks on all cores without storing them: the
    floor the bit-exact JAX stream puts under a kernel that draws that many (benchmarks)."""
    import time
    blocks = int(blocks)
    if blocks <= 0:
        return 0.0
    _draw_only(np.uint32(0), np.uint32(1), 1024, 1 << 14)   # compile
    best = math.inf
    for _ in range(max(int(repeat), 1)):
        t = time.perf_counter()
        draw_blocks(blocks)
        best = min(best, time.perf_counter() - t)
    return best


_PARALLEL_MIN = 1 << 18


def _fill(k, shape, dtype, kernel, parallel, what: str, pad: int = 0) -> np.ndarray:
    """Run a counter-mode kernel over ``prod(shape)`` counters (threads above _PARALLEL_MIN);
    ``pad``: room for that many entries more (a kernel that writes whole pairs)."""
    k = check_key(k)
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if n > 1 << 32:
        raise ValueError(f"{what}: {n} elements exceed 2**32")
    out = np.empty(n + pad, dtype)
    if n >= _PARALLEL_MIN:
        parallel(np.uint32(k[0]), np.uint32(k[1]), out, 1 << 16)
    elif n:
        kernel(np.uint32(k[0]), np.uint32(k[1]), 0, out)
    return out[:n].reshape(shape)


def random_bits(k, shape) -> np.ndarray:
    """uint32 bits of ``shape``, identical to ``jax.random.bits(key, shape)``."""
    return _fill(k, shape, np.uint32, _bits_kernel, _bits_parallel, "random_bits")


def random_words(k, shape) -> np.ndarray:
    """uint32 of ``shape``, both output words of each threefry block (``Ops.random_words``):
    flat word 2j is y0 and 2j + 1 is y1 of ``threefry(key, (0, j))``, the blocks of
    :func:`random_bits` (whose word j is their xor)."""
    n = math.prod(int(s) for s in shape)
    return _fill(k, shape, np.uint32, _words_kernel, _words_parallel, "random_words", pad=n & 1)


def uniform(k, shape) -> np.ndarray:
    """float32 in [0, 1) from :func:`random_bits` (``Ops.uniform``), fused."""
    return _fill(k, shape, np.float32, _uniform_kernel, _uniform_parallel, "uniform")


def random_bits_reference(k, shape) -> np.ndarray:
    """The same bits from the NumPy block function (slow; for tests)."""
    k = check_key(k)
    shape = tuple(int(s) for s in shape)
    i = np.arange(math.prod(shape), dtype=np.uint64)
    y0, y1 = threefry2x32(k[0], k[1], (i >> np.uint64(32)).astype(np.uint32),
                          (i & np.uint64(_M32)).astype(np.uint32))
    return (y0 ^ y1).reshape(shape)


def random_words_reference(k, shape) -> np.ndarray:
    """The same words from the NumPy block function (slow; for tests)."""
    k = check_key(k)
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    j = np.arange(-(-n // 2), dtype=np.uint32)
    y0, y1 = threefry2x32(k[0], k[1], np.zeros_like(j), j)
    return np.stack([y0, y1], axis=1).reshape(-1)[:n].reshape(shape)
