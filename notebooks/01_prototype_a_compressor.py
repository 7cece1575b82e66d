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
# # 1 · Prototype a compressor
#
# A kfsim compressor is a small set of pure functions written against the **ops namespace**
# (`compressors.ops.Ops`, 34 operations with exact semantics): no array library is imported,
# so the same definition runs on JAX, NumPy/Numba and MindSpore, in the simulator's
# training loop and in a real multi-process job.
#
# This notebook writes a compressor that is *not* in the library — **blockwise top-k** —
# checks its contract on real gradients (a JAX MLP on Fashion-MNIST), wraps it in error
# feedback and compares it with built-ins. Notebook 2 takes it into the cluster simulator,
# notebook 3 to MindSpore.

# %%
import matplotlib.pyplot as plt
import numpy as np

from kfsim.sim import plotstyle  # how kfsim's figures look (colours, log axes, units)
from nbfigures import figures  # notebooks/nbfigures.py: OUT folder and save(fig, name)

OUT, save = figures("01_prototype")


# %% [markdown]
# ## The ops namespace
#
# A compressor sees only `ops.<op>` plus array operators (`+ - * /`, comparisons, static
# slicing). Every size is a static Python int, so payloads have static shapes and compile
# under `jax.jit` and MindSpore graph mode. The full reference is `docs/ops.md`.

# %%
import compressors
from compressors.ops import OP_NAMES

print(len(OP_NAMES), "ops:", ", ".join(OP_NAMES))

# %% [markdown]
# ## The compressor
#
# Top-k keeps the k largest entries of the whole tensor and sends a 32-bit index with each
# value. *Blockwise* top-k keeps the k largest of every block of B entries instead: the
# selection is local (no global sort) and an index inside a block needs only ⌈log₂ B⌉ bits,
# packed with `ops.pack_bits`. It is a δ-contraction with δ = k/B.
#
# It is one `Leaf` built by `single_round` (a one-round protocol from a compress /
# decompress pair) inside a `Compressor`. It lives in the module
# `notebooks/blockwise_topk.py` — one definition, which notebooks 2 and 3 import too;
# the cell below imports it (registering the spec name `blockwise_topk`) and prints it.

# %%
import inspect

import blockwise_topk as blockwise_topk_module
from blockwise_topk import block_plan, blockwise_topk  # registers "blockwise_topk"

print(inspect.getsource(blockwise_topk_module))

# %% [markdown]
# Its plan gives the exact wire bits per round; compare with top-k at (about) the same
# density on the MLP's tensors. Note the 10-entry bias `b2`: one block, and k = 3 of it kept.

# %%
from kfsim.train import models

shapes = models.get("mlp").shapes
bt = blockwise_topk(ratio=0.01, block=256)
tk = compressors.topk(ratio=0.01)
for name, shape in shapes.items():
    nb, k, b = block_plan(0.01, 256, int(np.prod(shape)))
    print(f"{name:3s} {str(shape):11s} blocks={nb:4d} k/block={k} index bits={b}  "
          f"blockwise {bt.wire_bits(shape):8d} bits (ratio {bt.ratio(shape):5.1f}×)   "
          f"top-k {tk.wire_bits(shape):8d} bits (ratio {tk.ratio(shape):5.1f}×)")
print(bt.plan(shapes["w1"]))
nb, k, b = block_plan(0.01, 256, 784 * 256)
kept_topk = int(np.ceil(0.01 * 784 * 256))
print(f"w1: blockwise keeps {nb * k} entries at {bt.wire_bits(shapes['w1']) / (nb * k):.0f} bits each, "
      f"top-k keeps {kept_topk} at {tk.wire_bits(shapes['w1']) / kept_topk:.0f} bits each")
assert bt.wire_bits(shapes["w1"]) == nb * k * (32 + 8)  # a float32 value + an 8-bit local index

# %% [markdown]
# ## Real gradients
#
# Gradients of kfsim's MLP (784-256-10, `kfsim.train.models`) on real Fashion-MNIST batches
# (`kfsim.data.fashion_mnist`), taken along a short SGD trajectory so they are the gradients
# of a model that is learning, not only at initialisation.

# %%
import jax
import jax.numpy as jnp

import backends
from compressors.core import make_keys
from kfsim.data import fashion_mnist

x_train, y_train = fashion_mnist.load("train")
params = {k: jnp.asarray(v) for k, v in models.init_params("mlp", seed=0).items()}
grad_fn = jax.jit(jax.grad(lambda p, x, y: models.loss("mlp", p, x, y)))

rng = np.random.default_rng(0)
grads = []
for t in range(24):
    idx = rng.choice(len(x_train), 128, replace=False)
    g = grad_fn(params, x_train[idx], y_train[idx])
    grads.append(g)
    params = jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)
grads = [{k: np.asarray(v) for k, v in g.items()} for g in grads]
print(len(grads), "gradients;", {k: v.shape for k, v in grads[0].items()})

