"""JAX binding of the ops namespace (the default backend): ``backends.jax.ops.OPS``.

Importing it keeps large freed XLA:CPU buffers mapped for reuse
(:func:`backends.jax.memory.keep_freed_memory`; ``KFSIM_KEEP_FREED_MEMORY=0``
turns that off).
"""
from backends.jax.memory import keep_freed_memory

keep_freed_memory()
