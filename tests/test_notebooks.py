"""The notebooks run top to bottom and stay what ``notebooks/_build.py`` generates.

Each notebook executes in a fresh kernel (nbclient) with its working
directory in ``notebooks/`` and ``KFSIM_NB_OUT`` pointing at a temp folder;
any cell error fails the test, the whole notebook must finish within its
time budget, and the figures it promises must exist as PNG files. The
notebooks assert their own claims (contracts, speedups) in their cells.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import nbclient  # pip install kfsim[test]: nbformat, nbclient, ipykernel
import nbformat
import pytest

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"

# notebook -> (output sub-folder, PNG files it must write, time budget in seconds on 2 cores)
EXPECTED = {
    "01_prototype_a_compressor.ipynb": ("01_prototype", ["ratio_vs_error.png", "error_feedback.png"], 300),
    "02_simulate_cluster_scaling.ipynb": ("02_simulate", ["breakdown.png", "scaling_workers.png",
                                                          "scaling_bandwidth.png", "advise.png",
                                                          "time_to_accuracy.png"], 300),
    "03_deploy_to_mindspore.ipynb": ("03_deploy", ["mindspore_vs_simulation.png"], 480),
}
# Notebooks not executed yet, with the reason (kept generated and up to date meanwhile).
MARKS = {"03_deploy_to_mindspore.ipynb": [pytest.mark.msrun]}


def _builder():
    spec = importlib.util.spec_from_file_location("_kfsim_nb_build", NB_DIR / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NB_DIR.glob("*.ipynb")) == sorted(_builder().NOTEBOOKS) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_is_up_to_date(name):
    """The committed notebook equals what _build.py generates (run it to refresh)."""
    built = _builder().build(name)
    on_disk = nbformat.read(NB_DIR / name, as_version=4)
    got = [(c.cell_type, c.source) for c in on_disk.cells]
    want = [(c.cell_type, c.source) for c in built.cells]
    assert got == want, f"{name} is stale: run `python notebooks/_build.py`"
    assert all(not c.get("outputs") for c in on_disk.cells if c.cell_type == "code"), \
        f"{name} is committed with outputs: run `python notebooks/_build.py`"


BLOCKWISE_CHECK = r'''
import math, sys
import jax
import numpy as np
sys.path.insert(0, sys.argv[1])
import backends, compressors
from compressors.core import make_keys
from blockwise_topk import block_plan, blockwise_topk

def reference(x, ratio, block):
    nb, k, _ = block_plan(ratio, block, x.size)
    rows = np.concatenate([x.ravel(), np.zeros(nb * block - x.size, x.dtype)]).reshape(nb, block)
    out = np.zeros_like(rows)
    for j in range(nb):
        keep = np.argsort(-np.abs(rows[j]), kind="stable")[:k]
        out[j, keep] = rows[j, keep]
    return out.ravel()[: x.size].reshape(x.shape)

rng = np.random.default_rng(0)
shapes = {"m": (37, 29), "v": (256,), "s": (), "e": (0,), "t": (5,), "r": (3, 100)}
tree = {k: (rng.standard_t(2, size=s) * 1e-3).astype(np.float32) for k, s in shapes.items()}
tree["m"][3, :4] = 0.5  # ties: lowest index first
for ratio, block in ((0.01, 256), (0.1, 16), (0.5, 4), (1.0, 8)):
    c = blockwise_topk(ratio=ratio, block=block)
    assert compressors.parse(c.spec).spec == c.spec
    for name in ("jax", "numpy"):
        ops = backends.get(name)
        t = {k: ops.asarray(v) for k, v in tree.items()}
        if name == "jax":  # bits: on the NumPy binding below (eager JAX is slow)
            continue
        pays, _ = c.encode(ops, t, c.init(ops, t), make_keys(ops, 0, 0), [], 0)
        rt = lambda t: compressors.roundtrip(ops, c, t, c.init(ops, t), make_keys(ops, 0, 0))[0]
        out = jax.jit(rt)(t) if name == "jax" else rt(t)
        for k, x in tree.items():
            assert np.array_equal(np.asarray(out[k]), reference(x, ratio, block)), (ratio, block, name, k)
        for (k, x), p, plan in zip(sorted(tree.items()), pays, c.tree_plan(t)):
            sent = sum(np.asarray(a).nbytes * 8 for a in p)
            assert sent == plan[0].bits, (k, sent, plan)
            nb, kk, _ = block_plan(ratio, block, x.size)
            err = np.sum((reference(x, ratio, block).astype(np.float64) - x) ** 2)
            assert err <= (1 - kk / block) * np.sum(x.astype(np.float64) ** 2) + 1e-30
    # three workers, gather law: the mean of what each sends
    ops = backends.get("numpy")
    ws = [{k: ops.asarray((rng.normal(size=s)).astype(np.float32)) for k, s in shapes.items()} for _ in range(3)]
    ex = lambda ws: compressors.exchange(ops, c, ws, [c.init(ops, w) for w in ws], [make_keys(ops, 0, 0, r) for r in range(3)])[0]
    mean = ex(ws)
    for k in shapes:
        want = sum(reference(np.asarray(w[k]), ratio, block) for w in ws) / 3
        assert np.allclose(np.asarray(mean[k]), want, rtol=1e-6, atol=1e-7), k
ops = backends.get("numpy")
x = {"w": np.arange(600, dtype=np.float32)}
x["w"][599] = np.nan
c = blockwise_topk()
out, _ = compressors.roundtrip(ops, c, x, c.init(ops, x), make_keys(ops, 0, 0))
assert np.isnan(np.asarray(out["w"])).any() and not np.isfinite(np.asarray(out["w"])[np.asarray(out["w"]) != 0]).any()
for bad in ({"ratio": 0}, {"ratio": 1.5}, {"ratio": True}, {"block": 1}, {"block": 2.5}, {"block": 2**17}):
    try:
        blockwise_topk(**bad)
    except ValueError:
        continue
    raise AssertionError(f"no ValueError for {bad}")
print("ok")
'''


def test_blockwise_topk_module():
    """The notebooks' compressor, fast: equals a NumPy reference on both backends
    (ties, padding, scalars, empty tensors), sends exactly its planned bits, is a
    k/B-contraction, averages gathered payloads, poisons NaN, rejects bad
    parameters. In a subprocess, so its registration stays out of this session."""
    proc = subprocess.run([sys.executable, "-c", BLOCKWISE_CHECK, str(NB_DIR)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-3000:] + proc.stderr[-5000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in sorted(EXPECTED)])
def test_notebook_runs(name, tmp_path, monkeypatch):
    sub, figures, budget = EXPECTED[name]
    monkeypatch.setenv("KFSIM_NB_OUT", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NB_DIR / name, as_version=4)
    deadline = time.monotonic() + budget

    def remaining(cell) -> int:
        """Per-notebook budget: each cell may use what the earlier cells left."""
        return max(1, int(deadline - time.monotonic()))

    client = nbclient.NotebookClient(nb, timeout_func=remaining, kernel_name="python3",
                                     resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.monotonic()
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError:
        pytest.fail(f"{name} did not finish within {budget} s")
    elapsed = time.monotonic() - t0
    print(f"{name}: {elapsed:.0f} s")
    for fig in figures:
        path = tmp_path / sub / fig
        assert path.is_file() and path.stat().st_size > 1000, f"{name} did not write {path}"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
