"""The session's JAX compilation cache (tests/conftest.py): every worker and subprocess shares it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def entries(d: Path) -> set[str]:
    return {p.name for p in d.rglob("*") if p.is_file()}


def test_programs_compiled_in_this_session_land_in_one_shared_cache():
    d = Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    assert d.is_dir() and jax.config.jax_compilation_cache_dir == str(d)
    before = entries(d)
    salt = float(np.random.default_rng().integers(1, 2**30))  # a program no earlier test compiled
    out = jax.jit(lambda x: jnp.sin(x) * salt + 1.0)(jnp.arange(7.0))
    assert out.shape == (7,) and len(entries(d) - before) >= 1
    # a subprocess inherits the folder and finds the program there: it adds no entry
    code = (f"import jax, jax.numpy as jnp; jax.jit(lambda x: jnp.sin(x) * {salt!r} + 1.0)(jnp.arange(7.0))"
            ".block_until_ready()")
    after = entries(d)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert entries(d) == after
