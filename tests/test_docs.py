"""Every code block in the documentation runs, so the docs cannot drift from the code.

Covered: ``docs/*.md`` (except ``docs/ops.md``, generated from
``compressors/ops.py`` and checked by ``tests/test_ops_reference.py``) and the
top-level ``README.md``. Per file, in document order, in a fresh temporary
working directory:

* ```` ```python ```` blocks are executed; the blocks of one file share one
  namespace (a later block may use an earlier block's names);
* ```` ```console ```` / ```` ```bash ```` / ```` ```sh ```` blocks: every command
  that starts with ``kfsim`` is run (``$ `` prompts stripped, ``\\`` line
  continuations joined; in ``console`` blocks only ``$`` lines are commands,
  the rest is output) and must exit 0;
* ```` ```toml ```` / ```` ```yaml ```` blocks must be valid kfsim config files
  (:func:`kfsim.catalog.config.validate`, their command sections
  :func:`kfsim.cli.options.check_sections`); ```` ```json ```` must parse;
  ```` ```jsonl ```` must be a valid run record (:func:`kfsim.records.read`).

An HTML comment on the line(s) just above a fence changes that one block:

* ``<!-- doctest: file NAME -->`` — also write the block to NAME in the working
  directory (so a later command or Python block can load it);
* ``<!-- doctest: quick ARGS -->`` — append ARGS to each ``kfsim`` command of
  the block (a quick variant of a long sweep; the block as written must still
  parse as the same command);
* ``<!-- doctest: skip REASON -->`` — do not run the block (needs root, a
  device, minutes...). Use sparingly, never for a block a user is meant to copy
  as is; the reason is required.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXCLUDED = {"ops.md"}
MARKER = re.compile(r"^<!--\s*doctest:\s*(\w+)\s*(.*?)\s*-->$")
KNOWN_MARKERS = {"file", "quick", "skip"}
SHELLS = {"console", "bash", "sh", "shell"}
COMMAND_TIMEOUT_S = 240
DOC_TIMEOUT_S = 900


class Block(NamedTuple):
    lang: str
    code: str
    line: int            # 1-based line of the opening fence
    markers: dict        # marker name -> argument


def doc_files() -> list[Path]:
    files = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in EXCLUDED)
    readme = ROOT / "README.md"
    return files + ([readme] if readme.exists() else [])


def blocks(text: str, where: str = "<doc>") -> list[Block]:
    """Fenced blocks of a Markdown text with the doctest markers just above each."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        markers, j = {}, i - 1
        while j >= 0 and (mm := MARKER.match(lines[j].strip())):
            name, arg = mm.group(1), mm.group(2)
            if name not in KNOWN_MARKERS:
                raise ValueError(f"{where}:{j + 1}: unknown doctest marker {name!r} (known: {sorted(KNOWN_MARKERS)})")
            if name in ("file", "skip") and not arg:
                raise ValueError(f"{where}:{j + 1}: doctest marker {name!r} needs an argument")
            markers[name] = arg
            j -= 1
        body, k = [], i + 1
        while k < len(lines) and not lines[k].strip().startswith(fence):
            body.append(lines[k][len(indent):] if lines[k].startswith(indent) else lines[k])
            k += 1
        if k == len(lines):
            raise ValueError(f"{where}:{i + 1}: unclosed code fence")
        out.append(Block(lang, "\n".join(body) + "\n", i + 1, markers))
        i = k + 1
    return out


def shell_commands(block: Block) -> list[str]:
    """The kfsim commands of a console/bash block (prompts stripped, continuations joined)."""
    cmds, cur = [], ""
    for raw in block.code.splitlines():
        line = raw.rstrip()
        if not cur:
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            line = line.strip()
            if not line or line.startswith("#"):
                continue
        if cur:
            line = line.strip()
        if line.endswith("\\"):
            cur += line[:-1].rstrip() + " "
            continue
        cmds.append(cur + line)
        cur = ""
    if cur:
        cmds.append(cur)
    return [c.strip() for c in cmds if c.strip().split()[0] == "kfsim"]


