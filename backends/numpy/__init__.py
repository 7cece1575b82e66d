"""NumPy binding of the ops namespace with its Numba kernels.

``ops`` binds the namespace (``backends.numpy.ops.OPS``), ``fused_ops`` its
fused ops. Kernels, a module a concept: ``topk``, ``sums``, ``casts``,
``elementwise``, ``indexing``, ``packing`` for the primitive ops;
``fused_minmax``, ``fused_quant``, ``fused_sign``, ``fused_topk``,
``fused_add``, ``fused_lowrank`` for the fused ones (their blocking in
``blocks``); ``threefry`` the counter-based generator, ``intrinsics`` the
LLVM bit casts, ``buffers`` the pool of large output arrays, ``arrays`` the
shared dtype conventions.
"""

import numba

# Start Numba's thread pool now. A cached kernel that calls a ``parallel=True``
# one does not start it when it is loaded from the on-disk cache, and its first
# call in a process then crashes (numba issues #8578 and #9938): e.g.
# ``sign_split_sums`` as the first kernel a fresh process runs.
numba.get_num_threads()
