# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2 · Simulate cluster scaling
#
# Notebook 1's blockwise top-k goes into kfsim's timing simulator. The simulator needs only
# the compressor's *plan* — the exact bits and aggregation law of each round on each tensor —
# plus a codec-cost model, so a compressor written minutes ago is simulated like a built-in:
# scaling over workers and bandwidth, the breakdown of one iteration, the advisor map, and a
# short simulated training run with real numerics and a simulated clock.

# %%
import matplotlib.pyplot as plt
import numpy as np

from kfsim.sim import plotstyle  # how kfsim's figures look (colours, log axes, units)
from nbfigures import figures  # notebooks/nbfigures.py: OUT folder and save(fig, name)

OUT, save = figures("02_simulate")


# %%
import compressors
from blockwise_topk import blockwise_topk  # notebook 1's compressor (registers "blockwise_topk")
from kfsim import catalog
from kfsim.sim import report
from kfsim.sim.predict import predict_iteration, single_worker_time, sweep, wire_bytes

BLOCKWISE = "ef(blockwise_topk(ratio=0.01, block=256))"
SPECS = ["none()", "fp16()", "ef(topk(ratio=0.01))", "powersgd(rank=4)", BLOCKWISE]
cluster = catalog.seed_cluster()
model = "bert-large"
print(cluster.name, "—", cluster.nodes, "nodes ×", cluster.gpus_per_node, cluster.device.name,
      f"| intra {cluster.intra.name}, inter {cluster.inter.name} ({cluster.inter.bandwidth * 8 / 1e9:g} Gbit/s)")
for spec in SPECS:
    print(f"{spec:45s} {wire_bytes(model, spec) / 1e6:9.2f} MB per worker per iteration")

# %% [markdown]
# ## One iteration, broken down
#
# `predict_iteration` returns where the time goes: compute (forward, backward, optimizer),
# encode/decode on the device (codec), and the communication the backward pass could not
# hide (exposed comm). 16 workers of the seed cluster: 4 nodes × 4 RTX 3090, 1 Gbit/s Ethernet.

# %%
rows = {spec: predict_iteration(model, cluster, spec, 16) for spec in SPECS}
print(f"{'compressor':45s} {'total':>8s} {'compute':>8s} {'codec':>8s} {'exposed':>8s} {'rounds':>6s}")
for spec, b in rows.items():
    print(f"{spec:45s} {b.total_s:8.3f} {b.compute_s:8.3f} {b.codec_s:8.4f} {b.exposed_comm_s:8.3f} {b.rounds:6d}")

fig, ax = plt.subplots(figsize=(plotstyle.WIDE, 2.9))
labels = [s.replace("(ratio=0.01, block=256)", "(1%)") for s in SPECS]
bottom = np.zeros(len(SPECS))
totals = np.array([rows[s].total_s for s in SPECS])
for i, (part, hatch) in enumerate((("compute_s", None), ("codec_s", "///"), ("exposed_comm_s", None))):
    share = np.array([getattr(rows[s], part) for s in SPECS]) / totals * 100
    ax.barh(labels, share, left=bottom, color=plotstyle.COLORS[i], hatch=hatch, edgecolor="white", lw=0.5,
            label=part.replace("_s", "").replace("_", " "))
    bottom += share
for i, t in enumerate(totals):
    ax.text(101.5, i, f"{t:.2f} s", va="center", fontsize=8)
ax.set_xlim(0, 113)
ax.set_xticks(range(0, 101, 20))
ax.spines["bottom"].set_bounds(0, 100)
ax.grid(False)
ax.set_xlabel("share of the time per iteration [%]  (time per iteration at the right)")
ax.set_title(f"{model}, 16 workers, seed cluster: where an iteration's time goes")
plotstyle.legend_below(fig)
save(fig, "breakdown.png")
assert rows[BLOCKWISE].total_s < rows["none()"].total_s

# %% [markdown]
# The codec cost of `blockwise_topk` — a compressor written minutes ago — comes from its own
# op program (`compressors.cost`): the simulator traces its encode and decode once per tensor
# shape, counts the bytes, FLOPs and kernels of every op, and prices them on the device
# profile (achievable memory bandwidth per op class, a launch overhead per kernel;
# `kfsim.sim.codec`). No table of compressor names is involved. A calibrated cluster profile
# overrides the per-class throughputs (`Codec`, bytes/s per op class). What a 10× slower
# selection kernel would change — little at 1 Gbit/s, where the network dominates, but a fast
# link exposes it:

