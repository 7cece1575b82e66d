"""Simulated wall time of training iterations, from the timing simulator.

The trained model's :class:`~kfsim.catalog.ModelProfile` is built from its
parameter shapes (forward order) and FLOPs per sample; every synchronous
iteration costs ``kfsim.sim.predict.predict_iteration(...).total_s`` for the
compressor in force at that step (recomputed only when ``phase_of`` changes).

Asynchronous training (parameter server) takes its compute time per gradient
from the same prediction (compute + codec of one worker); a push costs the
link latency plus, at the server's link (FIFO), bytes / bandwidth; a pull
fetches the dense parameters (or the server-compressed reply).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from kfsim.train import models

FORWARD_ORDER = {
    "mlp": ("w1", "b1", "w2", "b2"),
    "cnn": ("c1w", "c1b", "c2w", "c2b", "w", "b"),
    "charlm": ("emb", "w1", "b1", "w2", "b2"),
}


def model_profile(model: str, batch_per_worker: int):
    """The simulator's ModelProfile of one of our models."""
    from kfsim.catalog import ModelProfile

    m = models.get(model)
    order = FORWARD_ORDER[model]
    return ModelProfile(f"kfsim-{model}", tuple(tuple(m.shapes[k]) for k in order),
                        float(m.flops_per_sample), batch=int(batch_per_worker),
                        source="kfsim.train.models (parameter shapes; 6 x forward MACs)", tensor_names=order)


NODES = "nodes"  # one RTX 3090 per node, nodes joined by 1 GbE (every worker crosses the network)


def cluster(name: str = "seed", bandwidth_gbit: float | None = None, workers: int | None = None):
    """A cluster for the timing simulator, its inter-node bandwidth replaced if
    given (Gbit/s). ``name``: "seed" (4 nodes x 4 RTX 3090, 1 GbE), a cluster
    profile file, or ``"nodes"``: ``workers`` nodes of one RTX 3090 each."""
    from kfsim.catalog import gbit, make_cluster
    from kfsim.sim.predict import as_cluster

    if name == NODES:
        if not workers or workers < 1:
            raise ValueError("cluster 'nodes' needs the number of workers")
        cl = make_cluster("rtx3090", gpus_per_node=1, nodes=int(workers), intra="pcie4", inter="1gbe",
                          name=f"{workers}x1-rtx3090-1gbe")
    else:
        cl = as_cluster(name)
    if bandwidth_gbit is not None:
        if not (bandwidth_gbit > 0 and math.isfinite(bandwidth_gbit)):
            raise ValueError(f"bandwidth must be a positive number of Gbit/s, got {bandwidth_gbit!r}")
        cl = cl._replace(inter=cl.inter._replace(bandwidth=gbit(bandwidth_gbit)))
    return cl


class Clock:
    """Per-iteration simulated time of a synchronous run (cached per compressor phase)."""

    def __init__(self, model: str, workers: int, batch: int, cl, collective: str | None = None,
                 server=None):
        self.profile = model_profile(model, max(1, batch // workers))
        self.workers, self.cluster, self.collective = workers, cl, collective
        self.server = server  # the parameter server's reply compressor, if any
        self._cache: dict = {}

    def breakdown(self, comp, step: int):
        from kfsim.sim.predict import predict_iteration

        key = comp.phase_of(step)
        if key not in self._cache:
            self._cache[key] = predict_iteration(self.profile, self.cluster, comp.step(step), self.workers,
                                                 batch_per_worker=self.profile.batch,
                                                 collective=self.collective)
        return self._cache[key]

    def iteration(self, comp, step: int) -> float:
        t = float(self.breakdown(comp, step).total_s)
        if self.server is not None:
            t += reply_time(self.profile, self.cluster, self.server, self.workers)
        return t


def reply_time(profile, cl, server, workers: int) -> float:
    """Extra time of a compressed server reply: the server sends the
    compressed mean to each of p workers over its link, p * bytes / bandwidth
    (the dense reply is already in the parameter-server collective's cost,
    so only the difference counts; it is never negative)."""
    from kfsim.sim.predict import wire_bytes

    dense = float(sum(math.prod(s) for s in profile.tensor_shapes) * 4)
    comp_bytes = wire_bytes(profile, server)
    return max(0.0, workers * (comp_bytes - dense) / cl.inter.bandwidth)


class AsyncCosts(NamedTuple):
    compute_s: float  # one gradient: forward + backward + codec of one worker
    comm_s: float     # push latency
    server_s: float   # push bytes through the server's link (queued FIFO)
    pull_s: float     # fetching parameters after an update


def async_costs(model: str, comp, workers: int, batch: int, cl) -> AsyncCosts:
    from kfsim.sim.predict import predict_iteration, wire_bytes

    prof = model_profile(model, max(1, batch // workers))
    b = predict_iteration(prof, cl, comp, 1, batch_per_worker=prof.batch)
    enc = predict_iteration(prof, cl, comp, max(2, workers), batch_per_worker=prof.batch).codec_s
    dense = float(sum(math.prod(s) for s in prof.tensor_shapes) * 4)
    bw = cl.inter.bandwidth * cl.inter.efficiency
    return AsyncCosts(float(b.compute_s + enc), float(cl.inter.latency), wire_bytes(prof, comp) / bw,
                      float(cl.inter.latency + dense / bw))


def jittered(base: float, sigma: float):
    """Compute-time distribution: log-normal with mean ``base`` and shape
    ``sigma`` (kfsim.sim.distributions.lognormal); sigma = 0: constant."""
    if sigma < 0:
        raise ValueError(f"jitter must be >= 0, got {sigma}")
    if sigma == 0:
        return float(base)
    from kfsim.sim.distributions import lognormal

    return lognormal(max(base, 1e-12), sigma)
