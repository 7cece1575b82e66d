"""NumPy binding of the ops namespace with its Numba kernels.

``ops`` binds the namespace (``backends.numpy.ops.OPS``); ``kernels`` and
``fused`` hold the one-pass parallel Numba kernels, ``threefry`` the
counter-based generator, ``buffers`` the pool of large output arrays.
"""
