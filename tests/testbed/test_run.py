"""A short real testbed run: msrun across 2 namespaces on a shaped link (root with ip/tc; skipped otherwise)."""
import subprocess
import sys

import pytest

from kfsim.testbed.fit import echo_factor
from kfsim.testbed.netns import PREFIX, Shape, Testbed, namespaces, ns_pids
from kfsim.testbed.run import run_job
from kfsim.testbed.training import mlp_params, run_native


def _mindspore():
    try:
        import mindspore  # noqa: F401
    except ImportError:
        return False
    from kfsim.launch.launcher import LaunchError, msrun_path
    try:
        return bool(msrun_path())
    except LaunchError:
        return False


@pytest.mark.skipif(not _mindspore(), reason="mindspore / msrun not installed")
def test_two_namespace_training_run(root_testbed, tmp_path):
    layers = [64, 256, 10]
    with Testbed(2, Shape(100)) as tb:
        run = run_native(tb, 2, layers, batch=16, steps=2, warmup=1, log_root=tmp_path, timeout_s=200)
        assert ns_pids(tb.ns(0)) == [] and ns_pids(tb.ns(1)) == []
    assert namespaces(PREFIX) == []
    assert run.step_s > 0 and run.compute_s > 0 and run.step_s > run.comm_s >= 0
    assert run.loss == pytest.approx(run.loss) and 0 < run.loss < 10
    grad_bytes = mlp_params(layers) * 4
    # MindSpore's CPU all-reduce echoes every message: about twice the textbook ring's bytes per worker
    assert 1.8 < echo_factor(run.tx_per_step, "allreduce", 2, grad_bytes) < 2.6


def test_timeout_kills_every_process(root_testbed, tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import time\ntime.sleep(600)\n")
    with Testbed(2, Shape(100)) as tb:
        res = run_job(tb, str(script), log_dir=tmp_path / "logs", timeout_s=6)
        assert res.timed_out and not res.ok
        assert ns_pids(tb.ns(0)) == [] and ns_pids(tb.ns(1)) == []
    assert namespaces(PREFIX) == []
    assert str(script) not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


def test_run_job_rejects_bad_input(root_testbed, tmp_path):
    with Testbed(1, Shape(100)) as tb:
        with pytest.raises(ValueError):
            run_job(tb, str(tmp_path / "missing.py"), log_dir=tmp_path)
        with pytest.raises(ValueError):
            run_job(tb, sys.executable, log_dir=tmp_path, workers=3)
