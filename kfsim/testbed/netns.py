"""An emulated cluster: one Linux network namespace per worker, a bridge, shaped links.

Layout (nothing is created in the host's own namespace except the namespace
names themselves under /run/netns)::

    kfsim-w0 (eth0 10.213.47.1) ─veth─ h0 ┐
    kfsim-w1 (eth0 10.213.47.2) ─veth─ h1 ├─ br0   (all inside namespace kfsim-hub)
    ...                                   ┘

Every link is shaped on *both* ends with a token bucket (``tc tbf``): the
worker's eth0 limits what it sends, the hub-side peer what it receives, so
each worker has ``rate`` up and ``rate`` down, like a host on a switch port.
An optional one-way ``latency`` (half on each end) and ``loss`` are added by
a ``netem`` child of the tbf. The token bucket holds
``burst = max(32 KiB, rate / 250)`` bytes (≥ one timer tick of data at HZ = 250).

Teardown deletes the namespaces (which destroys their veths, bridge and
qdiscs) after killing any process still inside them; it is idempotent and
also removes leftovers of a crashed earlier run (anything named ``kfsim-``).
A file lock keeps two testbeds from running at once.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "kfsim-"
HUB = PREFIX + "hub"
SUBNET = "10.213.47"          # private /24, only ever configured inside our namespaces
LOCK = Path("/tmp/kfsim-testbed.lock")
MAX_WORKERS = 32


@dataclass(frozen=True)
class Shape:
    """One link's shaping: ``rate_mbit`` Mbit/s per direction, one-way ``latency_ms``, ``loss_pct``."""

    rate_mbit: float
    latency_ms: float = 0.0
    loss_pct: float = 0.0

    def __post_init__(self):
        if not self.rate_mbit > 0:
            raise ValueError(f"rate_mbit must be > 0, got {self.rate_mbit}")
        if not self.latency_ms >= 0:
            raise ValueError(f"latency_ms must be >= 0, got {self.latency_ms}")
        if not 0 <= self.loss_pct < 100:
            raise ValueError(f"loss_pct must be in [0, 100), got {self.loss_pct}")

    @property
    def bytes_per_s(self) -> float:
        return self.rate_mbit * 1e6 / 8

    @property
    def burst_bytes(self) -> int:
        return int(max(32 * 1024, self.bytes_per_s / 250))


def check_root() -> None:
    """Raise a clear error unless we are root with ``ip`` and ``tc`` available."""
    if os.geteuid() != 0:
        raise PermissionError("the testbed needs root (network namespaces, veth, tc); run as root")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise FileNotFoundError(f"the testbed needs the '{tool}' command (package iproute2)")


def available() -> tuple[bool, str]:
    """(True, "") when a testbed can be built here, else (False, reason)."""
    try:
        check_root()
    except (PermissionError, FileNotFoundError) as exc:
        return False, str(exc)
    return True, ""


def require() -> None:
    """Exit with one line naming why, when no testbed can be built here (for scripts)."""
    ok, why = available()
    if not ok:
        raise SystemExit(f"needs network namespaces (root): {why}")


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"command failed ({r.returncode}): {' '.join(args)}\n{r.stderr.strip()}")
    return r


def namespaces(prefix: str = PREFIX) -> list[str]:
    """Names of existing network namespaces starting with ``prefix``."""
    out = _run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(prefix)]


def ns_pids(ns: str) -> list[int]:
    out = _run("ip", "netns", "pids", ns, check=False).stdout
    return [int(x) for x in out.split() if x.isdigit()]


