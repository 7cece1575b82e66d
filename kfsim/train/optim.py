"""SGD with optional heavy-ball momentum (Polyak 1964; PyTorch's form).

    v_{t+1} = mu * v_t + g_t          (v_0 = 0; mu = 0 gives plain SGD)
    w_{t+1} = w_t - lr * v_{t+1}

``weight`` scales the step (async updates apply one worker's share, 1/N).
"""
from __future__ import annotations

import numpy as np


def init(params: dict) -> dict:
    """Momentum buffers (zeros like params)."""
    return {k: np.zeros_like(np.asarray(v)) for k, v in params.items()}


def update(params, opt, grad, lr: float, momentum: float, weight=None):
    """(new params, new momentum buffers); JAX-traceable."""
    import jax.numpy as jnp

    new_p, new_v = {}, {}
    for k in params:
        g = grad[k] if weight is None else grad[k] * weight
        v = momentum * opt[k] + g if momentum else g
        new_v[k] = v if momentum else opt[k]
        new_p[k] = params[k] - jnp.asarray(lr, params[k].dtype) * v
    return new_p, new_v


def check(lr: float, momentum: float) -> None:
    if not (isinstance(lr, (int, float)) and lr > 0 and np.isfinite(lr)):
        raise ValueError(f"learning rate must be a positive finite number, got {lr!r}")
    if not (isinstance(momentum, (int, float)) and 0 <= momentum < 1):
        raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
