"""MindSpore: the eager binding of the ops namespace and the lowering to graph mode.

``ops`` binds the namespace eagerly; ``trace`` records a compressor's op
program; ``rules`` maps every op to MindSpore source (the rules themselves
in ``rules_*``, a module per op family); ``lower`` emits and compiles
Cells; ``reducer`` is the data-parallel gradient reducer built from them;
``runtime`` holds the host kernels and the NumPy-compatibility setup.
"""
