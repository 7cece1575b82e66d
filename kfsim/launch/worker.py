"""One msrun worker: data-parallel training of a kfsim model with a compressed reducer.

Run by ``msrun`` (never directly). Conventions shared with the simulator
(``kfsim.train``): parameters from ``init_params(model, seed)``; global batch t
is ``Batches(N, batch, seed).indices(t)``; worker r of n trains on samples
``[r::n]`` of it; compressor keys from (seed, step, rank); the recorded loss is
the mean of the n workers' shard losses; bytes_sent is the compressor's exact
wire bytes per step (``none()``'s for the native all-reduce).

Each rank touches ``<run_dir>/hb.rank<r>`` every step (the launcher's liveness
check) and, when checkpointing, saves ``<ckpt>/rank<r>.step<t>.ckpt`` holding
the network, the optimizer and the reducer (compressor state + step).
With ``--local-steps H`` it runs local SGD / DiLoCo instead (:mod:`kfsim.launch.local_worker`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _rendezvous(spec: str):
    from kfsim.launch.rendezvous import parse
    try:
        return parse(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _threads(v: str) -> int:
    if not v.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {v!r}")
    return int(v)


def op_threads(nodes: int) -> int:
    """This host's cores shared by the job's ranks on it (msrun's MS_WORKER_NUM over ``nodes``)."""
    from kfsim.launch.host import share
    return share(int(os.environ.get("MS_WORKER_NUM", "1")) // max(1, nodes))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="kfsim MindSpore worker (started by msrun)")
    p.add_argument("--spec", required=True, help="compressor spec, or 'native' for MindSpore's all-reduce")
    p.add_argument("--model", default="mlp", help="mlp | cnn | wide")
    p.add_argument("--hidden", type=int, default=2900, help="hidden width of the 'wide' benchmark MLP")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="global batch (worker r takes [r::n])")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="CPU")
    p.add_argument("--rng", default="exact")
    p.add_argument("--collective", default="auto")
    p.add_argument("--bucket-bytes", type=float, default=None,
                   help="the reducer's bucket cap, dense gradient bytes (default 25 MiB)")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--record", default=None)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--limit-test", type=int, default=2000)
    p.add_argument("--ckpt-dir", default=None)
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--resume-step", type=int, default=0)
    p.add_argument("--stop-after", type=int, default=None, help="exit after this step (tests of resume)")
    p.add_argument("--die-at", type=int, default=None, help="rank 1 exits at this step (tests)")
    p.add_argument("--perturb-at", type=int, default=None, help="rank 1 nudges a weight at this step (tests)")
    p.add_argument("--oom-at", type=int, default=None,
                   help="rank 1 runs out of memory at this step: a 2 GiB allocation under an "
                        "address-space limit 256 MiB above its size (tests)")
    p.add_argument("--fingerprint-every", type=int, default=0,
                   help="every N steps append a fingerprint of the parameters to <run_dir>/fp.rank<r>")
    p.add_argument("--changed", default=None,
                   help="JSON {hyperparameter: [checkpoint's, now]} the launcher allowed to change on resume")
    p.add_argument("--nodes", type=int, default=1,
                   help="machines the job spans; > 1: the ranks' fingerprints are all-gathered and rank 0 "
                        "writes the other nodes' ranks' too (fp.rank<r> in its run dir; all in the record)")
    p.add_argument("--local-steps", type=int, default=None, help="local SGD / DiLoCo: H inner steps per outer step")
    p.add_argument("--outer-lr", type=float, default=1.0)
    p.add_argument("--outer-momentum", type=float, default=0.0)
    p.add_argument("--fragments", type=int, default=1)
    p.add_argument("--overlap-steps", type=int, default=0)
    p.add_argument("--rendezvous", default=None, metavar="DIR:N", type=_rendezvous,
                   help="before each step after the first (compiling) one, wait until N processes "
                        "reached it in DIR (independent one-worker jobs timed under each other's contention)")
    p.add_argument("--op-threads", type=_threads, default=None,
                   help="MindSpore CPU kernel threads (default: this host's cores / the job's ranks on it; "
                        "0: MindSpore's own default)")
    p.add_argument("--import", dest="imports", action="append", default=[],
                   help="module, .py file or package folder to import first (e.g. one registering a "
                        "user compressor; kfsim.imports)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from kfsim.launch import watchdog

    watchdog.arm()  # dies with msrun and with the launcher, before anything slow
    a = parse_args(argv)
    from kfsim.imports import import_user

    for target in a.imports:
        import_user(target)
    from backends.mindspore.runtime import setup
    threads = op_threads(a.nodes) if a.op_threads is None else a.op_threads
    setup(a.device, threads or None)
    from backends.mindspore.data_parallel import kfsim_reducer  # (before init(): its NumPy start-up check)
    import mindspore as ms
    from mindspore import nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, n = get_rank(), get_group_size()
    run_dir = Path(a.run_dir)
    hb = run_dir / f"hb.rank{rank}"
    hb.write_text("start")

    from kfsim import records
    from kfsim.launch import ms_models
    from kfsim.train import models
    from kfsim.train.loop import Batches
    from kfsim.data import fashion_mnist

    if a.model == "wide":
        params = ms_models.wide_mlp_params(a.hidden, a.seed)
        net = ms_models.build_wide(params)
    else:
        params = models.init_params(a.model, a.seed)
        net = ms_models.build(a.model, params)
    xtr, ytr = fashion_mnist.load("train")
    xte, yte = fashion_mnist.load("test")
    xte, yte = xte[:a.limit_test], yte[:a.limit_test]
    batches = Batches(len(xtr), a.batch, a.seed)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=a.lr)
    values = [params[k] for k in sorted(params)]
    avals = [(v.shape, v.dtype) for v in values]

    import compressors
    from backends.mindspore import reducer as R
    from kfsim.launch import integrity
    from compressors.buckets import DEFAULT_BUCKET_BYTES
    native = a.spec == "native"
    cap = DEFAULT_BUCKET_BYTES if a.bucket_bytes is None else a.bucket_bytes
    comp = None if native else compressors.parse(a.spec)  # the worker's argv: a boundary
    dense_bytes = compressors.parse("none()").payload_bytes(R.abstract(avals))

    def make_reducer(t):
        """The run's one reducer from step t: a scheduled compressor's phases are graphs inside
        it, switched by its step counter (``kfsim_reducer``, the public API's own reducer)."""
        if native:
            return R.native_reducer(opt.parameters, n)
        return kfsim_reducer(comp, values, n=n, rank=rank, seed=a.seed, rng=a.rng, collective=a.collective,
                             bucket_bytes=cap, step=t, horizon=a.steps)

    class Container(nn.Cell):
        def __init__(self, net, opt, reducer):
            super().__init__(auto_prefix=False)
            self.net, self.opt, self.reducer = net, opt, reducer

    class MeanLoss(nn.Cell):
        def __init__(self):
            super().__init__()
            self.allreduce = ops.AllReduce()

        def construct(self, x):
            return self.allreduce(x) / n

    class Gather(nn.Cell):
        def __init__(self):
            super().__init__()
            self.allgather = ops.AllGather()

        def construct(self, x):
            return self.allgather(x)

    def make_train(reducer):
        train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
        train.grad_reducer = reducer
        train.set_train()
        return train

    start = a.resume_step
    local = None
    if a.local_steps is not None:  # local SGD / DiLoCo (kfsim.launch.local_worker)
        from kfsim.launch.local_worker import LocalStepper
        from kfsim.train.config import local_algo
        algo = local_algo(a.local_steps, a.outer_lr, a.outer_momentum, a.fragments, a.overlap_steps, len(values))
        local = LocalStepper(algo, comp, net, loss_fn, a.model, a.lr, n=n, rank=rank, seed=a.seed, rng=a.rng,
                             collective=a.collective, start=start, horizon=a.steps, bucket_bytes=cap)
        reducer = local.cell()
    else:
        reducer = make_reducer(start)
    if start:
        path = Path(a.ckpt_dir) / f"rank{rank}.step{start}.ckpt"
        not_loaded, _ = ms.load_param_into_net(Container(net, opt, reducer), ms.load_checkpoint(str(path)),
                                               strict_load=True)
        if not_loaded:
            raise RuntimeError(f"rank {rank}: checkpoint {path} lacks {not_loaded}")
        if local is not None:
            local.loaded()
    train = make_train(reducer) if local is None else None
    mean_loss = MeanLoss()
    bytes_per_step = dense_bytes if native else 0
    writer = None
    if rank == 0 and a.record:
        meta = {"compressor": a.spec, "workers": n, "model": a.model, "batch": a.batch, "lr": a.lr, "seed": a.seed,
                "op_threads": threads,   # 0: MindSpore's own default pool
                "steps": a.steps, "device": a.device, "rng": a.rng, "collective": a.collective,
                "bucket_bytes": None if native else cap,
                "resume_step": start, "nodes": a.nodes, "shards": "worker r takes samples [r::n] of each global batch"}
        if a.changed:
            import json
            meta["changed_since_checkpoint"] = json.loads(a.changed)
        if local is not None:
            meta["local"] = dict(local.algo._asdict())
        writer = records.Writer(a.record, "mindspore", meta)
    stop = a.steps if a.stop_after is None else min(a.steps, a.stop_after)
    for t in range(start, stop):
        if a.die_at is not None and t == a.die_at and rank == 1:
            os._exit(3)
        if a.oom_at is not None and t == a.oom_at and rank == 1:
            import resource
            vm = next(int(l.split()[1]) << 10 for l in open("/proc/self/status") if l.startswith("VmSize:"))
            resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
            np.empty(2 << 30, np.uint8)  # MemoryError: the address space is full
        if a.perturb_at is not None and t == a.perturb_at and rank == 1:
            w = net.trainable_params()[0]
            w.set_data(w + ms.Tensor(np.float32(1e-3)))
        if a.rendezvous and t > start:   # every step after the compiling one, as collectives would
            from kfsim.launch.rendezvous import RendezvousTimeout, arrive
            try:
                arrive(Path(a.rendezvous[0]) / f"step{t}", a.rendezvous[1])
            except RendezvousTimeout as e:
                print(f"kfsim worker: {e}", file=sys.stderr)
                return 2
        idx = batches.indices(t)
        x = ms.Tensor(xtr[idx][rank::n])
        y = ms.Tensor(ytr[idx][rank::n])
        t0, c0 = time.perf_counter(), time.process_time()
        loss = train(x, y) if local is None else local.step(x, y, t)
        g = float(mean_loss(loss).asnumpy())
        dt = time.perf_counter() - t0
        extra = {"rank_loss": float(loss.asnumpy()), "cpu_s": time.process_time() - c0}
        if local is not None:
            extra.update(local.extra)
            bytes_per_step = local.sent
        elif not native:
            extra.update(reducer.accounting(t))
            bytes_per_step = extra["payload_bytes"]
        acc = None
        if writer is not None and ((a.eval_every and (t + 1) % a.eval_every == 0) or t + 1 == a.steps):
            if local is None:
                logits = net(ms.Tensor(xte)).asnumpy()
            else:
                with local.evaluating():
                    logits = net(ms.Tensor(xte)).asnumpy()
            acc = float(np.mean(np.argmax(logits, 1) == yte))
        if a.ckpt_dir and a.ckpt_every and (t + 1) % a.ckpt_every == 0:
            Path(a.ckpt_dir).mkdir(parents=True, exist_ok=True)
            saved = Path(a.ckpt_dir) / integrity.ckpt_name(rank, t + 1)
            ms.save_checkpoint(Container(net, opt, reducer if local is None else local.cell()), str(saved))
            integrity.seal(saved)
            extra["checkpoint"] = t + 1
        if a.fingerprint_every and (t + 1) % a.fingerprint_every == 0:
            fp = integrity.fingerprint(q.asnumpy() for q in net.trainable_params()) if local is None else \
                integrity.fingerprint(local.fingerprint_arrays())  # local SGD: θ (the p_r differ between syncs)
            integrity.append_fingerprint(a.run_dir, rank, t + 1, fp)
            if a.nodes > 1:  # the other nodes' files are on their machines: gather the digests to rank 0
                words = Gather()(ms.Tensor(np.frombuffer(bytes.fromhex(fp), np.int32).copy())).asnumpy()
                fps = [w.astype(np.int32).tobytes().hex() for w in words.reshape(n, -1)]
                if rank == 0:  # node 0 runs ranks 0..n/nodes-1 itself; it gets the others' copies
                    for r in range(n // a.nodes, n):
                        integrity.append_fingerprint(a.run_dir, r, t + 1, fps[r])
                    extra["fingerprints"] = fps
        if writer is not None:
            writer.add(records.Step(t, dt, int(bytes_per_step), g, acc, extra))
        hb.write_text(str(t))
    if writer is not None:
        writer.close()
    hb.write_text("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