# The measurements below use the NumPy/Numba binding of the ops namespace: nothing to
# compile per compressor configuration. (Its threefry adds uint32 words with wrap-around
# on purpose; NumPy warns about that overflow.)
import warnings
warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
ops = backends.get("numpy")


def flat(tree):
    return np.concatenate([np.asarray(v, np.float64).ravel() for v in jax.tree_util.tree_leaves(tree)])


def roundtrip_fn(comp):
    """One worker's compress → decompress (n = 1) of a gradient dict at step t."""
    def run(g, t):
        out, _ = compressors.roundtrip(ops, comp, g, comp.init(ops, g), make_keys(ops, 0, t))
        return out
    return run


# %% [markdown]
# First, the definition against a plain NumPy reference (sort each block, keep k), and the
# same bits from the JAX binding under `jax.jit` — the compressor is backend-neutral by
# construction:

# %%
import inspect

from blockwise_topk import reference  # sort each block, keep its k largest (kept beside the compressor)

print(inspect.getsource(reference))

out = roundtrip_fn(bt)(grads[-1], 0)
for name in grads[-1]:
    assert np.array_equal(np.asarray(out[name]), reference(np.asarray(grads[-1][name]), 0.01, 256)), name

jops = backends.get("jax")
run_jax = jax.jit(lambda g: compressors.roundtrip(jops, bt, g, bt.init(jops, g), make_keys(jops, 0, 0))[0])
out_jax = run_jax(grads[-1])
for name in grads[-1]:
    assert np.array_equal(np.asarray(out_jax[name]), np.asarray(out[name])), name
print("matches the NumPy reference; the JAX and NumPy/Numba bindings agree bit for bit")


# %% [markdown]
# ## The contract, measured
#
# For a compressor C and gradient g (all tensors together), over M random keys:
#
# * **bias**: ‖E[C(g)] − g‖ / ‖g‖, estimated with M draws; an unbiased compressor shows only
#   the Monte-Carlo noise floor √(err / M);
# * **error**: err = E‖C(g) − g‖² / ‖g‖²; a δ-contraction has err ≤ 1 − δ on *every* input,
#   so the measured δ is 1 − (largest err over the gradients).
#
# The compressors state their contract (`unbiased`, `contractive`); the table checks it.

# %%
def total_ratio(comp, tree):
    dense = sum(int(np.prod(v.shape)) * 32 for v in tree.values())
    return dense / sum(r.bits for plan in comp.tree_plan(tree) for r in plan)


def measure(comp, gs, draws):
    run = roundtrip_fn(comp)
    errs, biases, floors = [], [], []
    for g in gs:
        x = flat(g)
        outs = np.stack([flat(run(g, s)) for s in range(draws)])
        err = np.mean(np.sum((outs - x) ** 2, axis=1)) / np.sum(x**2)
        errs.append(err)
        biases.append(np.linalg.norm(outs.mean(0) - x) / np.linalg.norm(x))
        floors.append(np.sqrt(err / draws))
    return {"ratio": total_ratio(comp, gs[0]), "err": float(np.mean(errs)), "worst_err": float(np.max(errs)),
            "bias": float(np.mean(biases)), "floor": float(np.mean(floors))}


CANDIDATES = {
    "blockwise_topk(1%, B=256)": bt,
    "topk(1%)": compressors.topk(ratio=0.01),
    "randomk(1%)": compressors.randomk(ratio=0.01),
    "randomk(1%, unscaled)": compressors.randomk(ratio=0.01, scale=False),
    "quantize(4 bit)": compressors.quantize(bits=4),
    "powersgd(rank 2, no EF)": compressors.powersgd(rank=2, ef=False),
}
sample = grads[::12]
results = {}
print(f"{'compressor':26s} {'ratio':>7s} {'err':>9s} {'bias':>9s} {'noise':>8s}  claims → measured")
for label, comp in CANDIDATES.items():
    r = measure(comp, sample, draws=16)
    r["delta"] = 1 - r["worst_err"]
    r["unbiased_measured"] = r["bias"] <= 3 * r["floor"]
    results[label] = r
    claims = ("unbiased " if comp.unbiased else "") + ("contractive" if comp.contractive else "")
    seen = ("unbiased " if r["unbiased_measured"] else "biased ") + (f"δ={r['delta']:.3f}" if r["delta"] > 0 else "not a contraction")
    print(f"{label:26s} {r['ratio']:7.1f} {r['err']:9.4f} {r['bias']:9.4f} {r['floor']:8.4f}  {claims or '—':20s} → {seen}")
    if comp.unbiased:
        assert r["unbiased_measured"], label
    if comp.contractive:
        assert r["delta"] > 0, label

nb, k, b = block_plan(0.01, 256, 784 * 256)
print(f"blockwise top-k: guaranteed δ = k/B = {k / 256:.4f}, measured δ = {results['blockwise_topk(1%, B=256)']['delta']:.4f}")
assert results["blockwise_topk(1%, B=256)"]["delta"] >= k / 256

