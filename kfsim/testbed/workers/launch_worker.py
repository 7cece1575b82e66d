"""Start :mod:`kfsim.launch`'s worker (``kfsim/launch/worker.py``) unchanged, under our msrun.

Workaround, a no-op once fixed upstream: at the time of writing
``kfsim.launch.ms_models.build_wide`` calls ``relu`` which only exists inside
``build`` (NameError in graph mode for ``--model wide``). If the module has
no module-level ``relu``, the same function (h + |h|)/2 is supplied here.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mindspore import ops  # noqa: E402  (graph mode resolves relu's globals here)


def relu(h):
    return (h + ops.abs(h)) * 0.5


def main() -> int:
    from kfsim.launch import ms_models, worker
    if not hasattr(ms_models, "relu"):
        ms_models.relu = relu
    return worker.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
