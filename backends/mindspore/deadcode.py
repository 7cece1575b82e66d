"""Dead pure lines out of a generated Cell's source (``backends.mindspore.emit.build_cell``).

Rules leave names nothing reads: a host kernel that folded its input's reshape, a slice
that names one operand of a concatenation, a bfloat16 tensor whose float32 carrier every
reader takes instead. MindSpore would drop them too, but the source should say what runs.
"""
from __future__ import annotations

import re
from typing import Sequence

_ASSIGNED = re.compile(r"^([vt]\d+) = (ops\.(reshape|concat|slice|stack|cast)\(|[vt]\d+$)")  # a pure op, or a name
_NAME = re.compile(r"\b[vt]\d+\b")


def drop_unread(body: Sequence[str]) -> list[str]:
    """``body`` without the reshapes, casts, concatenations, stacks, slices and renamings no
    later line reads (a host kernel that folded its input's reshape leaves one; a slice that is
    one operand of a concatenation or stack names the operand): MindSpore would drop them
    too, but the source should say what runs."""
    read: set = set()
    keep = []
    for line in reversed(body):
        m = _ASSIGNED.match(line)
        if m and m.group(1) not in read:
            continue
        read.update(_NAME.findall(line.split(" = ", 1)[1] if _is_assignment(line) else line))
        keep.append(line)
    return keep[::-1]


def _is_assignment(line: str) -> bool:
    head = line.split(" = ", 1)[0]
    return " = " in line and all(_NAME.fullmatch(n.strip()) for n in head.split(","))
