"""JAX binding of the ops namespace (the default backend): ``backends.jax.ops.OPS``.

Importing it asks XLA:CPU for its region-based copy insertion
(``--xla_cpu_copy_insertion_use_region_analysis=true`` added to ``XLA_FLAGS``,
unless the caller set that flag): the default analysis copies a whole tensor
that is read by a gather and then updated in place by a scatter, which is
what error feedback around top-k does to every residual (64 simulated workers
of a 200k-parameter layer: a 51 MB copy per step, a third of the
``ef(topk)`` step in ``benchmarks/bench_train.py``). Copy insertion decides
where buffers live, never what is computed, so no number changes. XLA reads
the flag when its CPU client starts: a process that ran JAX code before this
import keeps the default (slower, same results).
"""
import os

_COPY_FLAG = "xla_cpu_copy_insertion_use_region_analysis"
if _COPY_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --{_COPY_FLAG}=true").strip()
