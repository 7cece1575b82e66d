"""JAX binding of the ops namespace (the default backend): ``backends.jax.ops.OPS``."""
