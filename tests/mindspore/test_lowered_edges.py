"""Edge inputs on lowered MindSpore: the lowering's column of the edge matrix.

* **Preflight** (no MindSpore process): for every example spec and dtype,
  ``check_lowerable`` passes on a tree of every edge kind
  (``tests/edges.py``), with JAX's x64 flag off *and* on, and the traced
  programs are identical in both states: lowering float64 does not depend on
  the flag. A compressor that would put an op on a zero-size array into the
  graph (MindSpore's CPU kernels fail on those: "memcpy failed", BroadcastTo,
  SIGFPE) is rejected by it, before any worker starts.
* **Compiled** (subprocesses, so a crashing kernel fails a test instead of
  killing pytest): ``tests/mindspore/edge_worker.py`` lowers specs on every
  float32 edge kind plus float16/bf16/float64 leaves, x64 off, and compares
  two steps with JAX bit for bit (PowerSGD: rtol 1e-5). MindSpore compiles
  slowly (~30-90 s a spec on 2 cores), so by default the specs are one of
  each codec family the edges broke (``COMPILED``); ``KFSIM_EDGE_SPECS=all``
  runs every example spec. Float32 on ordinary inputs, every spec, is
  ``test_lowered_conformance.py``.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import compressors
from backends.mindspore.exchange import trace_exchange
from backends.mindspore.reducer import check_lowerable
from backends.mindspore.trace import LoweringError
from compressors.core import Compressor, Law, fixed, single_round
from tests import edges
from tests.specs import EXAMPLE_SPECS

COMPILED = ["qsgd(levels=4, bucket=0)", "int8()", "quantize(bits=3, bucket=50)", "natural()", "signsgd()",
            "scaledsign()", "topk(ratio=0.1)", "ef(topk(ratio=0.1))", "powersgd(rank=2)"]
SPECS = EXAMPLE_SPECS if os.environ.get("KFSIM_EDGE_SPECS") == "all" else COMPILED
PROCESSES = 2
ROOT = Path(__file__).resolve().parents[2]


def avals(dtype) -> list:
    return [(shape, np.dtype(dtype)) for shape in edges.KINDS.values()]


def signature(comp, avals_, x64: bool) -> list:
    """The traced exchange (every equation's op, attributes' keys and result avals) under a given x64 flag."""
    with jax.enable_x64(x64):
        t = trace_exchange(comp, avals_, n=2, ranks=[0], seed=0, comm="collective", who=comp.spec)
    return [(e.op, sorted(e.attrs), [(v.shape, v.dtype.str) for v in e.outs]) for e in t.prog.eqns]


@pytest.mark.parametrize("dtype", edges.DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_preflight_passes_edges_in_both_x64_states(spec, dtype):
    comp = compressors.parse(spec)
    for step in (0, 1, 2):  # warm-up / DGC schedules change the program
        active = comp.step(step)
        try:
            for x64 in (False, True):
                with jax.enable_x64(x64):
                    check_lowerable(active, avals(dtype))
        except ValueError as exc:
            if isinstance(exc, LoweringError):
                raise
            return  # the spec rejects this dtype (test_edge_matrix: on every backend)
        if dtype == np.float64:
            off, on = signature(active, avals(dtype), False), signature(active, avals(dtype), True)
            assert off == on, f"{spec}: the float64 program depends on jax_enable_x64"
            assert any(d == "<f8" for _, _, outs in off for _, d in outs), f"{spec}: no float64 op in the program"


def _user(compress, name):
    leaf = single_round(law=Law.SUM, bits=lambda shape, dtype: 32 * math.prod(shape), compress=compress,
                        decompress=lambda ops, payload, x: ops.reshape(payload, x.shape))
    return Compressor(name, fixed(leaf))


def test_preflight_rejects_a_zero_size_op():
    """A codec that makes an empty intermediate on a non-empty tensor (here a
    sum over an empty slice) would fail in MindSpore's kernels: rejected."""
    def compress(ops, x, state, keys):
        flat = ops.reshape(x, (-1,))
        return flat + ops.sum(flat[0:0]), state

    with pytest.raises(LoweringError, match=r"emptyslice\(\).*'getitem' on a zero-size array"):
        check_lowerable(_user(compress, "emptyslice()"), [((6,), np.float32)])
    check_lowerable(_user(lambda ops, x, s, k: (ops.reshape(x, (-1,)) * 2.0, s), "plain()"), [((0,), np.float32)])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    """{spec: problems} from PROCESSES worker subprocesses (a crash: its spec's problem)."""
    out = tmp_path_factory.mktemp("lowered_edges")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), GLOG_v="3")
    procs = []
    for i in range(PROCESSES):
        path = out / f"w{i}.jsonl"
        procs.append((path, subprocess.Popen([sys.executable, "-m", "tests.mindspore.edge_worker", str(path),
                                              *SPECS[i::PROCESSES]], cwd=ROOT, env=env,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    results = {}
    # up to ~5 min a spec on 2 busy cores (KFSIM_EDGE_SPECS=all: 21 specs a worker, ~52 min there)
    timeout = max(3000, 300 * math.ceil(len(SPECS) / PROCESSES))
    for path, proc in procs:
        _, err = proc.communicate(timeout=timeout)
        started = None
        for line in path.read_text().splitlines() if path.exists() else []:
            rec = json.loads(line)
            if rec.get("event") == "start":
                started = rec["spec"]
            else:
                results[rec["spec"]], started = rec["problems"], None
        if started is not None or proc.returncode:
            tail = err.strip().splitlines()[-3:]
            results.setdefault(started, [f"worker exited with {proc.returncode} while lowering it: {tail}"])
    return results


@pytest.mark.parametrize("spec", SPECS)
def test_lowered_edges_match_jax(spec, compiled):
    assert spec in compiled, f"{spec}: no result (a worker died before it)"
    assert not compiled[spec], f"{spec} lowered on edge inputs: " + "; ".join(compiled[spec][:6])