def run_kfsim(command: str, quick: str, cwd: Path, where: str) -> None:
    args = shlex.split(command)[1:] + shlex.split(quick)
    env = dict(os.environ, MPLBACKEND="Agg", COLUMNS="160")
    proc = subprocess.run([sys.executable, "-c", "from kfsim.cli import main; main()", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert proc.returncode == 0, (f"{where}: `{command}` {'(+ ' + quick + ') ' if quick else ''}exited "
                                  f"{proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def check_data_block(block: Block, cwd: Path, where: str) -> None:
    from kfsim import records
    from kfsim.catalog import config

    from kfsim.cli.options import check_sections

    if block.lang == "toml":
        config.validate(tomllib.loads(block.code), where)
        check_sections(tomllib.loads(block.code), where)  # the [<command>] sections against the flags
    elif block.lang in ("yaml", "yml"):
        import yaml

        config.validate(yaml.safe_load(block.code) or {}, where)
        check_sections(yaml.safe_load(block.code) or {}, where)
    elif block.lang == "json":
        json.loads(block.code)
    elif block.lang == "jsonl":
        path = cwd / "_doctest_record.jsonl"
        path.write_text(block.code)
        records.read(path)


def run_document(path: Path, cwd: Path) -> dict:
    """Run every block of one Markdown file; returns counts per kind."""
    counts = {"python": 0, "command": 0, "data": 0, "skipped": 0}
    namespace: dict = {"__name__": "__doctest__"}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        for b in blocks(path.read_text(), str(path)):
            where = f"{path.relative_to(ROOT)}:{b.line}"
            if "skip" in b.markers:
                counts["skipped"] += 1
                continue
            if "file" in b.markers:
                (cwd / b.markers["file"]).parent.mkdir(parents=True, exist_ok=True)
                (cwd / b.markers["file"]).write_text(b.code)
            if b.lang in ("python", "py"):
                try:
                    exec(compile(b.code, where, "exec"), namespace)
                except Exception as exc:
                    raise AssertionError(f"{where}: python block failed: {type(exc).__name__}: {exc}") from exc
                counts["python"] += 1
            elif b.lang in SHELLS:
                for cmd in shell_commands(b):
                    run_kfsim(cmd, b.markers.get("quick", ""), cwd, where)
                    counts["command"] += 1
            elif b.lang in ("toml", "yaml", "yml", "json", "jsonl"):
                check_data_block(b, cwd, where)
                counts["data"] += 1
    finally:
        os.chdir(old)
        import matplotlib.pyplot as plt

        plt.close("all")
    return counts


# -- the convention itself -------------------------------------------------------------

SAMPLE = """\
Text.

<!-- doctest: file lab.toml -->
```toml
[cluster]
nodes = 2
```

<!-- doctest: quick --workers 2,4 -->
```console
$ kfsim scale \\
    --model resnet-50
output line
$ pip install kfsim
```

<!-- doctest: skip needs root -->
```bash
kfsim testbed up
```

```python
x = 1
```
"""


def test_block_extraction_and_markers():
    bs = blocks(SAMPLE)
    assert [b.lang for b in bs] == ["toml", "console", "bash", "python"]
    assert bs[0].markers == {"file": "lab.toml"} and bs[0].line == 4
    assert bs[1].markers == {"quick": "--workers 2,4"}
    assert shell_commands(bs[1]) == ["kfsim scale --model resnet-50"]
    assert bs[2].markers == {"skip": "needs root"}
    assert bs[3].code == "x = 1\n" and bs[3].markers == {}


def test_bad_markers_are_errors():
    with pytest.raises(ValueError, match="unknown doctest marker"):
        blocks("<!-- doctest: skipp x -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="needs an argument"):
        blocks("<!-- doctest: skip -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="unclosed"):
        blocks("```python\npass\n")


def test_every_doc_is_covered():
    names = {p.name for p in doc_files()}
    assert {"simulator.md", "formats.md"} <= names
    assert not names & EXCLUDED


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_blocks_run(path, tmp_path):
    """Each document runs in its own Python process (catalog registrations, cwd and
    matplotlib state of its examples stay there)."""
    proc = subprocess.run([sys.executable, __file__, str(path), str(tmp_path)], capture_output=True, text=True,
                          timeout=DOC_TIMEOUT_S, env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 0, f"{path.name}:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    print(path.name, counts)
    assert counts["skipped"] <= max(1, (counts["python"] + counts["command"] + counts["data"]) // 5), \
        f"{path.name}: too many skipped blocks ({counts})"


if __name__ == "__main__":  # one document, in this process: python tests/test_docs.py DOC.md WORKDIR
    sys.path.insert(0, str(ROOT))
    print(json.dumps(run_document(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))))
