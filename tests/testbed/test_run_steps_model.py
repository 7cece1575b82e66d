"""``run_steps(model=...)``: the testbed's worker trains the named model (the plan benchmark runs the
Fashion-MNIST MLP on it); ``--hidden`` goes only with the wide benchmark MLP."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kfsim.testbed import compressed


class Stop(Exception):
    pass


@pytest.mark.parametrize("model, hidden", [("mlp", None), ("wide", "64")])
def test_run_steps_hands_the_model_to_the_worker(tmp_path, monkeypatch, model, hidden):
    seen = []

    def fake_run_job(tb, script, args=(), **kw):
        seen.append(list(args))
        raise Stop

    monkeypatch.setattr(compressed, "run_job", fake_run_job)
    tb = SimpleNamespace(shape=SimpleNamespace(rate_mbit=50.0))
    with pytest.raises(Stop):
        compressed.run_steps(tb, 4, "fp16()", hidden=64, batch=8, log_root=tmp_path, model=model)
    args = seen[0]
    assert args[args.index("--model") + 1] == model
    assert (args[args.index("--hidden") + 1] if "--hidden" in args else None) == hidden
    assert (model if model != "wide" else "h64") in args[args.index("--run-dir") + 1]


def test_predicted_worker_steps_bucket_as_the_worker_does():
    """predict_steps prices the native baseline one all-reduce per gradient (DistributedGradReducer)
    and a compressor with the kfsim reducer's buckets: as many collectives as the reducer sends."""
    from pathlib import Path

    import compressors
    from backends.mindspore.reducer import abstract
    from compressors.buckets import DEFAULT_BUCKET_BYTES
    from kfsim.launch.launcher import model_avals
    from kfsim.sim.predict import predict_iteration
    from kfsim.testbed import validate as V
    from kfsim.testbed.profile import read_profile

    assert V.worker_bucket_mb("native") == V.worker_bucket_mb("none") == V.PER_TENSOR_BUCKET_MB
    assert V.worker_bucket_mb("ef(topk(ratio=0.01))") == DEFAULT_BUCKET_BYTES / 2**20
    prof = Path(__file__).resolve().parents[2] / "profiles" / "testbed-50mbit-p2.toml"
    cl = read_profile(prof)
    for hidden in (1400,):  # the profiles' model: 12.6 MB of gradients, one 25 MiB bucket
        for spec in ("ef(topk(ratio=0.01))", "fp16()"):
            plan = compressors.parse(spec).exchange_plan(abstract(model_avals("wide", hidden)))
            br = predict_iteration(compressed.wide_name(hidden), cl, spec, 2, batch_per_worker=32, overlap=False,
                                   bucket_mb=V.worker_bucket_mb(spec))
            assert br.buckets == len(plan.buckets), (hidden, spec)
        native = predict_iteration(compressed.wide_name(hidden), cl, "none", 2, batch_per_worker=32, overlap=False,
                                   bucket_mb=V.worker_bucket_mb("native"))
        assert native.buckets == 6
    # the step the testbed predicts for a compressor is the bucketed iteration plus the loss all-reduce
    step = V.predict_steps(prof, 1400, 2, "fp16()", 64)
    br = predict_iteration(compressed.wide_name(1400), cl, "fp16()", 2, batch_per_worker=32, overlap=False,
                           bucket_mb=V.worker_bucket_mb("fp16()"))
    assert br.total_s < step < br.total_s + 0.01
