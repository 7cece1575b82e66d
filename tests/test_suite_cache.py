"""The session's JAX compilation cache (tests/conftest.py): every worker and subprocess shares it.

Other workers write to the folder while this runs, so the checks look only at the entries of
one program of this test's own, a function with a name no other test uses."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

PROBE = '''
import jax, jax.numpy as jnp
def {name}(x):
    return jnp.sin(x) * {salt} + 1.0
out = jax.jit({name})(jnp.arange(7.0))
print(jax.config.jax_compilation_cache_dir)
'''


def probe_entries(d: Path, name: str) -> list[str]:
    return sorted(p.name for p in d.rglob(f"jit_{name}-*") if p.is_file())


def test_programs_compiled_in_this_session_land_in_one_shared_cache():
    d = Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    assert d.is_dir() and jax.config.jax_compilation_cache_dir == str(d)
    salt = int(np.random.default_rng().integers(1, 2**30))
    name = f"kfsim_cache_probe_{salt}"  # a program no other test compiles
    code = PROBE.format(name=name, salt=float(salt))
    assert probe_entries(d, name) == []
    scope: dict = {"print": lambda *a: None}
    exec(code, scope)
    assert scope["out"].shape == (7,)
    first = probe_entries(d, name)
    assert len(first) == 1, first  # compiled here, written to the shared folder
    # a subprocess inherits the folder and finds the program there: it writes no second entry
    sub = subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True, text=True)
    assert sub.stdout.strip().splitlines()[-1] == str(d)
    assert probe_entries(d, name) == first
    assert jnp.allclose(scope["out"], jnp.sin(jnp.arange(7.0)) * salt + 1.0)
