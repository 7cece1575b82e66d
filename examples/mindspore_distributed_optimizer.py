"""MindSpore 2.x functional training (``value_and_grad`` + ``@ms.jit``) with a kfsim ``DistributedOptimizer``.

    python examples/mindspore_distributed_optimizer.py [--compressor SPEC] [--steps N] [--workers N]
    msrun --worker_num=2 --local_worker_num=2 examples/mindspore_distributed_optimizer.py   # by hand

The one kfsim line wraps the optimizer, as Horovod's ``DistributedOptimizer``
does: ``opt = DistributedOptimizer(nn.Adam(...), compression=spec)``; then
``opt(grads)`` exchanges the gradients through the compressor and applies the
decoded mean. Run plainly, the script starts itself under this
interpreter's ``msrun`` with ``--workers`` ranks (default 2). Each rank fits a
linear model to its shard of a noisy synthetic regression with PowerSGD
(rank 2, error feedback). It saves and reloads a checkpoint half way (the
compressor's EF residuals and warm-start Q are in it) and fails unless the
loss falls and every rank ends with the same parameters. ~30 s on CPU.
"""
from __future__ import annotations

import os
import tempfile


def train(args) -> None:
    import numpy as np

    from backends.mindspore import DistributedOptimizer   # importing it is the only kfsim set-up
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, n = get_rank(), get_group_size()
    ms.set_seed(0)
    rng = np.random.default_rng(1)                  # the same global data on every rank
    x = rng.standard_normal((128 * n, 48)).astype(np.float32)
    w_true = rng.standard_normal((48, 24)).astype(np.float32)
    y = x @ w_true + 0.1 * rng.standard_normal((128 * n, 24)).astype(np.float32)
    xs, ys = ms.Tensor(x[rank::n]), ms.Tensor(y[rank::n])  # this rank's shard

    net = nn.Dense(48, 24)
    opt = DistributedOptimizer(nn.Adam(net.trainable_params(), learning_rate=args.lr),
                               compression=args.compressor)
    loss_fn = nn.MSELoss()

    def forward(a, b):
        return loss_fn(net(a), b)

    grad_fn = ms.value_and_grad(forward, None, opt.parameters)

    @ms.jit
    def train_step(a, b):
        loss, grads = grad_fn(a, b)
        opt(grads)                                  # compress, exchange, decode, Adam update
        return loss

    class Everything(nn.Cell):                      # what a checkpoint holds: net, Adam, kfsim state
        def __init__(self):
            super().__init__(auto_prefix=False)
            self.net, self.opt = net, opt

    half = args.steps // 2
    losses = [float(train_step(xs, ys).asnumpy()) for _ in range(half)]
    ckpt = os.path.join(tempfile.gettempdir(), f"kfsim-example-rank{rank}-{os.getpid()}.ckpt")
    ms.save_checkpoint(Everything(), ckpt)
    names = {p.name for p in Everything().get_parameters()}
    assert any(".residual" in k for k in names) and "kfsim.step" in names, sorted(names)
    ms.load_param_into_net(Everything(), ms.load_checkpoint(ckpt), strict_load=True)
    os.remove(ckpt)
    losses += [float(train_step(xs, ys).asnumpy()) for _ in range(args.steps - half)]
    acct = opt.accounting(args.steps - 1)
    print(f"rank {rank}/{n} {args.compressor}: {acct}; loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    mine = np.concatenate([p.asnumpy().ravel() for p in net.trainable_params()]).astype(np.float32)
    every = ops.AllGather()(ms.Tensor(mine.reshape(1, -1))).asnumpy()
    if not all(np.array_equal(every[0], e) for e in every):
        raise SystemExit(f"rank {rank}: replicas differ (max |diff| {np.abs(every - every[0]).max():.3g})")
    if not losses[-1] < 0.5 * losses[0]:
        raise SystemExit(f"rank {rank}: loss did not halve: {losses[0]:.4f} -> {losses[-1]:.4f}")


def main() -> None:
    from kfsim.launch.selfstart import example_parser, run_example
    args = example_parser(__doc__, compressor="powersgd(rank=2)", steps=40, lr=0.05).parse_args()
    run_example(train, args, __file__)   # a rank: train(args); run plainly: itself under msrun


if __name__ == "__main__":
    main()
