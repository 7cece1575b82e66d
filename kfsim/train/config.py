"""Configuration of one simulated training run (validated; JSON round-trip)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import compressors
from kfsim.train import optim, tasks

MODES = ("sync", "async")
GRAD_MODES = ("loop", "vmap")
EXCHANGES = ("loop", "vmap")
BACKENDS = ("jax",)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    task: str = "fmnist-mlp"
    compressor: str = "none()"            # a spec string or a Compressor (kept as its spec; value in .comp)
    workers: int = 4
    batch: int = 128              # global batch; worker r takes samples [r::workers]
    lr: float = 0.1
    momentum: float = 0.0
    steps: int = 200              # sync: iterations; async: applied updates
    seed: int = 0
    eval_every: int = 50          # evaluate on the test split every this many steps (and at the end)
    limit_train: int | None = None
    limit_test: int | None = None
    target_accuracy: float | None = None
    backend: str = "jax"                  # the ops binding (its top_k uses a Numba kernel on CPU)
    grad_mode: str = "loop"               # per-worker gradients: "loop" (unrolled) or "vmap"
    exchange: str = "loop"                # the runner's workers: "loop" (a list) or "vmap" (one jax.vmap over workers)
    server_compressor: str | None = None  # parameter-server mode: compress the reply too (spec or Compressor)
    collective: str | None = None         # timing: ring, tree, rhd, hierarchical, ps, mccl (default: cluster's)
    cluster: str = "nodes"                # "nodes": one RTX 3090 per node on 1 GbE; "seed"; a profile file
    bandwidth_gbit: float | None = None   # override the cluster's inter-node bandwidth
    mode: str = "sync"
    staleness: int | None = None          # async: None = fully async, 0 = synchronous rounds, s = SSP bound
    jitter: float = 0.0                   # async: compute time x LogNormal(0, jitter)
    local_steps: int | None = None        # local SGD / DiLoCo: H inner steps per sync (kfsim.train.local)
    outer_lr: float = 1.0                 # local SGD: outer learning rate
    outer_momentum: float = 0.0           # local SGD: outer Nesterov momentum
    fragments: int = 1                    # local SGD: streaming fragments F (H % F == 0)
    overlap_steps: int = 0                # local SGD: inner steps each exchange overlaps (< H / F)

    def __post_init__(self):
        # the configuration is a boundary: specs are parsed here, once; inside, values travel
        for field, attr in (("compressor", "comp"), ("server_compressor", "server_comp")):
            value = getattr(self, field)
            comp = None if value is None else compressors.parse(value)
            object.__setattr__(self, attr, comp)
            if comp is not None and not isinstance(value, str):
                object.__setattr__(self, field, comp.spec)
        tasks.check(self.task)
        for name in ("workers", "batch", "steps", "eval_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.batch % self.workers:
            raise ValueError(f"batch {self.batch} must be divisible by workers {self.workers} (equal shards)")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        optim.check(self.lr, self.momentum)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.grad_mode not in GRAD_MODES:
            raise ValueError(f"grad_mode must be one of {GRAD_MODES}, got {self.grad_mode!r}")
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {self.exchange!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.mode == "async" and self.exchange != "loop":
            raise ValueError("async mode uses exchange='loop' (one worker at a time)")
        if self.staleness is not None and (not isinstance(self.staleness, int) or self.staleness < 0):
            raise ValueError(f"staleness must be None or an int >= 0, got {self.staleness!r}")
        if self.mode == "sync" and self.staleness is not None:
            raise ValueError("staleness applies to mode='async' only")
        if self.mode == "async" and self.server_compressor is not None:
            raise ValueError("server_compressor is supported in sync (parameter-server) mode only")
        if not (self.jitter >= 0 and math.isfinite(self.jitter)):
            raise ValueError(f"jitter must be >= 0, got {self.jitter!r}")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise ValueError(f"target_accuracy must be in (0, 1], got {self.target_accuracy!r}")
        if self.bandwidth_gbit is not None and not (self.bandwidth_gbit > 0):
            raise ValueError(f"bandwidth_gbit must be > 0, got {self.bandwidth_gbit!r}")
        self._check_local()

    def _check_local(self) -> None:
        object.__setattr__(self, "local", None)
        if self.local_steps is None:
            local_algo(None, self.outer_lr, self.outer_momentum, self.fragments, self.overlap_steps)
            return
        from kfsim.train import models

        algo = local_algo(self.local_steps, self.outer_lr, self.outer_momentum, self.fragments, self.overlap_steps,
                          len(models.get(tasks.TASKS[self.task]).shapes))
        for bad, why in ((self.mode != "sync", "mode='sync'"), (self.exchange != "loop", "exchange='loop'"),
                         (self.grad_mode != "loop", "grad_mode='loop'"),
                         (self.server_compressor is not None, "no server_compressor")):
            if bad:
                raise ValueError(f"local_steps (local SGD) needs {why}")
        object.__setattr__(self, "local", algo)

    def replace(self, **kw) -> "RunConfig":
        return dataclasses.replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        return cls(**d)


def local_algo(local_steps: int | None, outer_lr: float = 1.0, outer_momentum: float = 0.0, fragments: int = 1,
               overlap_steps: int = 0, tensors: int | None = None):
    """The checked :class:`compressors.outer.LocalSGD` of these settings (``kfsim train`` and
    ``kfsim launch`` alike), or None for per-step exchange (``local_steps`` None; then the
    outer settings must be their defaults). ValueError naming a bad value."""
    from compressors.outer import LocalSGD

    algo = LocalSGD(1 if local_steps is None else local_steps, outer_lr, outer_momentum, fragments, overlap_steps)
    if local_steps is None:
        if algo != LocalSGD():
            raise ValueError("outer_lr, outer_momentum, fragments and overlap_steps apply to local SGD only: "
                             "set local_steps (--local-steps H)")
        return None
    return algo.check(tensors)
