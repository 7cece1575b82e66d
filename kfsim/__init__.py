"""kfsim: simulate, train and deploy gradient compression for data-parallel training."""
__version__ = "0.1.0"

import backends.jax  # noqa: E402,F401  (XLA's copy-insertion flag, before any JAX computation: backends/jax/__init__.py)
