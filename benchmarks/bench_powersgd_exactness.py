"""PowerSGD's accuracy where the old orthogonalisation failed, side by side.

``before``: one Gram-Schmidt pass with ``col / (||col|| + 1e-8)`` (the
orthogonalisation kfsim had, and PyTorch's at rank <= 2); ``after``:
``compressors.powersgd.orthogonalize`` (twice, relative, dependent columns
zeroed). One step of P = M Q, P_hat, Q = M^T P_hat, M_hat = P_hat Q^T on a
float32 gradient, NumPy and JAX bindings; prints the relative error
||M_hat - M|| / ||M|| (rank >= the gradient's rank: 0 is right), the
NumPy-vs-JAX difference, and the error at several gradient scales.

    .venv/bin/python benchmarks/bench_powersgd_exactness.py
"""
from __future__ import annotations

import numpy as np

import backends
from compressors.powersgd import orthogonalize, tolerance

TOL = tolerance(0.0, np.float32)


def before(ops, p):
    rows = ops.transpose(p)
    qs = []
    for i in range(rows.shape[0]):
        v = rows[i]
        for q in qs:
            v = v - q * ops.sum(v * q)
        qs.append(v / (ops.sqrt(ops.sum(v * v)) + 1e-8))
    return ops.transpose(ops.stack(qs))


def after(ops, p):
    return orthogonalize(ops, p, TOL)[0]


def approx(ops, orth, m, q):
    mat = ops.asarray(m)
    p_hat = orth(ops, ops.matmul(mat, ops.asarray(q)))
    return np.asarray(ops.matmul_nt(p_hat, ops.matmul(ops.transpose(mat), p_hat)), np.float64)


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main():
    rng = np.random.default_rng(0)
    nps, jxs = backends.get("numpy"), backends.get("jax")
    print(f"{'case':34s} {'before':>10s} {'after':>10s}")
    for n, m, true_rank, rank in [(256, 192, 2, 4), (512, 1024, 1, 8), (128, 96, 3, 16)]:
        mat = (rng.standard_normal((n, true_rank)) @ rng.standard_normal((true_rank, m))).astype(np.float32)
        q = rng.uniform(-1, 1, (m, rank)).astype(np.float32)
        for label, ops in (("numpy", nps), ("jax", jxs)):
            b, a = (rel(approx(ops, f, mat, q), mat) for f in (before, after))
            print(f"{n}x{m} rank {true_rank}, r={rank} {label:6s}    {b:10.2e} {a:10.2e}")
        b, a = (rel(approx(nps, f, mat, q), approx(jxs, f, mat, q)) for f in (before, after))
        print(f"{n}x{m} rank {true_rank}, r={rank} numpy-jax {b:10.2e} {a:10.2e}")
    mat = rng.standard_normal((128, 96)).astype(np.float32)  # full rank: rank-4 error is the same at any scale
    q = rng.uniform(-1, 1, (96, 4)).astype(np.float32)
    ref_b, ref_a = (approx(nps, f, mat, q) for f in (before, after))
    for scale in (1.0, 1e-8, 1e-10, 1e-12):
        b, a = (rel(approx(nps, f, mat * np.float32(scale), q) / scale, r) for f, r in ((before, ref_b), (after, ref_a)))
        print(f"full rank x {scale:.0e}: change vs x1       {b:10.2e} {a:10.2e}")


if __name__ == "__main__":
    main()
