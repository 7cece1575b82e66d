"""The static plan of a compressed exchange: the rounds of each tensor
(:class:`Round`: its aggregation :class:`Law`, the bits a worker sends), the
collective calls (per DDP bucket, round and law) and the bits each worker
contributes (the laws' semantics: ``compressors.core``).
:meth:`compressors.core.Compressor.exchange_plan` builds it; every driver,
the simulator and the run records read their bytes from it."""
from __future__ import annotations

import enum
from typing import NamedTuple


class Law(str, enum.Enum):
    """How the payloads of one round combine across workers."""

    SUM = "sum"
    GATHER = "gather"
    MAX = "max"
    SCATTER = "scatter"


class Round(NamedTuple):
    """Static description of one communication round for one tensor."""

    law: Law
    bits: int  # exact bits this worker puts on the wire in this round
    max_workers: int = 0  # the sum is exact for at most this many workers (integer headroom); 0: any
    shard: bool = False   # bits are the whole tensor's; this worker sends its 1/n shard of them


class Collective(NamedTuple):
    """One collective call of an exchange: round ``round`` of bucket ``bucket``
    for the leaves ``leaves`` whose payloads follow ``law`` in that round;
    ``bits`` is what one worker contributes."""

    bucket: int
    round: int
    law: Law
    leaves: tuple[int, ...]
    bits: int


class ExchangePlan(NamedTuple):
    """Static description of a compressed exchange of a whole pytree."""

    leaf_rounds: tuple[tuple[Round, ...], ...]   # per leaf (flattened order)
    buckets: tuple[tuple[int, ...], ...]         # leaf indices, bucket 0 (first ready) first
    collectives: tuple[Collective, ...]          # in the order every worker issues them

    @property
    def n_rounds(self) -> int:
        return max((len(p) for p in self.leaf_rounds), default=0)

    def check_workers(self, n: int) -> None:
        """The ValueError for n workers beyond a round's integer headroom (``Round.max_workers``)."""
        cap = min((r.max_workers for p in self.leaf_rounds for r in p if r.max_workers), default=0)
        if cap and n > cap:
            raise ValueError(f"this compressor's integer sums have headroom for at most {cap} "
                             f"workers, the exchange has {n} (raise its workers= parameter)")

    @property
    def payload_bits(self) -> int:
        """:meth:`payload_bits_at` one worker (a shard round counted whole)."""
        return self.payload_bits_at(1)

    def payload_bits_at(self, n: int) -> int:
        """Bits one of n workers hands to the collectives (a shard round: its ⌈1/n⌉ share)."""
        shard = {(i, r) for i, p in enumerate(self.leaf_rounds) for r, rnd in enumerate(p) if rnd.shard}
        total = 0
        for c in self.collectives:
            part = sum(self.leaf_rounds[i][c.round].bits for i in c.leaves if (i, c.round) in shard)
            total += c.bits - part + -(-part // max(int(n), 1))
        return total

    @property
    def payload_bytes(self) -> int:
        return self.payload_bits // 8

    def bits_per_round(self) -> list[int]:
        out = [0] * self.n_rounds
        for c in self.collectives:
            out[c.round] += c.bits
        return out
