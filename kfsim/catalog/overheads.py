"""Fixed costs a real data-parallel stack pays besides compute, codec and bytes on the wire.

Per iteration with p > 1 workers (``kfsim.sim.predict`` / ``kfsim.sim.sweep``):

* ``collective_s`` — per collective *call* (each all-reduce / all-gather of a bucket's round
  that carries bytes): the communication library's launch and the framework's dispatch (c10d
  work object, stream sync). Added to that call's time on the communication stream.
* ``tensor_s`` — per gradient *tensor*: the autograd hook that marks it ready and copies it
  into its bucket (one copy kernel). Added to its bucket's device work before the bucket is
  launched, so a model of 300 small tensors pays 300 × ``tensor_s`` where one of 3 pays 3 ×.
* ``step_s`` — fixed per step: the reducer's prepare-for-backward / finalize (rebuilding
  bucket views, the final wait), on the device stream after the last decode.

Defaults are stated assumptions, not measurements of any part: ``tensor_s`` = one GPU kernel
launch (5 µs, ``kfsim.catalog.devices.GPU_LAUNCH_S``: the bucket copy), ``collective_s`` = two
launches (10 µs: the collective kernel and the framework's dispatch), ``step_s`` = 50 µs.
Override them per profile in ``[cluster.overheads]`` (µs keys, docs/formats.md) or set them
to 0 to get the bare α–β model. The compute/communication interference λ is
``Cluster.interference`` (default :data:`DEFAULT_INTERFERENCE`).
"""
from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

# λ: backward slowdown while communication overlaps it. Agarwal, Wang, Venkataraman,
# Papailiopoulos, "On the Utility of Gradient Compression in Distributed Training Systems",
# MLSys 2022, measured 1.04–1.1 for overlapped DDP all-reduce on V100 clusters; 1.05 is the
# lower-middle of that range (a default, override per profile with `interference`).
DEFAULT_INTERFERENCE = 1.05


class Overheads(NamedTuple):
    collective_s: float = 10e-6              # per collective call (2 × GPU_LAUNCH_S)
    tensor_s: float = 5e-6                   # per gradient tensor (GPU_LAUNCH_S) (hook + copy into its bucket)
    step_s: float = 50e-6                    # fixed per step (reducer prepare / finalize)


NO_OVERHEADS = Overheads(0.0, 0.0, 0.0)


class OverheadsCfg(BaseModel):
    """``[cluster.overheads]`` of a profile file, in microseconds."""

    model_config = ConfigDict(extra="forbid")
    collective_us: float = Field(10.0, ge=0, description="µs per collective call")
    tensor_us: float = Field(5.0, ge=0, description="µs per gradient tensor")
    step_us: float = Field(50.0, ge=0, description="µs fixed per step")

    def build(self) -> Overheads:
        return Overheads(self.collective_us / 1e6, self.tensor_us / 1e6, self.step_us / 1e6)


def overheads_dict(o: Overheads) -> dict:
    """The ``[cluster.overheads]`` table of ``o`` (inverse of :meth:`OverheadsCfg.build`)."""
    return {"collective_us": o.collective_s * 1e6, "tensor_us": o.tensor_s * 1e6, "step_us": o.step_s * 1e6}
