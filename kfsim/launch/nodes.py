"""Multi-node jobs: which ranks a node runs, where its scheduler is, and msrun's command.

    cluster(workers=4, nodes=2, node_rank=1, master_addr="10.0.0.1") -> Cluster
    check_network(c)        # before any process starts
    msrun_argv(msrun, c, log_dir) -> msrun's options

One ``kfsim launch`` per machine ("node"), all with the same ``--workers``
(the total), ``--nodes``, ``--master-addr`` and ``--master-port``, each with its
own ``--node-rank``. Node R runs ranks ``R*local .. R*local + local - 1``
(``local = workers / nodes``: msrun's ``--local_worker_num``, and the global
rank msrun gives them). msrun starts the scheduler on the machine that owns
``--master-addr`` (it asks the kernel, not the node rank), so node 0 must run
there and no other node may. The master port is fixed and shared
(:data:`DEFAULT_MASTER_PORT` unless given): node 0's scheduler listens on it,
the others connect to it (and node 0's launcher on the next port, for
:mod:`kfsim.launch.nodelink`); it must avoid mccl's data ports ``8118 + 256*rank``,
which every rank opens on its own machine.

Single-node jobs (``nodes == 1``) keep what they always did: a free master
port on the loopback, no address options.
"""
from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import NamedTuple

DEFAULT_MASTER_PORT = 7118      # below mccl's data ports 8118 + 256*rank for any rank count
DATA_PORT0, DATA_PORT_STRIDE = 8118, 256
CONNECT_TIMEOUT_S = 3.0


def link_port(master_port: int) -> int:
    """The launchers' port on node 0 (:mod:`kfsim.launch.nodelink`), beside the scheduler's."""
    return master_port + 1


class Cluster(NamedTuple):
    workers: int                 # all ranks, over every node
    nodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def local(self) -> int:
        """Ranks this node runs (msrun's ``--local_worker_num``)."""
        return self.workers // self.nodes

    @property
    def ranks(self) -> range:
        """The global ranks of this node's workers."""
        return range(self.node_rank * self.local, (self.node_rank + 1) * self.local)

    @property
    def multi(self) -> bool:
        return self.nodes > 1

    @property
    def manifest_node(self) -> int | None:
        """The node a checkpoint set manifest is per (None: one node, one manifest per step)."""
        return self.node_rank if self.multi else None

    @property
    def has_rank0(self) -> bool:
        """This node runs rank 0, which writes the run record."""
        return self.node_rank == 0


def data_port_clash(port: int, workers: int) -> int | None:
    """The rank whose mccl data ports (8118 + 256*rank, with a margin) ``port`` falls in, else None."""
    r = (port - DATA_PORT0 + 16) // DATA_PORT_STRIDE  # the rank whose ports start at or just above port
    return r if 0 <= r <= workers and port >= DATA_PORT0 - 16 else None


def cluster(workers: int, nodes: int = 1, node_rank: int = 0, master_addr: str | None = None,
            master_port: int | None = None) -> Cluster:
    """The node's part of the job; ValueError (one line) for a combination msrun cannot run."""
    if not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"--nodes must be a positive int, got {nodes!r}")
    if not isinstance(node_rank, int) or not 0 <= node_rank < nodes:
        raise ValueError(f"--node-rank must be in 0..{nodes - 1} for --nodes {nodes}, got {node_rank!r}")
    if nodes == 1:
        if master_addr is not None or master_port is not None:
            raise ValueError("--master-addr and --master-port are for multi-node jobs (--nodes > 1); "
                             "a single-node job picks a free local port itself")
        return Cluster(workers)
    if not isinstance(workers, int) or workers < nodes or workers % nodes:
        raise ValueError(f"--workers {workers} (the total over all nodes) must be a multiple of --nodes {nodes}: "
                         "every node runs the same number of ranks")
    if not master_addr:
        raise ValueError(f"--nodes {nodes} needs --master-addr: the address of node 0, which runs the scheduler")
    port = DEFAULT_MASTER_PORT if master_port is None else master_port
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"--master-port must be in 1..65535, got {port!r}")
    if port == 65535:
        raise ValueError("--master-port must be below 65535: the launchers' link uses the next port")
    clash = data_port_clash(port, workers)
    if clash is None:
        clash = data_port_clash(link_port(port), workers)
    if clash is not None:
        raise ValueError(f"--master-port {port} collides with rank {clash}'s mccl data ports ({DATA_PORT0} + "
                         f"{DATA_PORT_STRIDE}*rank; the launchers' link takes port {link_port(port)}); choose e.g. "
                         f"{DEFAULT_MASTER_PORT}")
    return Cluster(workers, nodes, node_rank, master_addr, port)


