"""docs/ops.md is generated from compressors/ops.py and must not drift."""
from pathlib import Path

from compressors.ops import OP_NAMES
from compressors.ops_reference import reference_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "ops.md"


def test_ops_reference_is_up_to_date():
    assert DOC.read_text() == reference_markdown(), "regenerate: python -m compressors.ops_reference > docs/ops.md"


def test_namespace_is_small_and_documented():
    assert 25 <= len(OP_NAMES) <= 40
    text = DOC.read_text()
    for name in OP_NAMES:
        assert f"### `{name}(" in text
