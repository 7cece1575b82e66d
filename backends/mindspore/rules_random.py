"""Lowering rules of the randomness ops: ``fold_in``, ``random_bits``,
``random_words``, ``uniform``. RNG mode ``exact`` runs threefry (the JAX bits): the host kernels on CPU,
``backends.mindspore.native``'s uint32 ops in a graph for another device;
``fast`` asks for the fastest generator of the graph's device: in a graph for
GPU/Ascend MindSpore's own generators, seeded per run, site and worker; on CPU the
exact host kernels, which are faster there than MindSpore's ``UniformInt`` (randomk
on 10.7M: 146 vs 335 ms per step, ``benchmarks/bench_ms_builtins.py``), so a CPU
graph is the same in both modes. Draws from the ``fixed`` key (origin
``("fixed",)``) must repeat at every step (sketch hashes) and always take the
exact kernels.
"""
from __future__ import annotations


def fold_in(em, eqn):
    from backends.mindspore import runtime as rt
    from backends.mindspore import native
    key, data = eqn.args
    if em.native:
        em.assign(eqn.outs[0], native.fold_in(em, em.ref(key), em.ref(data)))
        return
    em.assign(eqn.outs[0], f"{em.host(rt.fold_in_prim, op='fold_in', hint='foldin')}({em.ref(key)}, {em.ref(data)})")


def _fast_seeds(em, eqn):
    origin = eqn.outs[0].origin or eqn.args[0].origin or ("worker", em.rank)
    salt = 0 if origin[0] == "shared" else 7919 * (int(origin[1]) + 1)
    return 1 + em.seed % 1_000_003, 1 + eqn.attrs["site"] * 1009 + salt


def _exact(em, eqn) -> bool:
    origin = eqn.outs[0].origin or eqn.args[0].origin
    return em.rng == "exact" or not em.native or bool(origin) and origin[0] == "fixed"


def reads_key(em, eqn) -> bool:
    """Whether the rule of a draw (``random_bits``, ``uniform``) reads its key: the exact
    kernels do, MindSpore's own generators (rng "fast" off CPU) do not."""
    return _exact(em, eqn)


def exact_bits(em, key, shape) -> str:
    """threefry bits of ``shape`` from ``key`` (the JAX bits): host kernel on CPU, native elsewhere."""
    from backends.mindspore import native
    from backends.mindspore import runtime as rt
    if em.native:
        return native.random_bits(em, em.ref(key), shape)
    return f"ops.reshape({em.host(rt.random_bits_prim, shape or (1,), op='random_bits', hint='bits')}({em.ref(key)}), {shape!r})"


def random_bits(em, eqn):
    (key,), out, shape = eqn.args, eqn.outs[0], eqn.attrs["shape"]
    if _exact(em, eqn):
        em.assign(out, exact_bits(em, key, shape))
        return
    s1, s2 = _fast_seeds(em, eqn)
    hi = em.prim_expr(f"ops.UniformInt(seed={s1}, seed2={s2})", "uint")
    lo = em.prim_expr(f"ops.UniformInt(seed={s1}, seed2={s2 + 1})", "uint")
    lim0, lim1 = em.scalar(0, "int32"), em.scalar(65536, "int32")
    em.assign(out, f"ops.cast(ops.add(ops.mul(ops.cast({hi}({shape!r}, {lim0}, {lim1}), ms.int64), "
                   f"{em.scalar(65536, 'int64')}), ops.cast({lo}({shape!r}, {lim0}, {lim1}), ms.int64)), ms.uint32)")


def random_words(em, eqn):
    """Both words of each threefry block: the host kernel on CPU, the native rounds elsewhere;
    rng "fast" off CPU: MindSpore's generator, as :func:`random_bits`."""
    from backends.mindspore import native
    from backends.mindspore import runtime as rt
    (key,), out, shape = eqn.args, eqn.outs[0], eqn.attrs["shape"]
    if not _exact(em, eqn):
        return random_bits(em, eqn)
    if em.native:
        em.assign(out, native.random_words(em, em.ref(key), shape))
        return
    em.assign(out, f"ops.reshape({em.host(rt.random_words_prim, shape or (1,), op='random_words', hint='words')}"
                   f"({em.ref(key)}), {shape!r})")


def uniform(em, eqn):
    (key,), out, shape = eqn.args, eqn.outs[0], eqn.attrs["shape"]
    if _exact(em, eqn):
        bits = em.tmp(exact_bits(em, key, shape))
        em.assign(out, f"ops.mul(ops.cast(ops.bitwise_right_shift({bits}, {em.scalar(9, 'uint32')}), ms.float32), "
                       f"{em.scalar(2.0 ** -23, 'float32')})")
        return
    s1, s2 = _fast_seeds(em, eqn)
    em.assign(out, f"{em.prim_expr(f'ops.UniformReal(seed={s1}, seed2={s2})', 'unif')}({shape!r})")