# %%
from compressors.cost import codec_cost as op_counts
from kfsim.catalog import Codec
from kfsim.sim import codec as sim_codec
from kfsim.sim.codec import reference_ops

shape = (1024, 1024)
for spec in (BLOCKWISE, "topk(ratio=0.01)"):
    cc = op_counts(compressors.parse(spec), shape, "float32", reference_ops())
    print(f"{spec:32s} encode: {cc.encode.n_ops:3.0f} kernels, {cc.encode.bytes / 2**20:7.2f} MiB moved; "
          f"decode per received payload: {cc.decode_per_worker.n_ops:.0f} kernels")
select_bw = sim_codec.rates(cluster).bw[sim_codec.CLASSES.index("select")]
slow = cluster._replace(codec=Codec(select=select_bw / 10, source="what-if: 10x slower selection"))
for gbit in (1, 100):
    for name, cl in (("device profile", cluster), ("10x slower select", slow)):
        cl = cl._replace(inter=cl.inter._replace(bandwidth=gbit * 1e9 / 8))
        b = predict_iteration(model, cl, BLOCKWISE, 16)
        print(f"{gbit:3d} Gbit/s  {name:20s} codec {b.codec_s * 1e3:6.1f} ms  total {b.total_s:.3f} s")

# %% [markdown]
# ## Scaling over workers
#
# Time per iteration and scaling efficiency T₁ / Tₚ (1 = perfect weak scaling) from 2 to 1024
# workers. Gather-law compressors (top-k, blockwise top-k) receive p payloads, so their
# decode and all-gather grow with p; summable ones (PowerSGD, fp16) ride an all-reduce.

# %%
workers = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
t1 = single_worker_time(model, cluster)
times = {spec: sweep(model, cluster, spec, workers) for spec in SPECS}

scale_rows = [{"compressor": spec, "workers": w, "total_s": t, "scaling_efficiency": t1 / t}
              for spec in SPECS for w, t in zip(workers, times[spec])]
save(report.scale_figure(scale_rows, f"{model} on the seed cluster (1 Gbit/s between nodes)"),
     "scaling_workers.png")   # the figure `kfsim scale` draws
for spec in SPECS:
    print(f"{spec:45s} efficiency at 16: {t1 / times[spec][3]:6.1%}   at 1024: {t1 / times[spec][-1]:6.1%}")

# %% [markdown]
# ## Scaling over bandwidth
#
# The same at 64 workers, sweeping the inter-node bandwidth from 0.1 to 400 Gbit/s.
# Compression pays where communication dominates. A summable compressor (PowerSGD) gains
# most on slow links and stops paying once the link is fast enough that its codec cost and
# second round show; gather-law sparsifiers (top-k, blockwise top-k) gain less at 64
# workers, because every worker receives — and decodes — all 64 payloads.

# %%
gbps = np.array([0.1, 0.3, 1, 3, 10, 25, 100, 400])
by_bw = {spec: sweep(model, cluster, spec, [64], bandwidths=gbps * 1e9 / 8)[:, 0] for spec in SPECS}
fig, ax = plt.subplots(figsize=(plotstyle.NARROW, 3.8))
ax.axhline(1, color=plotstyle.REFERENCE, lw=0.8, label="none() (the baseline)")
speedups = {spec: by_bw["none()"] / by_bw[spec] for spec in SPECS if spec != "none()"}
for spec, sp in speedups.items():
    ax.plot(gbps, sp, label=spec, **plotstyle.series(SPECS.index(spec)))
plotstyle.log_if_spans(ax, "x", gbps)
plotstyle.log_if_spans(ax, "y", np.concatenate([[1.0], *speedups.values()]))
ax.set_xlabel("inter-node bandwidth [Gbit/s]")
ax.set_ylabel("speedup over uncompressed [×]")
ax.set_title(f"{model}, 64 workers")
plotstyle.legend_below(fig, ncols=2)
save(fig, "scaling_bandwidth.png")

# %% [markdown]
# ## The advisor map
#
# `kfsim advise` answers *where does this compressor pay off?* — speedup over uncompressed
# across bandwidth × workers. The same functions the command uses:

