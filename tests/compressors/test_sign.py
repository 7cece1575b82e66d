"""signSGD's one-worker vote (a shortcut: sign(+-w) = +-sign(w)) equals the
general vote sign(sum of decoded signs): a second worker with an all-zero
gradient abstains (weight 0), so its exchange must give the same bits."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import compressors as C
from tests.backends.ops_backends import OPS_BACKENDS, assert_same_bits, get_ops, maybe_x64, to_numpy


@pytest.mark.parametrize("backend", OPS_BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("case", ["normal", "zeros", "nan"])
def test_single_worker_vote_equals_general_vote(backend, dtype, case):
    ops = get_ops(backend)
    x = np.random.default_rng(0).standard_normal((37, 5))
    x[0, :3] = 0.0
    if case == "zeros":
        x[:] = 0.0
    if case == "nan":
        x[3, 3] = np.nan
    x = x.astype(dtype)
    comp = C.parse("signsgd()")
    with maybe_x64(dtype):
        g, z = ops.asarray(x), ops.asarray(np.zeros_like(x))
        keys = [C.make_keys(ops, 0, 0, r) for r in range(2)]
        one, _ = C.roundtrip(ops, comp, g, comp.init(ops, g), keys[0])
        two, _, _ = C.exchange(ops, comp, [g, z], [comp.init(ops, g), comp.init(ops, z)], keys)
    assert_same_bits(one, two, f"signsgd vote, {case}")
    got = to_numpy(one).astype(np.float64)
    if case == "nan":
        assert np.isnan(got).all()
    elif case == "zeros":
        assert (got == 0).all()
    else:
        np.testing.assert_array_equal(got, np.where(x.astype(np.float64) < 0, -1.0, 1.0))
