"""Lowering rules of the fused ops (``compressors.fused.Fused``).

The tracer records every fused op of :data:`backends.mindspore.trace.LOWERED_FUSED`
as one equation; its rule here decides, per graph, how it runs:

* **on CPU, a host kernel**: the NumPy backend's one-pass kernel (the same
  bits as the op's composition, ``tests/backends/test_fused.py``) as one
  ``ops.Custom(pyfunc)`` node. MindSpore's CPU kernels make one pass over
  memory per primitive op, several of them slow (a NaN-aware maximum, a
  gather, 16-bit uniforms: 3-6x a plain add), so the composition of
  ``quantize_pack`` alone is ~20 full passes; the host kernel reads its input
  once, on all cores. The random bits the kernel draws are threefry from the
  op's key, in both RNG modes: faster than MindSpore's generators, and the
  exact JAX bits.
* **for another device** (no host kernel can run there), or on a dtype the
  kernels leave to the composition (float16, bfloat16), the op is
  **expanded**: its defining composition is traced into the program and each
  primitive lowered by its own rule (``top_k_abs`` has a rule of its own,
  ``rules_select.top_k_abs``, which it keeps).
"""
from __future__ import annotations

import numpy as np

# fused ops that take float32 shadows of bfloat16 operands as a primitive does (a selection is
# exact on the upcast values); every other one is expanded in bfloat16, where each op rounds
SHADOWED = frozenset({"top_k_abs"})
HOST_FLOATS = ("float32", "float64")  # dtypes the NumPy kernels take (others fall back to compositions)


def numpy_kernel_prim(op: str, arg_names: tuple, static: tuple, outs: tuple, arg_shapes: tuple):
    """The NumPy backend's ``op`` as a pyfunc kernel: array arguments ``arg_names`` (in
    order; each reshaped to its shape in ``arg_shapes`` — a view), static keywords
    ``static`` ((name, value) pairs), outputs ``outs`` ((shape, dtype) pairs; one output
    unless several)."""
    from backends.mindspore.runtime import custom, ms_dtype
    from backends.numpy.ops import OPS

    kernel, kwargs = getattr(OPS, op), dict(static)
    # a 0-d output among several is declared (1,) (as a pyfunc returns a lone 0-d one):
    # MindSpore would hand it back as a Python scalar, which ops.reshape refuses
    shapes = tuple(tuple(int(s) for s in shape) or ((1,) if len(outs) > 1 else ()) for shape, _ in outs)
    dtypes = tuple(np.dtype(d) for _, d in outs)
    views = tuple(tuple(int(s) for s in shape) for shape in arg_shapes)

    def call(*arrays):
        # (a 0-d tensor arrives as a Python number: left as it is)
        arrays = [a if getattr(a, "shape", v) == v else a.reshape(v) for a, v in zip(arrays, views)]
        res = kernel(**dict(zip(arg_names, arrays)), **kwargs)
        res = (res,) if len(outs) == 1 else tuple(res)
        got = tuple(np.ascontiguousarray(np.asarray(r, d).reshape(s)) for r, d, s in zip(res, dtypes, shapes))
        return got[0] if len(outs) == 1 else got

    fn = _ARITY[len(arg_names)](call)  # MindSpore counts a pyfunc's inputs from its signature

    if len(outs) == 1:
        return custom(fn, lambda *a: shapes[0], lambda *a: ms_dtype(dtypes[0]))
    return custom(fn, lambda *a: shapes, lambda *a: tuple(ms_dtype(d) for d in dtypes))


def host_call(em, op: str, arg_names, args, static, outs, hint: str) -> str:
    """Source calling the NumPy backend's ``op`` as one host kernel on the traced ``args``
    (named ``arg_names``; static keywords ``static``) giving the Vars ``outs``. Reshapes
    around it are folded into it (free on its NumPy views; MindSpore's CPU Reshape copies)."""
    srcs = [em.unreshaped(a) for a in args]
    prim = em.host(numpy_kernel_prim, op, tuple(arg_names), tuple(static),
                   tuple((em.reshaped_as(o), o.dtype) for o in outs), tuple(a.shape for a in args), op=op, hint=hint)
    return f"{prim}({', '.join(em.ref(a) for a in srcs)})"


_ARITY = {
    1: lambda f: lambda a: f(a),
    2: lambda f: lambda a, b: f(a, b),
    3: lambda f: lambda a, b, c: f(a, b, c),
    4: lambda f: lambda a, b, c, d: f(a, b, c, d),
    5: lambda f: lambda a, b, c, d, e: f(a, b, c, d, e),
}


def runs_on_host(em, eqn) -> bool:
    """Whether ``eqn`` (a recorded fused op) runs as a host kernel in ``em``'s graph."""
    from compressors.traced import vars_of
    if em.native:
        return False
    floats = [v.dtype.name for v in list(vars_of(eqn.args)) + list(eqn.outs) if v.dtype.kind == "f"]
    return all(d in HOST_FLOATS for d in floats)


def fused(own_rule=None):
    """The rule of one fused op: host kernel on CPU, else ``own_rule`` (when given) or the
    op's composition."""
    def rule(em, eqn):
        if runs_on_host(em, eqn):
            static = tuple((k, v) for k, v in eqn.attrs.items() if k != "arg_names")
            call = host_call(em, eqn.op, eqn.attrs["arg_names"], eqn.args, static, eqn.outs, "fused")
            res = call if len(eqn.outs) == 1 else em.tmp(call)
            for i, o in enumerate(eqn.outs):
                got = res if len(eqn.outs) == 1 else f"{res}[{i}]"
                # (a pyfunc's 0-d output comes back with shape (1,))
                em.assign(o, f"ops.reshape({got}, ())" if o.shape == () else got)
        elif own_rule is not None:
            own_rule(em, eqn)
        else:
            em.expand(eqn)
    return rule
