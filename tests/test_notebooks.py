"""The notebooks are jupytext percent-format ``.py`` files, and they run top to bottom.

``notebooks/[0-9][0-9]_*.py`` are the notebooks and their only source (other
``.py`` files there, such as ``blockwise_topk.py``, are helper modules they
import). Each one is converted in memory with jupytext and executed in a fresh
kernel (nbclient) running this interpreter, with its working directory in
``notebooks/`` and ``KFSIM_NB_OUT`` pointing at a temp folder; a failing cell
fails the test with its source and error, every cell has a timeout and the
whole notebook a time budget, and the figures it promises must exist as PNG
files, each with its SVG beside it. The notebooks assert their own claims
(contracts, speedups) in their cells. Open one in Jupyter with ``jupytext --to notebook NAME.py``; a generated
``.ipynb`` must not be committed beside its ``.py`` (it would drift).
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from pathlib import Path

import jupytext  # pip install kfsim[test]: jupytext, nbformat, nbclient, ipykernel
import nbclient
import pytest
from nbclient.exceptions import CellExecutionError, CellTimeoutError

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK_GLOB = "[0-9][0-9]_*.py"
KERNEL_NAME = "kfsim-notebooks"  # registered per session, pointing at sys.executable
CELL_TIMEOUT_S = 300

# notebook -> (output sub-folder, PNG files it must write, time budget in seconds on 2 cores)
EXPECTED = {
    "01_prototype_a_compressor.py": ("01_prototype", ["ratio_vs_error.png", "error_feedback.png"], 300),
    "02_simulate_cluster_scaling.py": ("02_simulate", ["breakdown.png", "scaling_workers.png",
                                                       "scaling_bandwidth.png", "advise.png",
                                                       "time_to_accuracy.png"], 300),
    "03_deploy_to_mindspore.py": ("03_deploy", ["mindspore_vs_simulation.png"], 480),
}
MARKS = {"03_deploy_to_mindspore.py": [pytest.mark.msrun]}


def notebook_files() -> list[Path]:
    return sorted(NB_DIR.glob(NOTEBOOK_GLOB))


def read_notebook(path: Path):
    return jupytext.reads(path.read_text(encoding="utf-8"), fmt="py:percent")


def cell_lines(path: Path) -> list[int]:
    """1-based line of each cell's ``# %%`` marker, in cell order."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if line.startswith("# %%")]


def test_every_notebook_is_tested():
    assert [p.name for p in notebook_files()] == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_is_percent_format(name):
    """Header, every cell behind its own ``# %%`` marker, prose and code, code that parses."""
    path = NB_DIR / name
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# ---\n# jupyter:\n"), f"{name}: no jupytext header"
    nb = read_notebook(path)
    rep = nb.metadata.get("jupytext", {}).get("text_representation", {})
    assert rep.get("format_name") == "percent" and rep.get("extension") == ".py", f"{name}: header {rep}"
    assert nb.metadata.get("kernelspec", {}).get("language") == "python", f"{name}: no Python kernelspec"
    kinds = [c.cell_type for c in nb.cells]
    assert "markdown" in kinds and "code" in kinds, f"{name}: cells {kinds}"
    assert len(cell_lines(path)) == len(nb.cells), f"{name}: text outside a `# %%` cell"
    for cell, line in zip(nb.cells, cell_lines(path)):
        assert cell.source.strip(), f"{name}:{line}: empty cell"
        if cell.cell_type == "code":
            try:
                ast.parse(cell.source)
            except SyntaxError as e:
                pytest.fail(f"{name}:{line}: cell does not parse: {e}")


