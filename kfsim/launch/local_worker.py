"""Local SGD / DiLoCo inside one msrun worker (the algorithm: :mod:`compressors.outer`).

The worker's loop (:mod:`kfsim.launch.worker`) calls :meth:`LocalStepper.step`
once per inner step t, which mirrors :mod:`kfsim.train.local` exactly:

* the inner step: MindSpore's loss and gradients at this worker's parameters
  p_r (a compiled ``nn.ForwardValueAndGrad``), then a_r ← a_r + g
  (``compressors.outer.accumulate``);
* after it, the fragment whose exchange starts at t (``LocalSGD.starts``)
  sends its pseudo-gradients a_r through the *lowered* compressed reducer
  (:func:`backends.mindspore.data_parallel.kfsim_reducer`, one per fragment,
  its step counter set to t so the keys are ``make_keys(seed, t, rank)`` and
  a scheduled compressor's phase is ``comp.phase_of(t)``, as in the
  simulation; EF and other compressor state stays in the reducer, per
  worker), and ``compressors.outer.started`` books the mean in flight;
* the fragment whose update lands at t takes the outer Nesterov step
  (``compressors.outer.land``), then p_r = θ − η (pending_r + a_r)
  (``compressors.outer.local_params``) is written into the network.

The outer-state arithmetic runs the algorithm's own code on the NumPy
backend (float32, as the simulator's). θ, the outer momentum, the mean in
flight, a_r and pending_r are ``Parameter`` s of :meth:`LocalStepper.cell`
(beside the reducers), so a checkpoint of the worker's container holds the
whole run state and resumes bit-identically. Replicas agree on θ, not on
p_r: :meth:`fingerprint_arrays` and :meth:`evaluating` use θ.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from compressors import outer as algo_mod


def tensor_names(model: str, params: dict) -> tuple:
    """The fragments' order: the simulator's forward order (sorted names for the 'wide' benchmark MLP)."""
    from kfsim.train import timing

    order = timing.FORWARD_ORDER.get(model)
    return tuple(order) if order is not None and set(order) == set(params) else tuple(sorted(params))


class LocalStepper:
    """Inner steps, outer exchanges and outer steps of one worker (see the module docstring)."""

    FIELDS = ("anchor", "momentum", "inflight", "accum", "pending")

    def __init__(self, algo: algo_mod.LocalSGD, comp, net, loss_fn, model: str, lr: float, *, n: int, rank: int,
                 seed: int, rng: str, collective: str, start: int, horizon: int,
                 bucket_bytes: float | None = None):
        import mindspore as ms
        from mindspore import nn

        import backends

        self.ms, self.algo, self.comp, self.lr = ms, algo, comp, lr
        self.np = backends.get("numpy")
        self.net, self.weights = net, list(net.trainable_params())
        host = {p.name: p.asnumpy() for p in self.weights}
        self.frags = algo_mod.fragments_of(tensor_names(model, host), algo.fragments)
        self.outer = algo_mod.init_outer(self.np, host)
        zeros = {k: np.zeros_like(v) for k, v in host.items()}
        self.worker = algo_mod.WorkerState(dict(zeros), dict(zeros), (), {})
        self.grad = nn.ForwardValueAndGrad(nn.WithLossCell(net, loss_fn), weights=net.trainable_params(),
                                           get_by_list=True)
        self.opts = dict(n=n, rank=rank, seed=seed, rng=rng, collective=collective)
        if bucket_bytes is not None:
            self.opts["bucket_bytes"] = bucket_bytes
        self.horizon = horizon
        self.reducers = [self._reducer(f, start) for f in range(len(self.frags))]
        self.holder = self._holder()
        self.sent, self.extra = 0, {}

    def _reducer(self, f: int, t: int):
        """Fragment f's reducer (a scheduled compressor's phases inside it, chosen by its step counter)."""
        from backends.mindspore.data_parallel import kfsim_reducer

        names = sorted(self.frags[f])  # the runner's leaf order (a dict flattens by sorted key)
        return kfsim_reducer(self.comp, [self.outer.anchor[k] for k in names], step=t, horizon=self.horizon,
                             prefix=f"kfsim.frag{f}", **self.opts)

    def _holder(self):
        from mindspore import Parameter, nn

        class Holder(nn.Cell):
            def __init__(self):
                super().__init__(auto_prefix=False)

        h = Holder()
        self.slots = []
        for field in self.FIELDS:
            for k in sorted(self.outer.anchor):
                setattr(h, f"p{len(self.slots)}", Parameter(self.ms.Tensor(self.outer.anchor[k]),
                                                            name=f"local.{field}.{k}", requires_grad=False))
                self.slots.append((field, k, getattr(h, f"p{len(self.slots)}")))
        return h

    def _trees(self) -> dict:
        o, w = self.outer, self.worker
        return {"anchor": o.anchor, "momentum": o.momentum, "inflight": o.inflight, "accum": w.accum,
                "pending": w.pending}

    def cell(self):
        """A Cell holding the run state (outer state, a_r, pending_r as Parameters, the reducers), synced now."""
        trees = self._trees()
        for field, k, p in self.slots:
            p.set_data(self.ms.Tensor(np.asarray(trees[field][k])))
        for f, r in enumerate(self.reducers):
            setattr(self.holder, f"r{f}", r)
        return self.holder

    def loaded(self) -> None:
        """After a checkpoint was loaded into :meth:`cell`: the run state from its Parameters."""
        trees = {f: {} for f in self.FIELDS}
        for field, k, p in self.slots:
            trees[field][k] = p.asnumpy()
        self.outer = algo_mod.OuterState(trees["anchor"], trees["momentum"], trees["inflight"])
        self.worker = self.worker._replace(accum=trees["accum"], pending=trees["pending"])
        self._write(algo_mod.local_params(self.np, self.lr, self.outer, self.worker))

    def _write(self, values: dict) -> None:
        for p in self.weights:
            p.set_data(self.ms.Tensor(np.asarray(values[p.name], np.float32)))

    def step(self, x, y, t: int):
        """Inner step t on this worker's shard (x, y), then the exchange starting and the update landing
        at t; returns this worker's loss (a Tensor). ``sent``/``extra``: step t's bytes and accounting."""
        ms, np_ops, algo = self.ms, self.np, self.algo
        loss, grads = self.grad(x, y)
        g = {p.name: gi.asnumpy() for p, gi in zip(self.weights, grads)}
        self.worker = algo_mod.accumulate(np_ops, self.worker, g, ())
        self.sent, self.extra = 0, {}
        f = algo.starts(t)
        if f is not None:
            red, names = self.reducers[f], sorted(self.frags[f])
            red.step.set_data(ms.Tensor(np.int32(t)))  # keys and phase of step t, as the simulation's
            mean = red(ms.mutable(tuple(ms.Tensor(self.worker.accum[k]) for k in names)))
            mean = {k: m.asnumpy() for k, m in zip(names, mean)}
            self.outer, (self.worker,) = algo_mod.started(np_ops, self.outer, [self.worker], names, mean)
            self.extra = {"fragment": f, **red.accounting(t)}
            self.sent = self.extra["payload_bytes"]
        h = algo.lands(t)
        if h is not None:
            self.outer, (self.worker,) = algo_mod.land(np_ops, algo, self.lr, self.outer, [self.worker],
                                                       self.frags[h])
            self.extra["landed"] = h
        self._write(algo_mod.local_params(np_ops, self.lr, self.outer, self.worker))
        return loss

    def fingerprint_arrays(self) -> list:
        """θ, which every replica holds bit for bit (their p_r differ between synchronisations)."""
        return [np.asarray(self.outer.anchor[p.name]) for p in self.weights]

    @contextmanager
    def evaluating(self):
        """The network holds θ (the model every worker agrees on, as the simulator evaluates) inside."""
        mine = {p.name: p.asnumpy() for p in self.weights}
        self._write(self.outer.anchor)
        try:
            yield self.net
        finally:
            self._write(mine)


def launch_args(local: algo_mod.LocalSGD | None, spec: str, tensors: int) -> list[str]:
    """The workers' local-SGD flags for ``local`` (none for per-step exchange), checked before any
    worker starts: ValueError for a bad setting or the native baseline (it has no pseudo-gradient path)."""
    if local is None:
        return []
    if not isinstance(local, algo_mod.LocalSGD):
        raise ValueError(f"local must be a compressors.outer.LocalSGD or None, got {local!r}")
    if spec == "native":
        raise ValueError("local SGD exchanges pseudo-gradients through a kfsim compressor: use --compressor "
                         "'none()' rather than 'native'")
    if not local.nesterov:
        raise ValueError("local SGD in a launched job uses Nesterov outer momentum (as `kfsim train`)")
    local.check(tensors)
    return ["--local-steps", str(local.local_steps), "--outer-lr", repr(float(local.outer_lr)),
            "--outer-momentum", repr(float(local.outer_momentum)), "--fragments", str(local.fragments),
            "--overlap-steps", str(local.delay)]
