"""Data-parallel training on several JAX devices with a kfsim compressor in an optax chain.

    python examples/jax_data_parallel.py [--compressor SPEC] [--steps N] [--devices N]

Each device is one worker: it computes the gradient of its shard of the
batch, ``kfsim_compress(spec, axis_name="dp")`` exchanges it across the
devices (SUM rounds by ``lax.psum``, GATHER rounds by ``lax.all_gather``)
and every device applies the same decoded mean with SGD. On a CPU-only
machine the script asks XLA for ``--devices`` host devices (default 4)
before JAX starts; on GPUs it uses the visible ones. A few seconds.
"""
from __future__ import annotations

import argparse
import os


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compressor", default="ef(topk(ratio=0.05))", help="kfsim compressor spec")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--devices", type=int, default=4, help="host devices to create on CPU")
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={args.devices}").strip()

    import jax  # only now: the device count is read when JAX starts
    import jax.numpy as jnp
    import numpy as np
    import optax

    import compressors as C
    from backends.jax.data_parallel import data_parallel_step, per_device, replicate, shard_batch
    from backends.jax.transform import kfsim_compress

    comp = C.parse(args.compressor)               # parsed once, here at the boundary
    n = jax.device_count()
    mesh = jax.make_mesh((n,), ("dp",))

    # a teacher MLP's labels on random inputs; the student is the same shape
    rng = np.random.default_rng(0)
    sizes = [(32, 64), (64, 64), (64, 10)]
    teacher = [rng.standard_normal(s).astype(np.float32) / np.sqrt(s[0]) for s in sizes]
    x = rng.standard_normal((64 * n, 32)).astype(np.float32)
    h = x
    for w in teacher[:-1]:
        h = np.tanh(h @ w)
    y = (h @ teacher[-1]).argmax(axis=1).astype(np.int32)
    params = {f"w{i}": jnp.asarray(rng.standard_normal(s).astype(np.float32) / np.sqrt(s[0]))
              for i, s in enumerate(sizes)}

    def loss_fn(p, batch):
        bx, by = batch
        for i in range(len(sizes) - 1):
            bx = jnp.tanh(bx @ p[f"w{i}"])
        logits = bx @ p[f"w{len(sizes) - 1}"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, by).mean()

    tx = optax.chain(kfsim_compress(comp, axis_name="dp", seed=0), optax.sgd(args.lr, momentum=0.9))
    step = data_parallel_step(loss_fn, tx, mesh)
    p, opt_state = replicate(params, mesh), per_device(tx.init(params), mesh)
    batch = shard_batch((x, y), mesh)

    plan = comp.exchange_plan(params)
    dense = sum(v.size * v.dtype.itemsize for v in params.values())
    print(f"{n} devices, {comp.spec}: {plan.payload_bytes} payload bytes per worker per step "
          f"({dense / max(plan.payload_bytes, 1):.1f}x less than dense), {len(plan.collectives)} collective(s)")
    first = None
    for t in range(args.steps):
        p, opt_state, loss = step(p, opt_state, batch)
        first = float(loss) if first is None else first
        if t % 20 == 0 or t == args.steps - 1:
            print(f"step {t:3d}  loss {float(loss):.4f}")
    if not float(loss) < first:
        raise SystemExit(f"loss did not fall: {first:.4f} -> {float(loss):.4f}")


if __name__ == "__main__":
    main()
