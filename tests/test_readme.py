"""The README's generated parts stay in sync with the code."""
from pathlib import Path

from kfsim.cli.compressors_cmd import markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_compressor_table_matches_the_registry():
    text = README.read_text()
    start, end = "<!-- compressors-table:start -->", "<!-- compressors-table:end -->"
    table = text[text.index(start) + len(start): text.index(end)].strip()
    assert table == markdown().strip(), "regenerate with: kfsim compressors --markdown"


def test_quickstart_is_exactly_two_commands():
    text = README.read_text()
    section = text[text.index("## Quickstart"): text.index("## One compressor")]
    fences = section.split("```bash")[1:]
    commands = [f.split("```")[0].strip() for f in fences]
    assert commands == ["bash .ci/setup && .venv/bin/kfsim scale", ".venv/bin/python -m pytest"]


def test_ci_runs_the_two_commands():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash .ci/setup" in ci and ".venv/bin/kfsim scale" in ci and ".venv/bin/python -m pytest" in ci