# %%
from kfsim.cli.advise_cmd import advise_grid

bws = [0.1, 0.5, 1, 5, 10, 25, 100, 400]
ws = [2, 4, 8, 16, 64, 256, 1024]
speedup, t_comp, t_base, regime = advise_grid(model, cluster, BLOCKWISE, bws, ws)
report.plot_heatmap(OUT / "advise.png", speedup, bws, ws, f"{BLOCKWISE} vs none() — {model}")
print("wrote", OUT / "advise.png")
pays = speedup > 1
print(f"pays in {pays.sum()}/{pays.size} settings; best {speedup.max():.2f}×; "
      f"highest bandwidth where it pays: {max(b for b, row in zip(bws, pays) if row.any()):g} Gbit/s")

# %% [markdown]
# ## Simulated training: time to accuracy
#
# `kfsim.train` runs data-parallel SGD with *real numerics* — N workers compute gradients on
# their shards of real Fashion-MNIST batches and exchange them through the compressor's
# protocol — while a simulated clock advances by the timing simulator's iteration time.
# Accuracy per step comes from the numerics, seconds per step from the cluster, so
# time-to-accuracy weighs both.
#
# 4 workers, one per node on 1 Gbit/s Ethernet (a cluster profile written to a TOML file,
# the format `kfsim calibrate` produces — see `docs/formats.md`).

# %%
from kfsim.catalog import config as cfgmod
from kfsim.train import loop
from kfsim.train.config import RunConfig

profile = cfgmod.dump_profile(catalog.make_cluster("rtx3090", gpus_per_node=1, nodes=4, inter="1gbe"),
                              OUT / "cluster_4x1_1gbe.toml")
print(profile.read_text()[:400], "...")

TARGET = 0.78
runs = {}
for spec in ["none()", "powersgd(rank=2)", BLOCKWISE]:
    cfg = RunConfig(task="fmnist-mlp", compressor=spec, workers=4, batch=128, lr=0.1, steps=300,
                    eval_every=25, target_accuracy=TARGET, cluster=str(profile))
    runs[spec] = loop.run(cfg)
    s = runs[spec].summary
    tta = "not reached" if s["time_to_accuracy_s"] is None else f"{s['time_to_accuracy_s']:.3f} s (step {s['time_to_accuracy_step']})"
    print(f"{spec:45s} acc {s['final_accuracy']:.3f}  {s['time_per_iteration_s'] * 1e3:6.2f} ms/iter  "
          f"{s['bytes_per_worker'] / 1e6:7.1f} MB sent  time to {TARGET:.0%}: {tta}  (wall {s['wall_s']:.0f} s)")

# %%
fig, (a1, a2) = plt.subplots(1, 2, figsize=(plotstyle.WIDE, 3.3), sharey=True)
for spec, r in runs.items():
    ev = [s for s in r.steps if s.accuracy is not None]
    style = plotstyle.series(SPECS.index(spec) if spec in SPECS else len(SPECS))
    a1.plot([s.step + 1 for s in ev], [100 * s.accuracy for s in ev], label=spec, **style)
    a2.plot([s.extra["sim_clock_s"] for s in ev], [100 * s.accuracy for s in ev], **style)
for a in (a1, a2):
    a.axhline(100 * TARGET, color=plotstyle.REFERENCE, lw=1, ls=":", label=f"target {TARGET:.0%}")
a1.set_ylabel("test accuracy [%]")
a1.set_xlabel("training step")
a2.set_xlabel("simulated training time [s]")
plotstyle.log_if_spans(a2, "x", [s.extra["sim_clock_s"] for r in runs.values() for s in r.steps])
plotstyle.legend_below(fig)
fig.suptitle("Fashion-MNIST MLP, 4 workers on 1 Gbit/s: accuracy per step and per simulated second")
save(fig, "time_to_accuracy.png")
assert all(r.summary["final_accuracy"] > 0.7 for r in runs.values())
assert runs[BLOCKWISE].summary["sim_time_s"] < runs["none()"].summary["sim_time_s"]

# %% [markdown]
# Next, **notebook 3** runs the same compressor in a real 2-process MindSpore job and puts
# its measured step time next to the simulator's prediction.
