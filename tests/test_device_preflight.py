"""The static device preflight (backends.mindspore.device, kfsim.launch.preflight.check_device):
for every example spec and the GPU and Ascend targets, the host kernels the lowered graphs would
hold are exactly those the traced program's ops call for (scatter_add in bfloat16), and the
preflight refuses exactly those specs. Graph inspection only: no MindSpore
and no accelerator are needed."""
from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
from typer.testing import CliRunner

import compressors
from backends.mindspore import device as D
from backends.mindspore.emit import live_eqns
from compressors.traced import vars_of
from kfsim.launch import preflight
from tests.specs import EXAMPLE_SPECS

# a float32 matrix, a float64 vector (native float64 top-k) and a bfloat16 tensor (host-only bf16 scatter-add)
AVALS = [((12, 10), np.dtype(np.float32)), ((33,), np.dtype(np.float64)), ((4, 4, 3), np.dtype("bfloat16"))]
STEPS = range(3)  # every phase of the example schedules


@functools.lru_cache(maxsize=None)
def phases(spec) -> tuple:
    """(traced programs, the oracle's kernels) of every phase of ``spec`` over STEPS."""
    comp = compressors.parse(spec)
    out = []
    for s in sorted({comp.phase_of(t): t for t in STEPS}.values()):
        progs = D.traced_programs(comp.step(s), AVALS)
        out.append((progs, oracle(progs)))
    return tuple(out)


def oracle(programs) -> set:
    """From the traced ops alone (not from the rules): what has no native lowering."""
    out = set()
    for prog, outs in programs:
        for e in live_eqns(prog, outs):
            dts = {v.dtype.name for v in list(vars_of(e.args)) + list(e.outs)}
            if e.op == "scatter_add" and "bfloat16" in dts and e.args[1].size:
                out.add(("scatter_add", "scatter_add_bf16_prim"))
    return out


@pytest.mark.parametrize("device", ["GPU", "Ascend"])
@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_preflight_matches_the_graph_ops(spec, device):
    """The graph for ``device`` holds exactly the oracle's host kernels, and the preflight's line
    refuses exactly then, naming each op; CPU is never refused."""
    want, got = set(), set()
    for progs, expected in phases(spec):
        want |= expected
        got |= set(D.graph_kernels(progs, device))
    assert got == want, f"{spec} on {device}: graph holds {sorted(got)}, ops call for {sorted(want)}"
    line = D.refusal(spec, device, got)
    assert (line is None) == (not want)
    if want:
        assert line.startswith(f"compressor {spec!r} cannot run on {device}: ") and "\n" not in line
        assert all(f"{op} ({kernel})" in line for op, kernel in want)
    assert D.refusal(spec, "CPU", got) is None


def test_cpu_graphs_still_use_host_kernels_and_bad_device_is_refused():
    """Lowered for CPU (today's default) the kernels stay host ones (the fused ops are the NumPy
    backend's kernels, ``rules_fused``); GPU/Ascend graphs hold none."""
    f32 = [((40,), np.dtype(np.float32))]
    for spec, kernels in (("int8()", {"fold_in", "minmax_quantize_pack", "dequantize", "bitcast"}),
                          ("natural()", {"natural_pack", "natural_unpack"}), ("topk(ratio=0.1)", {"top_k_abs"}),
                          ("randomk(ratio=0.1)", {"fold_in", "random_bits"}),
                          ("onebit()", {"sign_split_pack", "unpack_signs"}),
                          ("efsignsgd()", {"sum_abs_pack", "unpack_signs"})):
        progs = D.traced_programs(compressors.parse(spec), f32)
        assert kernels <= {op for op, _ in D.graph_kernels(progs, "CPU")}, spec
        assert D.graph_kernels(progs, "GPU") == [] == D.graph_kernels(progs, "Ascend"), spec
    with pytest.raises(ValueError, match="device must be one of CPU, GPU, Ascend, got 'TPU'"):
        D.check_device("int8()", f32, "TPU")


def test_launch_preflight_device_check():
    """kfsim.launch.preflight.check_device: the launch models (float32) pass on every device with
    every built-in family the issue named; a bfloat16 model with top-k is refused in one line."""
    from kfsim.launch.launcher import model_avals
    mlp = model_avals("mlp")
    for spec, device in (("int8()", "GPU"), ("ef(topk(ratio=0.01))", "Ascend"), ("native", "GPU"),
                         ("dgc(ratio=0.05, sample=0.5, warmup_epochs=2, steps_per_epoch=1)", "GPU")):
        preflight.check_device(spec, device, mlp, steps=4)
    bf16 = [(s, np.dtype("bfloat16")) for s, _ in mlp]
    with pytest.raises(ValueError, match=r"^compressor 'ef\(topk\(ratio=0.01\)\)' cannot run on GPU: its lowered graph "
                                         r"needs CPU-only host kernels for scatter_add \(scatter_add_bf16_prim\); "
                                         r"use --device CPU"):
        preflight.check_device("ef(topk(ratio=0.01))", "GPU", bf16)
    preflight.check_device("ef(topk(ratio=0.01))", "CPU", bf16)
    preflight.check_device("ef(topk(ratio=0.01))", "Ascend", [(s, np.float64) for s, _ in mlp])  # native f64 top-k
    with pytest.raises(ValueError, match="unknown"):
        preflight.check_device("nosuch()", "GPU", mlp)


def test_kfsim_launch_refuses_before_any_worker(monkeypatch, tmp_path):
    """`kfsim launch --device GPU` (and ``launch()`` from Python): a refused graph is one `error:`
    line, exit 1, and no msrun process (no worker) is ever started."""
    import kfsim.cli as cli
    from kfsim.launch import launcher
    for mod in cli.COMMAND_MODULES:
        importlib.import_module(mod)

    def no_start(*a, **k):
        raise AssertionError("workers started")

    monkeypatch.setattr(launcher.supervise, "start", no_start)
    monkeypatch.setattr(D, "host_kernels", lambda *a, **k: [("scatter_add", "scatter_add_bf16_prim")])
    with pytest.raises(ValueError, match=r"^compressor 'topk\(ratio=0.1\)' cannot run on GPU"):
        launcher.launch("topk(ratio=0.1)", device="GPU", steps=2, log_dir=tmp_path / "api")
    res = CliRunner().invoke(cli.app, ["launch", "--device", "GPU", "-c", "topk(ratio=0.1)", "--steps", "2",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code != 0
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == ["error: compressor 'topk(ratio=0.1)' cannot run on GPU: its lowered graph needs CPU-only host "
                     "kernels for scatter_add (scatter_add_bf16_prim); use --device CPU or float32 gradients"], res.output
