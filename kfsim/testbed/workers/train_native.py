"""MindSpore worker: data-parallel training steps of an MLP with the native all-reduce.

Run by msrun, one process per testbed namespace. Configuration is JSON in
``KFSIM_TRAIN``::

    {"out": "/tmp/dir", "layers": [784, 2048, 2048, 10], "batch": 64,
     "steps": 5, "warmup": 2, "seed": 0, "compute_only": true, "native": true}

GRAPH_MODE, ``DATA_PARALLEL`` with ``gradients_mean`` and
``nn.TrainOneStepCell`` (its ``DistributedGradReducer`` all-reduces every
gradient). Each step is timed in-process (``asnumpy`` of the loss ends it)
with the worker's ``eth0`` counters around it. With ``compute_only`` the
same steps are also timed with the reducer replaced by the identity (the
compute part; the communication part is the difference); ``native: false``
skips the all-reduce steps (compute calibration only). Writes
``rank<r>.json``: ``{params, step_s: [...], compute_s: [...], tx: [...], loss: [...]}``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path


def _tx() -> int:
    f = Path("/sys/class/net/eth0/statistics/tx_bytes")
    return int(f.read_text()) if f.exists() else 0


def _collective_cell(op):
    """A compiled cell around one collective (graph mode runs collectives inside cells)."""
    from mindspore import nn

    class Meet(nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, x):
            return self.op(x)
    return Meet()


def main() -> None:
    cfg = json.loads(os.environ["KFSIM_TRAIN"])
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor, nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_device("CPU")
    if cfg.get("op_threads"):   # the host's cores split between the p ranks (kfsim.launch.host.share)
        ms.device_context.cpu.op_tuning.threads_num(int(cfg["op_threads"]))
    try:  # throw-away op before init (see mindspore.md)
        Tensor(np.zeros(4, np.float32)).reshape(2, 2)
    except SystemError:
        pass
    ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, p = get_rank(), get_group_size()
    ms.set_seed(int(cfg.get("seed", 0)))
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True, device_num=p)

    layers = [int(x) for x in cfg["layers"]]
    cells = []
    for i, (a, b) in enumerate(zip(layers[:-1], layers[1:])):
        cells.append(nn.Dense(a, b))
        if i < len(layers) - 2:
            cells.append(nn.ReLU())
    net = nn.SequentialCell(cells)
    params = sum(int(np.prod(q.shape)) for q in net.trainable_params())
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    step.set_train()

    rng = np.random.default_rng(1000 + rank)
    batch = int(cfg.get("batch", 64))
    x = Tensor(rng.standard_normal((batch, layers[0])).astype(np.float32))
    y = Tensor(rng.integers(0, layers[-1], batch).astype(np.int32))

    def timed(cell, n):
        ts, tx, losses = [], [], []
        for _ in range(n):
            c0, t0 = _tx(), time.perf_counter()
            loss = float(cell(x, y).asnumpy())
            ts.append(time.perf_counter() - t0)
            tx.append(_tx() - c0)
            losses.append(loss)
        return ts, tx, losses

    warm = int(cfg.get("warmup", 2))
    step_s, tx, loss = [], [], []
    if cfg.get("native", True):
        timed(step, warm)
        step_s, tx, loss = timed(step, int(cfg.get("steps", 5)))
    comp_s = []
    if cfg.get("compute_only", True):
        local = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
        local.grad_reducer = nn.Identity()
        local.set_train()
        timed(local, warm)
        # no collective keeps the ranks in step here: meet once, so the timed steps share the CPU as a job's do
        _collective_cell(ops.AllReduce())(Tensor(np.ones(1, np.float32))).asnumpy()
        comp_s, _, _ = timed(local, int(cfg.get("steps", 5)))
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(
        {"rank": rank, "p": p, "params": params, "layers": layers, "batch": batch,
         "step_s": step_s, "compute_s": comp_s, "tx": tx, "loss": loss}))


if __name__ == "__main__":
    main()
