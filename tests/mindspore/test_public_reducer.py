"""The public MindSpore reducer: buckets and wire dtypes in the lowered graph, schedules, and one
msrun job (2 ranks) checked against the reference exchange (``compressors.protocol.run`` with
the loopback, ``comp.step(t)`` per step)."""
from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import compressors as C
from backends.mindspore.data_parallel import kfsim_reducer, phases
from backends.mindspore.emit import Emitter, emit
from backends.mindspore.exchange import trace_exchange
from backends.mindspore.reducer import wire_bytes
from compressors import protocol
from compressors.traced import COMM_OPS
from tests.mindspore import schedule_worker as W

AVALS = [((300, 100), np.float32), ((100,), np.float32), ((100, 10), np.float32), ((10,), np.float32)]


def traced(spec, cap, avals=AVALS):
    return trace_exchange(C.parse(spec), avals, n=2, ranks=[0], seed=0, comm="collective", who=spec,
                          bucket_bytes=cap)


@pytest.mark.parametrize("spec", ["none()", "ef(topk(ratio=0.01))", "bf16()", "qsgd(levels=127, bucket=64)",
                                  "powersgd(rank=2)", "randomk(ratio=0.1)"])
@pytest.mark.parametrize("cap", [25 * 2**20, 50_000, 1])
def test_one_collective_per_bucket_and_round(spec, cap):
    t = traced(spec, cap)
    comms = [e for e in t.prog.eqns if e.op in COMM_OPS]
    assert len(t.plan.buckets) == {25 * 2**20: 1, 50_000: 2, 1: 4}[cap]
    assert len(comms) == len(t.plan.collectives), [(e.op, e.args[0].dtype) for e in comms]
    wire, count = wire_bytes(t.prog)
    assert count == len(comms)
    assert wire == t.plan.payload_bytes or spec.startswith("qsgd")  # qsgd's int8 levels ride a wider carrier
    assert wire >= t.plan.payload_bytes


def test_bf16_travels_as_16_bits_in_the_lowered_graph():
    t = traced("bf16()", 25 * 2**20)
    (comm,) = [e for e in t.prog.eqns if e.op in COMM_OPS]
    elements = sum(math.prod(s) for s, _ in AVALS)
    assert comm.op == "comm_gather" and comm.args[0].dtype == np.uint32
    assert comm.args[0].size == math.ceil(elements / 2)          # two bf16 patterns per 32-bit word
    assert wire_bytes(t.prog)[0] == 2 * elements == t.plan.payload_bytes
    em = Emitter("bf16()", "exact", 0, 0)
    emit(em, t.prog, t.means[0])
    src = "\n".join(em.lines)
    gathers = [ln for ln in em.lines if "allgather" in ln.lower()]
    assert len(gathers) == 1 and "AllReduce" not in src
    assert "ms.int32" in gathers[0] and "float32" not in gathers[0]   # the words, as int32: 32 bits per 2 values


def test_phases_of_schedules():
    assert phases(C.parse("ef(topk(ratio=0.1))"), 100) == [0]
    assert phases(C.parse("warmup(ef(topk(ratio=0.1)), steps=3)"), 100) == [0, 3]
    assert phases(C.parse("warmup(ef(topk(ratio=0.1)), steps=0)"), 100) == [0]
    starts = phases(C.parse("dgc(ratio=0.1, warmup_epochs=2, steps_per_epoch=2)"), 100)
    assert starts[0] == 0 and len(starts) >= 2 and starts[-1] <= 4
    with pytest.raises(ValueError, match="compression must be a spec string or a Compressor"):
        kfsim_reducer(3, [np.zeros(2, np.float32)], n=2, rank=0)
    with pytest.raises(ValueError):
        kfsim_reducer("topk(ratio=7)", [np.zeros(2, np.float32)], n=2, rank=0)
    from backends.mindspore.reducer import compressed_reducer
    with pytest.raises(ValueError, match="is scheduled: use backends.mindspore.kfsim_reducer"):
        compressed_reducer("warmup(ef(topk(ratio=0.1)), steps=3)", [np.zeros(2, np.float32)], n=2, rank=0)


def reference(spec, cap, steps):
    """Per step, the decoded mean of the two ranks' gradients by the runner with the loopback."""
    import backends
    ops = backends.get("jax")
    comp = C.parse(spec)
    states = [comp.init(ops, [ops.asarray(p) for p in W.params()]) for _ in range(2)]
    out = []
    for t in range(steps):
        grads = [[ops.asarray(W.gradient(t, r, i)) for i in range(len(W.SHAPES))] for r in range(2)]
        keys = [C.make_keys(ops, 3, t, r) for r in range(2)]
        res = protocol.run(ops, comp.step(t), grads, states, keys,
                           **({} if cap is None else {"bucket_bytes": cap}))
        states = list(res.states)
        out.append([np.asarray(m, np.float32) for m in res.mean])
    return out


STEPS = 6


def test_msrun_public_reducer_matches_reference(tmp_path):
    from kfsim.launch.launcher import free_port, msrun_path
    from kfsim.launch.preflight import interpreter_path
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, GLOG_v="3", PATH=interpreter_path(), PYTHONPATH=str(repo))
    cmd = [msrun_path(), "--worker_num=2", "--local_worker_num=2", f"--master_port={free_port(2)}",
           f"--log_dir={tmp_path}", "--join=True", "--cluster_time_out=120", "--tail_worker_log=2",
           str(repo / "tests/mindspore/schedule_worker.py"), str(tmp_path), str(STEPS)]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, start_new_session=True, timeout=500,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    logs = "".join((tmp_path / f"worker_{r}.log").read_text()[-3000:] for r in range(2)
                   if (tmp_path / f"worker_{r}.log").exists())
    assert proc.returncode == 0, logs
    got = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    acct = json.loads((tmp_path / "rank0.json").read_text())
    for c, (spec, cap) in enumerate(W.CASES):
        want = reference(spec, cap, STEPS)
        comp = C.parse(spec)
        for t in range(STEPS):
            for i in range(len(W.SHAPES)):
                a, b = got[0][f"{c}_{t}_{i}"], got[1][f"{c}_{t}_{i}"]
                assert np.array_equal(a, b), f"{spec} step {t} leaf {i}: the ranks decoded different means"
                np.testing.assert_allclose(a, want[t][i], rtol=1e-6, atol=1e-7, err_msg=f"{spec} step {t} leaf {i}")
            plan = comp.step(t).exchange_plan(list(W.params()), **({} if cap is None else {"bucket_bytes": cap}))
            assert acct[f"{c}_{t}"]["payload_bytes"] == plan.payload_bytes
            assert acct[f"{c}_{t}"]["collectives"] == len(plan.collectives)
    # warm-up: dense (the plain mean) for steps 0..2, compressed from step 3 on
    dense = [np.mean([W.gradient(t, r, 0) for r in range(2)], axis=0) for t in range(STEPS)]
    for t in range(STEPS):
        same = np.allclose(got[0][f"0_{t}_0"], dense[t], rtol=1e-6, atol=1e-7)
        assert same == (t < 3), f"warm-up phase wrong at step {t}"
    assert acct["0_starts"] == [0, 3] and acct["0_2"]["buckets"] == acct["0_3"]["buckets"] == 3
    assert acct["2_0"]["wire_bytes"] == acct["2_0"]["payload_bytes"]   # bf16: 16 bits on the wire
