"""MindSpore worker: time AllReduce / AllGather of given sizes, count the bytes each puts on the wire.

Run by msrun, one process per testbed namespace. Configuration comes as JSON
in the environment variable ``KFSIM_BENCH``::

    {"out": "/tmp/dir", "sizes": [4096, 1048576], "ops": ["allreduce", "allgather"],
     "repeats": 5, "warmup": 1, "graph": true}

Each collective runs inside a compiled Cell (GRAPH_MODE, as in training;
``graph: false`` times the PyNative op instead, which on CPU adds a large
per-call overhead at high link rates).

``sizes`` are bytes per rank of float32 payload (for all-gather: bytes each
rank contributes). For each (op, size) the worker runs ``warmup`` untimed
calls, a small all-reduce as barrier, then ``repeats`` timed calls, each
synchronised with ``asnumpy()``, reading its own ``eth0`` counters around
every call. It writes ``rank<r>.json``: a list of records
``{op, bytes, p, times: [...], tx: [...], rx: [...], packets: [...]}``.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _counters():
    base = Path("/sys/class/net/eth0/statistics")
    if not base.exists():
        return 0, 0, 0
    return tuple(int((base / f).read_text()) for f in ("tx_bytes", "rx_bytes", "tx_packets"))


def _peer_bytes() -> dict:
    """Bytes acked per remote address:port from ``ss -tin`` (this namespace's TCP sockets)."""
    import subprocess
    out = subprocess.run(["ss", "-tinH"], capture_output=True, text=True).stdout.splitlines()
    res, peer = {}, None
    for line in out:
        f = line.split()
        if f and f[0] in ("ESTAB", "CLOSE-WAIT", "FIN-WAIT-1", "FIN-WAIT-2", "LAST-ACK", "TIME-WAIT"):
            peer = f"{f[3]}>{f[4]}"
        elif peer is not None:
            for key in ("bytes_acked", "bytes_received"):
                for tok in f:
                    if tok.startswith(key + ":"):
                        res.setdefault(peer, {})[key] = int(tok.split(":")[1])
    return res


def main() -> None:
    cfg = json.loads(os.environ["KFSIM_BENCH"])
    import numpy as np
    import mindspore as ms
    from mindspore import Tensor, ops
    from mindspore.communication import get_group_size, get_rank, init

    ms.set_device("CPU")
    try:  # throw-away op before init (NumPy-2 first-call error, see mindspore.md)
        Tensor(np.zeros(4, np.float32)).reshape(2, 2)
    except SystemError:
        pass
    from mindspore import nn
    if cfg.get("graph", True):   # training runs its collectives inside compiled graphs: time them the same way
        ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, p = get_rank(), get_group_size()

    class Coll(nn.Cell):
        def __init__(self, op):
            super().__init__()
            self.op = op

        def construct(self, x):
            return self.op(x)

    allreduce, allgather = Coll(ops.AllReduce()), Coll(ops.AllGather())
    barrier_t = Tensor(np.ones(1, np.float32))

    def barrier():
        allreduce(barrier_t).asnumpy()

    records = []
    for op in cfg.get("ops", ["allreduce", "allgather"]):
        fn = allreduce if op == "allreduce" else allgather
        if op not in ("allreduce", "allgather"):
            raise ValueError(f"unknown op {op!r}")
        for nbytes in cfg["sizes"]:
            x = Tensor(np.full(max(int(nbytes) // 4, 1), rank + 1, np.float32))
            for _ in range(int(cfg.get("warmup", 1))):
                fn(x).asnumpy()
            times, tx, rx, pk = [], [], [], []
            s0 = _peer_bytes() if cfg.get("ss") else {}
            for _ in range(int(cfg.get("repeats", 5))):
                barrier()
                c0 = _counters()
                t0 = time.perf_counter()
                y = fn(x).asnumpy()
                t1 = time.perf_counter()
                c1 = _counters()
                times.append(t1 - t0)
                tx.append(c1[0] - c0[0])
                rx.append(c1[1] - c0[1])
                pk.append(c1[2] - c0[2])
            s1 = _peer_bytes() if cfg.get("ss") else {}
            peers = {k: {b: v.get(b, 0) - s0.get(k, {}).get(b, 0) for b in v} for k, v in s1.items()}
            peers = {k: v for k, v in peers.items() if any(x > 1000 for x in v.values())}
            expect = p * (p + 1) / 2 if op == "allreduce" else None
            if expect is not None and not np.allclose(y, expect):
                raise RuntimeError(f"allreduce gave {y[:4]}, expected {expect}")
            records.append({"op": op, "bytes": int(x.size) * 4, "p": p, "rank": rank,
                            "times": times, "tx": tx, "rx": rx, "packets": pk, "peers": peers})
    barrier()
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(records))


if __name__ == "__main__":
    main()
    sys.exit(0)