def kill_ns_processes(ns: str, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, every process inside namespace ``ns`` (all were started by the testbed)."""
    pids = ns_pids(ns)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
            time.sleep(0.05)
        if not pids:
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def teardown(prefix: str = PREFIX) -> list[str]:
    """Kill processes in, then delete, every namespace named ``prefix*``. Idempotent.
    Returns the namespaces removed."""
    gone = []
    for ns in namespaces(prefix):
        kill_ns_processes(ns)
        _run("ip", "netns", "del", ns, check=False)
        gone.append(ns)
    return gone


def worker_ns(i: int) -> str:
    return f"{PREFIX}w{i}"


def worker_ip(i: int) -> str:
    return f"{SUBNET}.{i + 1}"


def shape_cmds(ns: str, dev: str, shape: Shape) -> list[list[str]]:
    """tc commands shaping egress of ``dev`` in ``ns``: tbf (rate) with a netem child (delay/loss)."""
    rate = f"{shape.rate_mbit * 1000:.0f}kbit"
    cmds = [["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:",
             "tbf", "rate", rate, "burst", str(shape.burst_bytes), "latency", "200ms"]]
    if shape.latency_ms > 0 or shape.loss_pct > 0:
        netem = ["netem", "limit", "100000"]
        if shape.latency_ms > 0:
            netem += ["delay", f"{shape.latency_ms / 2 * 1000:.0f}us"]
        if shape.loss_pct > 0:
            netem += ["loss", f"{shape.loss_pct}%"]
        cmds.append(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "parent", "1:1",
                     "handle", "10:"] + netem)
    return cmds


class Testbed:
    __test__ = False  # not a pytest class

    """Context manager: ``with Testbed(4, Shape(200)) as tb: tb.exec(i, cmd)``.

    Builds on enter (after removing stale ``kfsim-`` leftovers), tears down on
    exit, on exceptions and on SIGINT/SIGTERM (turned into KeyboardInterrupt
    / SystemExit so ``__exit__`` runs)."""

    def __init__(self, workers: int, shape: Shape | None = None):
        if not 1 <= int(workers) <= MAX_WORKERS:
            raise ValueError(f"workers must be in 1..{MAX_WORKERS}, got {workers}")
        self.workers = int(workers)
        self.shape = shape
        self._lock_fd = None
        self._old_term = None

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        check_root()
        self._lock_fd = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise RuntimeError(f"another kfsim testbed is running (lock {LOCK})") from None
        try:
            self._old_term = signal.signal(signal.SIGTERM, _raise_exit)
        except ValueError:  # not the main thread
            self._old_term = None
        try:
            teardown()
            self._build()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._release()

    def _release(self) -> None:
        try:
            teardown()
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def _build(self) -> None:
        _run("ip", "netns", "add", HUB)
        _run("ip", "-n", HUB, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", HUB, "link", "set", "br0", "up")
        _run("ip", "-n", HUB, "link", "set", "lo", "up")
        for i in range(self.workers):
            ns = worker_ns(i)
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", HUB, "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "-n", HUB, "link", "set", f"h{i}", "master", "br0")
            _run("ip", "-n", HUB, "link", "set", f"h{i}", "up")
            _run("ip", "-n", ns, "addr", "add", f"{worker_ip(i)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        if self.shape is not None:
            self.reshape(self.shape)

    def supports_netem(self) -> bool:
        """Whether this kernel has the netem qdisc (latency/loss); probed on the hub's loopback."""
        r = _run("ip", "netns", "exec", HUB, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                 check=False)
        _run("ip", "netns", "exec", HUB, "tc", "qdisc", "del", "dev", "lo", "root", check=False)
        return r.returncode == 0

    def reshape(self, shape: Shape) -> None:
        """Change every link's shaping in place (between runs, keeping the namespaces)."""
        if (shape.latency_ms > 0 or shape.loss_pct > 0) and not self.supports_netem():
            raise RuntimeError("this kernel has no netem qdisc (sch_netem): added latency and loss are "
                               "unavailable; use latency_ms=0, loss_pct=0")
        self.shape = shape
        for i in range(self.workers):
            for cmd in shape_cmds(worker_ns(i), "eth0", shape) + shape_cmds(HUB, f"h{i}", shape):
                _run(*cmd)
            if shape.latency_ms == 0 and shape.loss_pct == 0:
                for ns, dev in ((worker_ns(i), "eth0"), (HUB, f"h{i}")):
                    _run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "parent", "1:1", check=False)

    # -- use -----------------------------------------------------------------------
    def ns(self, i: int) -> str:
        return worker_ns(i)

    def ip(self, i: int) -> str:
        return worker_ip(i)

    def exec_argv(self, i: int, argv: list[str]) -> list[str]:
        """The argv that runs ``argv`` inside worker i's namespace."""
        return ["ip", "netns", "exec", worker_ns(i)] + list(argv)

    def qdiscs(self, i: int) -> str:
        """``tc qdisc show`` of worker i's eth0 (for checks and logs)."""
        return _run("ip", "netns", "exec", worker_ns(i), "tc", "qdisc", "show", "dev", "eth0").stdout


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)
