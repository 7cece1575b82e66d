"""An xdist scheduler that keeps heavy test modules on one worker at a time.

A heavy module (``is_heavy``: it starts msrun jobs or network namespaces) holds
a lock shared by the workers while it runs (``tests/conftest.py``), so two such
modules never run at once. With xdist's plain ``loadfile`` scheduling a worker
can still be handed a heavy module while another worker runs one, and then it
waits on the lock, idle (178 s in one CI run). This scheduler hands a heavy
module to a worker only when no *other* worker has a heavy module pending, and
a light one otherwise; a worker is never left without work (if only heavy
modules remain it takes one and waits on the lock, as before).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from xdist.scheduler import LoadFileScheduling


class HeavyAwareScheduling(LoadFileScheduling):
    """``--dist loadfile`` with at most one worker holding heavy modules at a time."""

    def __init__(self, config, log=None, *, is_heavy: Callable[[Path], bool]) -> None:
        super().__init__(config, log)
        self._root = Path(str(config.rootpath))
        self._is_heavy = is_heavy

    def heavy(self, scope: str) -> bool:
        return self._is_heavy(self._root / scope)

    def _heavy_pending_elsewhere(self, node) -> bool:
        return any(other is not node and self.heavy(scope) and not all(unit.values())
                   for other, work in self.assigned_work.items() for scope, unit in work.items())

    def _assign_work_unit(self, node) -> None:
        wanted = not self._heavy_pending_elsewhere(node)
        pick = next((s for s in self.workqueue if self.heavy(s) == wanted), None)
        if pick is not None:
            self.workqueue.move_to_end(pick, last=False)  # the parent pops the queue's first unit
        super()._assign_work_unit(node)
