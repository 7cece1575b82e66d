"""The launchers of a multi-node job tell each other at once when their part fails.

    link = open_link(cluster, log)     # before msrun starts; None for a single-node job
    ... supervise.watch(..., poll=link.poll)   # "node 1 failed: rank 1 ... SIGKILL ..."
    link.finish(err)                   # err None: this node's ranks finished

Without it a rank that dies on node 1 is noticed on node 0 only through
MindSpore's scheduler heartbeat, ~30 s later, and the message blames "rank 1
stopped responding". Node 0's launcher listens on ``master_port + 1``
(:func:`link_port`) of ``--master-addr``; every other node's launcher connects
to it (retrying until node 0 is up) and says which node it is. Each side sends
one message when its part ends: ``{"node": R, "error": why}`` or ``{"node": R, "done": true}``; node 0
passes an error on to every other node. A connection that closes without a
message means that launcher was killed (its watchdog takes its ranks down with
it), which ends the job too. Messages are JSON over
:mod:`multiprocessing.connection` (framed, with an authentication key shared by
the job's launchers: it keeps other jobs' launchers out, it is not a secret).

Where the link cannot be made (IPv6, node 0 unreachable on its port) the job
still runs and MindSpore's heartbeat is the fallback; ``log`` says so once.
"""
from __future__ import annotations

import json
import os
import queue
import socket
import threading
import time
from multiprocessing.connection import Client, Listener

from kfsim.launch.nodes import link_port, resolve

RETRY_S = 0.25


def _key(c) -> bytes:
    return f"kfsim-launch:{c.workers}:{c.nodes}:{c.master_port}".encode()


class NodeLink:
    """One node's end of the launchers' link; see the module docstring."""

    def __init__(self, cluster, log=None):
        self.c, self.log = cluster, log or (lambda msg: None)
        self.events: queue.Queue = queue.Queue()
        self.conns: list = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.finished: set[int] = set()
        self.listener = None
        addr = (cluster.master_addr, link_port(cluster.master_port))
        if cluster.has_rank0:
            self.listener = Listener(addr, "AF_INET", authkey=_key(cluster))
            threading.Thread(target=self._accept, daemon=True, name="kfsim-link-accept").start()
        else:
            threading.Thread(target=self._connect, args=(addr,), daemon=True, name="kfsim-link-connect").start()

    # --------------------------------------------------------------- threads
    def _accept(self):
        while not self.closed.is_set():
            try:
                conn = self.listener.accept()
            except Exception:  # closed; or a peer with another job's key, a port scan (AuthenticationError, EOF)
                if self.closed.is_set():
                    return
                continue
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True, name="kfsim-link-read").start()

    def _connect(self, addr):
        while not self.closed.is_set():
            try:
                conn = Client(addr, "AF_INET", authkey=_key(self.c))
            except Exception:  # not listening yet (refused), or another job's link (AuthenticationError)
                time.sleep(RETRY_S)
                continue
            try:
                conn.send_bytes(json.dumps({"node": self.c.node_rank}).encode())  # hello: node 0 knows who
            except OSError:
                time.sleep(RETRY_S)
                continue
            with self.lock:
                self.conns.append(conn)
            self._read(conn)
            return

    def _read(self, conn):
        node = None
        while True:
            try:
                msg = json.loads(conn.recv_bytes())
            except Exception:  # EOF, a reset, junk; or our own end hung up (finish)
                if not self.closed.is_set() and (node is None or node not in self.finished):
                    self.events.put((node, None))  # went away without a word: killed
                return
            node = msg.get("node", node)
            if msg.get("done"):
                self.finished.add(node)
            elif "error" in msg:
                self.finished.add(node)
                self.events.put((node, str(msg["error"])))
                if self.c.has_rank0:
                    self._send({"node": node, "error": msg["error"]}, skip=conn)

    def _send(self, msg: dict, skip=None):
        with self.lock:
            conns = [c for c in self.conns if c is not skip]
        for conn in conns:
            try:
                conn.send_bytes(json.dumps(msg).encode())
            except OSError:
                pass

    # --------------------------------------------------------------- the launcher's calls
    def poll(self) -> str | None:
        """Why another node's part failed (one sentence), once it has; else None."""
        try:
            node, why = self.events.get_nowait()
        except queue.Empty:
            return None
        if why is None:
            who = "node 0's launcher" if node is None and not self.c.has_rank0 else \
                f"node {node}'s launcher" if node is not None else "another node's launcher"
            return f"{who} went away without finishing (killed, or its machine is down)"
        return f"node {node} failed: {why}"

    def finish(self, err: str | None) -> None:
        """Tell the other launchers how this node's part ended, then close the link."""
        self._send({"node": self.c.node_rank, "error": err} if err else {"node": self.c.node_rank, "done": True})
        self.closed.set()
        time.sleep(0.05)  # let the last message leave before the sockets close
        with self.lock:
            conns, self.conns = self.conns, []
        for conn in conns:
            hangup(conn)
        if self.listener is not None:
            self.listener.close()


def hangup(conn) -> None:
    """Shut ``conn``'s socket down for both ends (a thread blocked reading it wakes with EOF), then close it."""
    try:
        with socket.socket(fileno=os.dup(conn.fileno())) as s:
            s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def open_link(cluster, log=None) -> NodeLink | None:
    """This node's link for a multi-node job (None for one node, or where it cannot be made)."""
    if not cluster.multi:
        return None
    ip = resolve(cluster.master_addr)
    if ":" in ip:
        if log is not None:
            log("the launchers' link is IPv4 only: a rank dying on another node is noticed by MindSpore's "
                "~30 s heartbeat")
        return None
    try:
        return NodeLink(cluster._replace(master_addr=ip), log)
    except OSError as exc:  # node 0: the port is taken (check_network tests it first)
        raise ValueError(f"the launchers' link port {link_port(cluster.master_port)} on {ip} is not free "
                         f"({exc.strerror}); choose another --master-port (the link uses the next one)") from None
