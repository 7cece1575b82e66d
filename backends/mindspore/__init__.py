"""MindSpore: the eager binding of the ops namespace and the lowering to graph mode.

``ops`` binds the namespace eagerly; ``trace`` records a compressor's op
program; ``rules`` maps every op to MindSpore source (the rules themselves
in ``rules_*``, a module per op family); ``lower`` emits and compiles
Cells; ``reducer`` is the data-parallel gradient reducer built from them;
``runtime`` holds the host kernels and the NumPy-compatibility setup;
``data_parallel`` is the public entry point for a user's own script
(``from backends.mindspore import kfsim_reducer``), ``optimizer`` the same
as an optimizer wrapper (``DistributedOptimizer(opt, compression=spec)``).
"""

PUBLIC = {"kfsim_reducer": "data_parallel", "numpy_compat": "data_parallel",
          "DistributedOptimizer": "optimizer"}


def __getattr__(name):
    """``from backends.mindspore import kfsim_reducer``: the public API, loaded (with MindSpore) on use."""
    if name in PUBLIC:
        import importlib
        return getattr(importlib.import_module(f"backends.mindspore.{PUBLIC[name]}"), name)
    raise AttributeError(f"module 'backends.mindspore' has no attribute {name!r}")
