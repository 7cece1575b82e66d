"""Fitting the mccl echo-ring model and codec costs (no testbed needed)."""
import numpy as np
import pytest

from kfsim.sim import collectives
from kfsim.testbed.fit import (Sample, design, echo_factor, fit_collectives, fit_linear_cost, nnls_relative)


def _samples(alpha, beta, gamma, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for p in (2, 3, 4):
        for n in (16384, 262144, 1048576, 4194304):
            ar = float(collectives.mccl_allreduce(p, n, alpha, beta, gamma))
            ag = float(collectives.mccl_allgather(p, n, alpha, beta))
            out.append(Sample("allreduce", p, n, ar * (1 + noise * rng.standard_normal())))
            out.append(Sample("allgather", p, n, ag * (1 + noise * rng.standard_normal())))
    return out


def test_design_matches_simulator_closed_forms():
    theta = np.array([3e-4, 2e-8, 1e-9])
    for p in (2, 4, 7):
        for n in (100.0, 1e6):
            assert design("allreduce", p, n) @ theta == pytest.approx(
                float(collectives.mccl_allreduce(p, n, *theta)), rel=1e-12)
            assert design("allgather", p, n) @ theta == pytest.approx(
                float(collectives.mccl_allgather(p, n, theta[0], theta[1])), rel=1e-12)


def test_fit_recovers_exact_parameters():
    f = fit_collectives(_samples(5e-4, 1.6e-7, 2e-9))
    assert f.alpha == pytest.approx(5e-4, rel=1e-6)
    assert f.beta == pytest.approx(1.6e-7, rel=1e-6)
    assert f.gamma == pytest.approx(2e-9, rel=1e-4)
    assert f.max_abs_error < 1e-6
    assert f.efficiency_at(1 / 1.6e-7) == pytest.approx(1.0)


def test_fit_with_noise_is_close_and_nonnegative():
    f = fit_collectives(_samples(5e-4, 1.6e-7, 0.0, noise=0.03))
    assert f.alpha >= 0 and f.beta >= 0 and f.gamma >= 0
    assert f.beta == pytest.approx(1.6e-7, rel=0.05)
    assert f.median_abs_error < 0.05


def test_nnls_keeps_coefficients_nonnegative():
    X = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    t = np.array([3.0, 2.0, 1.0])          # unconstrained slope would be negative
    theta = nnls_relative(X, t)
    assert (theta >= 0).all()
    assert theta[1] == 0.0


def test_bad_input_raises():
    with pytest.raises(ValueError):
        fit_collectives([])
    with pytest.raises(ValueError):
        design("broadcast", 2, 10)
    with pytest.raises(ValueError):
        nnls_relative(np.ones((2, 2)), np.array([1.0, 0.0]))
    with pytest.raises(ValueError):
        echo_factor(10, "allreduce", 1, 10)


def test_linear_codec_fit():
    n = np.array([1e5, 1e6, 1e7, 4e7])
    t = 0.002 + n / 2e9
    f = fit_linear_cost(n, t)
    assert f.fixed_s == pytest.approx(0.002, rel=1e-6)
    assert f.bytes_per_s == pytest.approx(2e9, rel=1e-6)


def test_echo_factor_textbook_and_echo():
    assert echo_factor(2 * 3 / 4 * 1000, "allreduce", 4, 1000) == pytest.approx(1.0)
    assert echo_factor(2 * 3 * 1000, "allgather", 4, 1000) == pytest.approx(2.0)


def test_weightings():
    X = np.array([[1.0, 1.0], [1.0, 10.0], [1.0, 100.0]])
    t = np.array([2.0, 12.0, 95.0])
    rel = nnls_relative(X, t, "relative")
    ab = nnls_relative(X, t, "absolute")
    # absolute weighting fits the largest time better, relative the smallest
    assert abs(X[2] @ ab - 95) < abs(X[2] @ rel - 95)
    assert abs(X[0] @ rel - 2) < abs(X[0] @ ab - 2)
    with pytest.raises(ValueError):
        nnls_relative(X, t, "cubic")
