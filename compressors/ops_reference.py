"""The ops reference (``docs/ops.md``), rendered from the docstrings of
``compressors.ops``: ``python -m compressors.ops_reference > docs/ops.md``."""
from __future__ import annotations

from compressors import ops
from compressors.fused import FUSED_NAMES, Fused
from compressors.ops import OP_NAMES, Ops


def _sections(cls, names) -> list[str]:
    import inspect

    lines = []
    for name in names:
        fn = cls.__dict__[name]
        sig = str(inspect.signature(fn)).replace("(self, ", "(").replace("(self)", "()")
        lines += [f"### `{name}{sig}`", "", inspect.cleandoc(fn.__doc__ or ""), ""]
    return lines


def reference_markdown() -> str:
    """The ops reference (docs/ops.md) rendered from the docstrings above."""
    import inspect

    lines = ["# The ops namespace (reference)", "",
             "Generated from `compressors/ops.py` by `python -m compressors.ops_reference > docs/ops.md`;",
             "a test fails when this file and the code disagree.", "",
             inspect.cleandoc(ops.__doc__ or ""), "", "## Operations", ""]
    lines += _sections(Ops, OP_NAMES)
    lines += ["## Fused operations", "", inspect.cleandoc(Fused.__doc__ or ""), ""]
    lines += _sections(Fused, FUSED_NAMES)
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference_markdown(), end="")
