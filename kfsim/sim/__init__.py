"""kfsim's timing simulator, in layers (each usable alone, each tested against the one below):

1. ``collectives`` / ``algorithms`` — closed-form α-β-γ costs, vectorised; named collectives
   (ring, tree, rhd, hierarchical, ps, mccl) on a two-level cluster;
   ``exchange_cost`` / ``codec`` — a compressor's plan → per-bucket exchange and encode/decode cost;
2. ``pipeline`` / ``compute`` — one iteration: DDP buckets overlapping backward, breakdown;
3. ``network`` / ``maxmin`` — topologies and flow-level max-min sharing (Numba);
4. ``events`` / ``distributions`` — simpy: stragglers, failures, PS queues, async/SSP staleness.

Entry points: :func:`kfsim.sim.predict.predict_iteration`, :func:`kfsim.sim.predict.simulate_async`.
"""
# kfsim.sim.sweep is both a module (sweep_grid) and predict's function ``sweep``: load the module
# first, so that the package attribute ``sweep`` ends up the function (as before the module existed).
from kfsim.sim.sweep import schedule_batch, sweep_grid
from kfsim.sim.events import AppliedUpdate, simulate_async, simulate_iteration, simulate_sync
from kfsim.sim.pipeline import Breakdown
from kfsim.sim.predict import predict_iteration, single_worker_time, sweep, wire_bytes

__all__ = ["AppliedUpdate", "Breakdown", "predict_iteration", "simulate_async", "simulate_iteration",
           "schedule_batch", "simulate_sync", "single_worker_time", "sweep", "sweep_grid", "wire_bytes"]
