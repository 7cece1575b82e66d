"""The quickstart's install script on this machine's interpreters (``bash .ci/setup --check``).

``--check`` runs the script's real interpreter choice and version checks and
creates a throw-away virtual environment with pip — what a stock Debian
Python (externally managed, PEP 668) needs — without the 3.6 GB install.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parents[1] / ".ci" / "setup"


def check(python: str | None):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home())}
    if python:
        env["KFSIM_PYTHON"] = python
    return subprocess.run(["bash", str(SETUP), "--check"], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.skipif(not Path("/usr/lib/python3/dist-packages").exists() or not Path("/usr/bin/python3").exists(),
                    reason="not a Debian/Ubuntu system Python")
def test_debian_system_python_gets_a_venv():
    marker = list(Path("/usr/lib").glob("python3.*/EXTERNALLY-MANAGED"))
    proc = check("/usr/bin/python3")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "creates a virtual environment with pip" in proc.stdout
    assert marker, "expected the PEP 668 marker on this machine's Debian Python"


@pytest.mark.parametrize("kind", ["old", "broken"])
def test_unusable_interpreter_is_one_clear_line(tmp_path, kind):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho 3.9\n" if kind == "old" else "#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    proc = check(str(fake))
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "\n" not in err and err.startswith("kfsim setup: error:") and "Traceback" not in err
    assert ("needs Python 3.11 or newer" if kind == "old" else "does not run") in err
