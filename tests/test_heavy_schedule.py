"""The suite's scheduler: a heavy module never goes to a worker while another holds one."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.heavy_schedule import HeavyAwareScheduling

HEAVY = {"tests/h1.py", "tests/h2.py", "tests/h3.py"}


class FakeNode:
    def __init__(self, name):
        self.name, self.queue, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices):
        self.queue.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def fake_config(tmp_path):
    return SimpleNamespace(rootpath=tmp_path, option=SimpleNamespace(loadscopereorder=True),
                           getvalue=lambda name: ["2*popen"] if name == "tx" else None)


def run(modules, tmp_path):
    """Drive a whole run step by step; return, per step, which nodes held a heavy module with
    tests still pending, and the order each node ran its modules in."""
    sched = HeavyAwareScheduling(fake_config(tmp_path), is_heavy=lambda p: str(
        Path(p).relative_to(tmp_path)) in HEAVY)
    collection = [f"{m}::t{i}" for m, n in modules for i in range(n)]
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    holders, order = [], {n.name: [] for n in nodes}
    while any(n.queue for n in nodes):
        for node in nodes:  # the workers advance in lock step, one test each
            if node.queue:
                nodeid = collection[node.queue.pop(0)]
                module = nodeid.split("::")[0]
                if not order[node.name] or order[node.name][-1] != module:
                    order[node.name].append(module)
                sched.mark_test_complete(node, collection.index(nodeid))
        holders.append({n.name for n in nodes for s, unit in sched.assigned_work[n].items()
                        if s in HEAVY and not all(unit.values())})
    assert sched.tests_finished
    return holders, order


def test_heavy_modules_stay_on_one_worker_at_a_time(tmp_path):
    modules = [("tests/h1.py", 4), ("tests/l1.py", 9), ("tests/h2.py", 3), ("tests/l2.py", 8),
               ("tests/h3.py", 5), ("tests/l3.py", 2), ("tests/l4.py", 6)]
    holders, order = run(modules, tmp_path)
    assert max(len(h) for h in holders) == 1  # never two workers with heavy work pending
    ran = [m for seq in order.values() for m in seq]
    assert sorted(ran) == sorted(m for m, _ in modules)  # every module ran once, whole
    assert any(m in HEAVY for m in order["gw0"]) and any(m not in HEAVY for m in order["gw1"])


def test_plain_loadfile_would_overlap_heavy_modules(tmp_path, monkeypatch):
    """The same run under xdist's own loadfile order does put heavy modules on both
    workers at once (so the test above can fail)."""
    modules = [("tests/h1.py", 9), ("tests/h2.py", 8), ("tests/l1.py", 3), ("tests/h3.py", 2)]
    monkeypatch.setattr(HeavyAwareScheduling, "_assign_work_unit",
                        HeavyAwareScheduling.__mro__[1]._assign_work_unit)
    holders, _ = run(modules, tmp_path)
    assert max(len(h) for h in holders) == 2


def test_only_heavy_modules_left_still_runs_them_all(tmp_path):
    holders, order = run([("tests/h1.py", 3), ("tests/h2.py", 3), ("tests/h3.py", 3)], tmp_path)
    assert sorted(m for seq in order.values() for m in seq) == sorted(HEAVY)
