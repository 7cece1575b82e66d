"""The vectorised sweep against predict_iteration, configuration by configuration."""
import numpy as np
import pytest

from kfsim import catalog
from kfsim.catalog import ModelProfile
from kfsim.sim.pipeline import schedule
from kfsim.sim.predict import predict_iteration, sweep
from kfsim.sim.sweep import schedule_batch, sweep_grid

SEED = catalog.seed_cluster()
# a custom profile, shapes as lists (not yet normal), with its own per-tensor backward work
CUSTOM = ModelProfile("custom-mlp", [[512, 784], [512], [1024, 512], [1024], [10, 1024], [10]], 6.0e6,
                      tensor_flops=[4.0, 1.0, 3.0, 1.0, 2.0, 0.5], batch=16)
MODELS = ["resnet-18", "gpt2-124m", CUSTOM]
COMPS = ["none", "fp16", "topk(ratio=0.01)", "ef(topk(ratio=0.01))", "powersgd(rank=2)", "qsgd", "doublesqueeze()"]
WORKERS = [1, 2, 3, 4, 5, 8, 16, 24, 100, 1024]
BWS = [1e8, 1.25e9, 3e10]


def _check(out, models, cluster, comps, workers, bws, n, seed, **kw):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        i, j, k, w = (rng.integers(s) for s in out.shape)
        c = cluster._replace(inter=cluster.inter._replace(bandwidth=float(bws[k])))
        ref = predict_iteration(models[i], c, comps[j], int(workers[w]), **kw).total_s
        assert out[i, j, k, w] == pytest.approx(ref, rel=1e-12, abs=0), (i, j, k, w)


@pytest.mark.parametrize("collective", ["ring", "tree", "rhd", "hierarchical", "mccl", "ps"])
def test_grid_equals_predict_iteration(collective):
    cl = SEED._replace(interference=1.07)
    out = sweep_grid(MODELS, cl, COMPS, WORKERS, BWS, collective=collective, bucket_mb=4.0)
    assert out.shape == (len(MODELS), len(COMPS), len(BWS), len(WORKERS))
    _check(out, MODELS, cl, COMPS, WORKERS, BWS, 40, 1, collective=collective, bucket_mb=4.0)
    # p = 1 and p = 2 everywhere (the edges of the closed forms)
    for i, j, k in np.ndindex(out.shape[:3]):
        c = cl._replace(inter=cl.inter._replace(bandwidth=BWS[k]))
        for w in (0, 1):
            ref = predict_iteration(MODELS[i], c, COMPS[j], WORKERS[w], collective=collective, bucket_mb=4.0)
            assert out[i, j, k, w] == pytest.approx(ref.total_s, rel=1e-12, abs=0)


@pytest.mark.parametrize("kw", [dict(overlap=False), dict(batch_per_worker=7, interference=1.1),
                                dict(bucket_mb=1e9), dict(step=3)])
def test_grid_options(kw):
    comps = ["ef(topk(ratio=0.01))", "warmup(topk(ratio=0.01), steps=10)", "powersgd(rank=4)"]
    out = sweep_grid(["resnet-18", CUSTOM], SEED, comps, WORKERS, BWS, **kw)
    _check(out, ["resnet-18", CUSTOM], SEED, comps, WORKERS, BWS, 30, 2, **kw)


def test_dedicated_parameter_servers_and_many_buckets():
    cl = SEED._replace(collective="ps", servers=2, gpus_per_node=8)
    out = sweep_grid(["gpt2-124m"], cl, ["none", "topk(ratio=0.001)"], WORKERS, BWS, bucket_mb=0.5)
    _check(out, ["gpt2-124m"], cl, ["none", "topk(ratio=0.001)"], WORKERS, BWS, 30, 3, bucket_mb=0.5)


def test_random_configurations():
    rng = np.random.default_rng(7)
    workers = np.unique(rng.integers(1, 2049, 40))
    bws = rng.uniform(1e7, 1e11, 6)
    out = sweep_grid(MODELS, SEED, COMPS, workers, bws)
    _check(out, MODELS, SEED, COMPS, workers, bws, 60, 4)


def test_sweep_keeps_its_shapes_and_values():
    w = [1, 2, 8, 64]
    a = sweep("resnet-18", SEED, "fp16", w)
    assert a.shape == (4,)
    np.testing.assert_allclose(a, [predict_iteration("resnet-18", SEED, "fp16", p).total_s for p in w], rtol=1e-12)
    b = sweep("resnet-18", SEED, "fp16", w, bandwidths=[1e8, 1e10, 2e10])
    assert b.shape == (3, 4) and np.all(b[0, 2:] > b[1, 2:])  # p = 8, 64 span nodes
    assert sweep_grid("resnet-18", SEED, "fp16", w).shape == (1, 1, 1, 4)
    assert sweep_grid("resnet-18", SEED, "fp16", []).shape == (1, 1, 1, 0)


def test_flow_network_falls_back_to_predict_iteration():
    with pytest.raises(NotImplementedError, match="flow"):
        sweep_grid("resnet-18", SEED, "none", [4], network="flow")
    out = sweep("resnet-18", SEED, "none", [2, 8], bandwidths=[1e9], network="flow")
    c = SEED._replace(inter=SEED.inter._replace(bandwidth=1e9))
    assert out[0, 1] == predict_iteration("resnet-18", c, "none", 8, network="flow").total_s
    spec = "warmup(topk(ratio=0.01), steps=10)"      # the step reaches the fallback too
    got = sweep("resnet-18", SEED, spec, [8], network="flow", step=20)
    assert got[0] == predict_iteration("resnet-18", SEED, spec, 8, network="flow", step=20).total_s
    assert got[0] != predict_iteration("resnet-18", SEED, spec, 8, network="flow", step=1).total_s


@pytest.mark.parametrize("args, match", [
    (dict(workers=[0]), "workers"), (dict(workers=[2.5]), "workers"), (dict(workers=[[2, 4]]), "workers"),
    (dict(bandwidths=[0.0]), "bandwidth"), (dict(bandwidths=[-1e9]), "bandwidth"),
    (dict(bandwidths=[float("nan")]), "bandwidth"), (dict(collective="nope"), "collective"),
    (dict(bucket_mb=0), "bucket_mb"), (dict(network="wires"), "network"), (dict(interference=0.5), "interference"),
    (dict(batch_per_worker=0), "batch_per_worker"), (dict(models=["no-such-model"]), "unknown model"),
    (dict(models=[ModelProfile("empty", [], 1.0)]), "no tensors"),
])
def test_bad_input(args, match):
    kw = dict(models=["resnet-18"], cluster=SEED, compressors=["none"], workers=[2, 4]) | args
    with pytest.raises(ValueError, match=match):
        sweep_grid(**kw)


def test_schedule_batch_equals_schedule():
    rng = np.random.default_rng(5)
    for B in (1, 2, 7, 40):
        N = 25
        ready = np.minimum(np.maximum.accumulate(np.sort(rng.uniform(0, 1, B))), 1.0)
        ready[-1] = 1.0
        enc, comm, dec = (rng.exponential(0.01, (N, B)) * (rng.uniform(size=(N, B)) > 0.3) for _ in range(3))
        comm[0] = 0.0          # no communication: λ does not apply
        dec[1] = 0.0
        for overlap in (True, False):
            got = schedule_batch(0.1, 0.2, 0.03, ready, enc, comm, dec, overlap=overlap, interference=1.08)
            want = [schedule(0.1, 0.2, 0.03, ready, enc[n], comm[n], dec[n], overlap=overlap,
                             interference=1.08).total_s for n in range(N)]
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)
