"""The NumPy binding's float32 <-> float16 casts (``backends.numpy.casts``, the CPU's conversion
through LLVM ``fptrunc``/``fpext`` with NaNs fixed up) against NumPy's own software conversion:
every one of the 65536 half (and bfloat16) inputs, and float32 inputs over the whole bit range plus a dense
window at every exponent where half rounding, underflow or overflow changes; one thread and
all cores."""
import numpy as np
import pytest

from backends.numpy import casts

F32_NAN_QUIET = np.uint16(0x7E00)


def want_f16(bits32: np.ndarray) -> np.ndarray:
    """binary16 bits NumPy rounds float32 ``bits32`` to; a NaN: 0x7E00 with its sign."""
    x = bits32.view(np.float32)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).view(np.uint16)
    nan = np.isnan(x)
    return np.where(nan, ((bits32 >> 16) & 0x8000).astype(np.uint16) | F32_NAN_QUIET, h)


def want_f32(bits16: np.ndarray) -> np.ndarray:
    """float32 bits of binary16 ``bits16``; a NaN keeps its payload and quiet bit exactly."""
    b = bits16.astype(np.uint32)
    f = bits16.view(np.float16).astype(np.float32).view(np.uint32)
    nan = ((b & 0x7C00) == 0x7C00) & ((b & 0x3FF) != 0)
    return np.where(nan, ((b & 0x8000) << 16) | 0x7F800000 | ((b & 0x3FF) << 13), f)


def f32_inputs() -> np.ndarray:
    stride = np.arange(0, 1 << 32, 1021, dtype=np.uint64)      # every exponent, mixed mantissas
    windows = [np.arange((e << 23) - 4096, (e << 23) + 4096, dtype=np.uint64) for e in range(100, 145)]
    ties = np.array([(e << 23) | m for e in range(100, 145) for m in (0x1000, 0x3000, 0xFFF, 0x2FFF, 0x7FF000)],
                    np.uint64)
    b = np.concatenate([stride] + windows + [ties]).astype(np.uint32)
    return np.concatenate([b, b | np.uint32(0x80000000)])


@pytest.mark.parametrize("threaded", [False, True])
def test_f32_to_f16_is_ieee_round_to_nearest_even(threaded):
    b = f32_inputs()
    out = np.empty(b.size, np.uint16)
    (casts._f32_to_f16_all if threaded else casts.f32_to_f16)(b.view(np.float32), out)
    want = want_f16(b)
    bad = np.flatnonzero(out != want)
    assert bad.size == 0, f"{bad.size} differ, e.g. {b[bad[:3]]} -> {out[bad[:3]]}, want {want[bad[:3]]}"


@pytest.mark.parametrize("threaded", [False, True])
def test_f16_to_f32_is_exact_for_every_half(threaded):
    h = np.tile(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16), 3)   # 3x: past PARALLEL_MIN
    out = np.empty(h.size, np.float32)
    (casts._f16_to_f32_all if threaded else casts.f16_to_f32)(h, out)
    want = want_f32(h)
    bad = np.flatnonzero(out.view(np.uint32) != want)
    assert bad.size == 0, f"{bad.size} differ, e.g. {h[bad[:3]]} -> {out.view(np.uint32)[bad[:3]]}"


def test_signalling_nan_payloads_survive_the_round_trip():
    h = np.array([0x7C01, 0xFC01, 0x7D55, 0x7E00, 0x7FFF], np.uint16)
    wide = np.empty(h.size, np.float32)
    casts.f16_to_f32(h, wide)
    assert list(wide.view(np.uint32)) == [0x7F802000, 0xFF802000, 0x7FAAA000, 0x7FC00000, 0x7FFFE000]


@pytest.mark.parametrize("threaded", [False, True])
def test_f32_to_bf16_is_round_to_nearest_even(threaded):
    """ml_dtypes' bfloat16 rounding; a NaN keeps its top bits, made quiet."""
    from backends.numpy.arrays import BF16
    b = f32_inputs()
    out = np.empty(b.size, np.uint16)
    (casts._f32_to_bf16_all if threaded else casts.f32_to_bf16)(b.view(np.float32), out)
    x = b.view(np.float32)
    want = np.where(np.isnan(x), ((b >> 16) | 0x40).astype(np.uint16), x.astype(BF16).view(np.uint16))
    bad = np.flatnonzero(out != want)
    assert bad.size == 0, f"{bad.size} differ, e.g. {b[bad[:3]]} -> {out[bad[:3]]}, want {want[bad[:3]]}"
    wide = np.empty(1 << 16, np.float32)
    h = np.arange(1 << 16, dtype=np.uint32)
    casts.bf16_to_f32(h.astype(np.uint16), wide)
    assert np.array_equal(wide.view(np.uint32), h << 16)
