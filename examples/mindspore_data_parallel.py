"""A plain MindSpore data-parallel script with a kfsim compressor as its gradient reducer.

    python examples/mindspore_data_parallel.py [--compressor SPEC] [--steps N] [--workers N]
    msrun --worker_num=2 --local_worker_num=2 examples/mindspore_data_parallel.py   # the same, by hand

Run plainly, the script starts itself under this interpreter's ``msrun``
with ``--workers`` processes (default 2) and prints rank 0's log. Each rank
trains the same MLP (``set_seed``: identical initial weights) on its shard
of a synthetic teacher task; the one kfsim line is
``train.grad_reducer = kfsim_reducer(spec, opt.parameters)``. It fails
unless the loss falls and every rank ends with the same parameters. ~30 s on CPU.
"""
from __future__ import annotations


def train(args) -> None:
    import numpy as np

    from backends.mindspore import kfsim_reducer   # importing it is the only kfsim set-up
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, n = get_rank(), get_group_size()
    ms.set_seed(0)
    rng = np.random.default_rng(0)                # the same global data on every rank
    x = rng.standard_normal((64 * n, 32)).astype(np.float32)
    y = (np.tanh(x @ rng.standard_normal((32, 32))) @ rng.standard_normal((32, 10))).argmax(1).astype(np.int32)
    xs, ys = ms.Tensor(x[rank::n]), ms.Tensor(y[rank::n])  # this rank's shard

    net = nn.SequentialCell(nn.Dense(32, 64), nn.Tanh(), nn.Dense(64, 10))
    opt = nn.SGD(net.trainable_params(), learning_rate=args.lr, momentum=0.9)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")), opt)
    step.grad_reducer = kfsim_reducer(args.compressor, opt.parameters)
    step.set_train()

    losses = [float(step(xs, ys).asnumpy()) for _ in range(args.steps)]
    acct = step.grad_reducer.accounting(args.steps - 1)  # the last step's payload/wire bytes, collectives
    print(f"rank {rank}/{n} {args.compressor}: {acct}; loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    class Gather(nn.Cell):
        def __init__(self):
            super().__init__()
            self.gather = ops.AllGather()

        def construct(self, v):
            return self.gather(v)

    mine = np.concatenate([p.asnumpy().ravel() for p in net.trainable_params()]).astype(np.float32)
    every = Gather()(ms.Tensor(mine.reshape(1, -1))).asnumpy()
    if not np.array_equal(every[0], every[-1]):
        raise SystemExit(f"rank {rank}: replicas differ (max |diff| {np.abs(every[0] - every[-1]).max():.3g})")
    if not losses[-1] < losses[0]:
        raise SystemExit(f"rank {rank}: loss did not fall: {losses[0]:.4f} -> {losses[-1]:.4f}")


def main() -> None:
    from kfsim.launch.selfstart import example_parser, run_example
    args = example_parser(__doc__, compressor="ef(topk(ratio=0.05))", steps=30, lr=0.1).parse_args()
    run_example(train, args, __file__)   # a rank: train(args); run plainly: itself under msrun


if __name__ == "__main__":
    main()