# %% [markdown]
# Blockwise top-k keeps far more than its guaranteed k/B of the energy: gradients are
# heavy-tailed, so a block's largest entries carry most of it. Per kept entry, global top-k
# does a little better (it spends its whole budget where the energy is), but a blockwise
# entry costs 40 bits instead of 64, so at the same wire size blockwise top-k keeps more
# entries. The ratio–error trade-off over several densities:

# %%
SWEEP = {
    "blockwise top-k": [blockwise_topk(ratio=r, block=256) for r in (0.004, 0.01, 0.03, 0.1)],
    "top-k": [compressors.topk(ratio=r) for r in (0.004, 0.01, 0.03, 0.1)],
    "random-k (unscaled)": [compressors.randomk(ratio=r, scale=False) for r in (0.01, 0.03, 0.1)],
    "quantize": [compressors.quantize(bits=b) for b in (2, 4, 8)],
    "PowerSGD": [compressors.powersgd(rank=r, ef=False) for r in (1, 2, 4, 8)],
}
curves = {name: [measure(c, grads[-1:], draws=1) for c in comps] for name, comps in SWEEP.items()}

fig, ax = plt.subplots(figsize=(plotstyle.NARROW, 3.6))
for i, (name, rs) in enumerate(curves.items()):
    ax.plot([r["ratio"] for r in rs], [100 * r["err"] for r in rs], label=name,
            **plotstyle.series(i), lw=2.4 if name == "blockwise top-k" else 1.2)
plotstyle.log_if_spans(ax, "x", [r["ratio"] for rs in curves.values() for r in rs])
plotstyle.log_if_spans(ax, "y", [r["err"] for rs in curves.values() for r in rs])
ax.set_xlabel("compression ratio, dense bits / wire bits [×]")
ax.set_ylabel("relative error ‖C(g) − g‖² / ‖g‖² [%]")
ax.set_title("MLP gradients on Fashion-MNIST: ratio against error")
ax.legend(loc="lower right")
save(fig, "ratio_vs_error.png")


# %% [markdown]
# ## Error feedback
#
# A biased compressor drops information every step. Error feedback (`compressors.ef`) keeps
# the residual e and compresses p = g + e next time, so Σₜ C(pₜ) + e_T = Σₜ gₜ: nothing is
# lost, only delayed. Below, each compressor runs along the gradient stream with its state
# carried from step to step; the plot shows how far the sum of what was transmitted is from
# the sum of the true gradients.

# %%
def transmitted_gap(comp, gs):
    """‖Σ C_t − Σ g_t‖ / ‖Σ g_t‖ after each step, state carried along."""
    def step(g, state, t):
        return compressors.roundtrip(ops, comp, g, state, make_keys(ops, 0, t))

    state = comp.init(ops, gs[0])
    sent = np.zeros_like(flat(gs[0]))
    true = np.zeros_like(sent)
    gaps = []
    for t, g in enumerate(gs):
        out, state = step(g, state, t)
        sent += flat(out)
        true += flat(g)
        gaps.append(np.linalg.norm(sent - true) / np.linalg.norm(true))
    return np.array(gaps)


ef_bt = compressors.ef(bt)
print("spec:", ef_bt.spec)
gaps = {
    "blockwise top-k": transmitted_gap(bt, grads),
    "ef(blockwise top-k)": transmitted_gap(ef_bt, grads),
    "top-k": transmitted_gap(tk, grads),
    "ef(top-k)": transmitted_gap(compressors.ef(tk), grads),
}
fig, ax = plt.subplots(figsize=(plotstyle.NARROW, 3.4))
for name, gap in gaps.items():   # colour: the compressor; solid with error feedback, dashed without
    ef = name.startswith("ef(")
    ax.plot(np.arange(1, len(gap) + 1), 100 * gap, label=name, markersize=3.5,
            color=plotstyle.COLORS[0 if "blockwise" in name else 1], marker="o" if ef else "s",
            linestyle="-" if ef else "--", markerfacecolor="white" if not ef else None)
ax.set_xlabel("training step")
ax.set_ylabel("‖Σ sent − Σ true‖ / ‖Σ true‖ [%]")
ax.set_title("error feedback: what is not sent now is sent later")
ax.legend(loc="lower left")
save(fig, "error_feedback.png")
for name, gap in gaps.items():
    print(f"{name:22s} after {len(gap)} steps: {gap[-1]:.3f}")
assert gaps["ef(blockwise top-k)"][-1] < gaps["blockwise top-k"][-1]

# %% [markdown]
# The compressor is ready: `notebooks/blockwise_topk.py` registers it, so the spec string
# `ef(blockwise_topk(ratio=0.01, block=256))` works wherever kfsim takes one. Next:
# **notebook 2** predicts what it buys on a cluster.