def _committed_ipynb() -> list[str]:
    """``.ipynb`` files in notebooks/ that git tracks (all of them outside a git checkout)."""
    on_disk = sorted(p.name for p in NB_DIR.glob("*.ipynb"))
    try:
        proc = subprocess.run(["git", "ls-files", "--", "*.ipynb"], cwd=NB_DIR, capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return on_disk
    if proc.returncode != 0:
        return on_disk
    tracked = {Path(line).name for line in proc.stdout.splitlines() if "/" not in line}
    return [n for n in on_disk if n in tracked]


def test_no_generated_ipynb_is_committed():
    """The ``.py`` is the source; a committed ``.ipynb`` copy would drift from it."""
    stale = _committed_ipynb()
    assert not stale, (f"notebooks/{stale} committed beside the percent-format sources: delete "
                       "(git rm) them; `jupytext --to notebook` makes a local copy when needed")


def test_blockwise_topk_is_a_module_not_a_notebook():
    assert (NB_DIR / "blockwise_topk.py").is_file()
    assert not (NB_DIR / "blockwise_topk.py").match(NOTEBOOK_GLOB)
    assert not (NB_DIR / "blockwise_topk.py").read_text(encoding="utf-8").startswith("# ---")


BLOCKWISE_CHECK = r'''
import math, sys
import jax
import numpy as np
sys.path.insert(0, sys.argv[1])
import backends, compressors
from compressors.core import make_keys
from blockwise_topk import block_plan, blockwise_topk, reference

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
        rt = lambda t: compressors.roundtrip(ops, c, t, c.init(ops, t), make_keys(ops, 0, 0))[0]
        out = jax.jit(rt)(t) if name == "jax" else rt(t)
        for k, x in tree.items():
            assert np.array_equal(np.asarray(out[k]), reference(x, ratio, block)), (ratio, block, name, k)
        for (k, x), plan in zip(sorted(tree.items()), c.tree_plan(t)):
            if x.size == 0:  # an empty tensor sends nothing (compressors.core.EMPTY)
                assert plan == (), (k, plan)
                continue
            leaf = c.for_leaf(x.shape, x.dtype)  # the Leaf protocol: what one tensor sends
            p, _ = leaf.encode(ops, t[k], leaf.init(ops, t[k]), make_keys(ops, 0, 0), (), 0)
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


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory) -> Path:
    """A Jupyter data dir holding a kernelspec that runs this interpreter (venv or CI alike)."""
    from ipykernel.kernelspec import write_kernel_spec

    data = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(data / "kernels" / KERNEL_NAME,
                      overrides={"display_name": f"kfsim notebooks ({sys.executable})",
                                 "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]})
    return data


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _cell_failure(name: str, path: Path, index: int, cell, error: str) -> str:
    lines = cell_lines(path)
    where = f"{name}:{lines[index]}" if index < len(lines) else name
    return f"{where}: cell {index} failed\n{'-' * 70}\n{cell.source}\n{'-' * 70}\n{error}"


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in sorted(EXPECTED)])
def test_notebook_runs(name, tmp_path, monkeypatch, kernel_dir):
    sub, figures, budget = EXPECTED[name]
    path = NB_DIR / name
    monkeypatch.setenv("KFSIM_NB_OUT", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))  # where KERNEL_NAME is found
    nb = read_notebook(path)
    deadline = time.monotonic() + budget
    current = {"index": 0}

    def timeout(cell) -> int:
        """Per cell: CELL_TIMEOUT_S, or less if the notebook's budget is nearly spent."""
        return max(1, min(CELL_TIMEOUT_S, int(deadline - time.monotonic())))

    def on_cell_start(cell, cell_index, **_):
        current["index"] = cell_index

    client = nbclient.NotebookClient(nb, timeout_func=timeout, kernel_name=KERNEL_NAME,
                                     on_cell_start=on_cell_start,
                                     resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.monotonic()
    failure = None
    try:
        client.execute()
    except CellExecutionError as e:
        i = current["index"]
        errors = [o for o in nb.cells[i].get("outputs", []) if o.output_type == "error"]
        error = "\n".join("\n".join(o.get("traceback", [])) or f"{o.get('ename')}: {o.get('evalue')}"
                          for o in errors) or str(e)
        failure = _cell_failure(name, path, i, nb.cells[i], ANSI.sub("", error))
    except CellTimeoutError:
        i = current["index"]
        failure = _cell_failure(name, path, i, nb.cells[i],
                                f"timed out (cell limit {CELL_TIMEOUT_S} s, notebook budget {budget} s)")
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    print(f"{name}: {time.monotonic() - t0:.0f} s")
    for fig in figures:
        out = tmp_path / sub / fig
        assert out.is_file() and out.stat().st_size > 1000, f"{name} did not write {out}"
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
        svg = out.with_suffix(".svg")
        assert svg.is_file() and "<svg" in svg.read_text()[:2000], f"{name} did not write {svg} beside {out.name}"