def resolve(addr: str) -> str:
    """``addr``'s IP address (as msrun resolves it); ValueError when it does not resolve."""
    try:
        return socket.getaddrinfo(addr.strip("[]"), None, socket.AF_UNSPEC, socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise ValueError(f"--master-addr {addr!r} does not resolve to an address ({exc})") from None


def _family(ip: str) -> int:
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def is_local(ip: str) -> bool:
    """Whether ``ip`` is an address of this machine (a socket can bind to it)."""
    with socket.socket(_family(ip), socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, 0))
        except OSError:
            return False
    return True


def check_network(c: Cluster) -> None:
    """Before any process starts: node 0 owns ``master_addr`` and its port is free there; any
    other node does not own it and reaches it (a refused connection is fine: node 0's
    scheduler may not listen yet). ValueError naming the problem."""
    if not c.multi:
        return
    ip = resolve(c.master_addr)
    where = f"--master-addr {c.master_addr}" + (f" ({ip})" if ip != c.master_addr else "")
    if c.has_rank0:
        if not is_local(ip):
            raise ValueError(f"{where} is not an address of this machine: node 0 runs the scheduler on it, "
                             "so run --node-rank 0 on the machine that has that address")
        for port in (c.master_port, link_port(c.master_port)):  # the scheduler's and the launchers' link
            with socket.socket(_family(ip), socket.SOCK_STREAM) as s:
                if port != c.master_port:  # bound as the link's Listener binds it: an earlier job's
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT does not block it
                try:
                    s.bind((ip, port))
                except OSError as exc:
                    what = "--master-port" if port == c.master_port else \
                        f"--master-port {c.master_port} + 1 (the launchers' link),"
                    raise ValueError(f"{what} {port} on {ip} is not free ({exc.strerror}); "
                                     "choose another and pass the same one to every node") from None
        return
    if is_local(ip):
        raise ValueError(f"{where} is an address of this machine, so msrun would start a second scheduler "
                         f"here: node rank {c.node_rank} must run on another machine than node 0")
    with socket.socket(_family(ip), socket.SOCK_STREAM) as s:
        s.settimeout(CONNECT_TIMEOUT_S)
        try:
            s.connect((ip, c.master_port))
        except ConnectionRefusedError:
            return  # the machine answers; its scheduler is not listening yet
        except socket.timeout:
            raise ValueError(f"master {ip}:{c.master_port} is unreachable from this machine (no answer in "
                             f"{CONNECT_TIMEOUT_S:g} s: down, or a firewall drops the port)") from None
        except OSError as exc:
            name = errno.errorcode.get(exc.errno, "")
            raise ValueError(f"master {ip}:{c.master_port} is unreachable from this machine "
                             f"({exc.strerror or name})") from None


def msrun_argv(msrun: str, c: Cluster, log_dir: Path, master_port: int) -> list[str]:
    """msrun and its options (the worker script and its arguments follow) for this node;
    ``master_port``: the single-node job's free port (multi-node: ``c.master_port``)."""
    argv = [msrun, f"--worker_num={c.workers}", f"--local_worker_num={c.local}"]
    if c.multi:
        argv += [f"--node_rank={c.node_rank}", f"--master_addr={c.master_addr}", f"--master_port={c.master_port}"]
    else:
        argv += [f"--master_port={master_port}"]
    return argv + [f"--log_dir={log_dir}", "--join=True", "--cluster_time_out=120",
                   f"--tail_worker_log={c.workers}"]  # no rank has this id: no `tail -f` processes (they outlive msrun)
