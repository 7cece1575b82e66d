"""What must hold before any msrun process starts (each failure: one ValueError line).

* the interpreter: msrun is this environment's (``launcher.msrun_path``), and the
  ``python`` msrun starts its workers with (first on :func:`interpreter_path`)
  is this interpreter, which can import MindSpore;
* the data: Fashion-MNIST's four files present and gzip-readable;
* the outputs: the log folder, the record's folder and the checkpoint folder
  creatable and writable (proved by writing a probe file);
* the memory: ``workers`` x the per-worker estimate (:func:`worker_bytes`, or the
  caller's) plus the scheduler's fits what the machine has free
  (:func:`available_bytes`: ``MemAvailable``, and the cgroup's limit minus its
  usage);
* the schedule: ``0 <= resume_step < steps``;
* the device (:func:`check_device`): on GPU/Ascend, the spec's lowered graphs hold no
  CPU-only host kernel (``backends.mindspore.device``, graph inspection, no accelerator needed).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from kfsim.sim.report import check_writable

GIB = 1 << 30
RUNTIME_BYTES = int(0.9 * GIB)     # one MindSpore CPU worker before the model: runtime, graph compiler, comm
SCHEDULER_BYTES = int(0.5 * GIB)   # msrun's scheduler process (imports MindSpore, holds no model)
DATA_BYTES = (60000 + 10000) * 784 * (4 + 1)  # Fashion-MNIST as float32, plus the uint8 it is decoded from
PARAM_COPIES = 8                   # weights, gradients, optimizer, reducer state and graph buffers


def interpreter_path() -> str:
    """PATH with this interpreter's bin folder first: msrun starts its workers as plain
    ``python``, which must be this environment's (a venv need not be activated)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def _shebang(path: str) -> str:
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode(errors="replace")
    except OSError:
        return ""
    return first[2:].strip().split()[0] if first.startswith("#!") and first[2:].strip() else ""


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def runs_this_interpreter(script: str) -> bool:
    """Whether ``script``'s ``#!`` line names this interpreter (an entry point of this environment)."""
    return _same(_shebang(script), sys.executable)


def check_interpreter() -> None:
    py = shutil.which("python", path=interpreter_path())
    if py is None or not (_same(py, sys.executable) or Path(py).parent == Path(sys.executable).parent):
        raise ValueError(f"msrun would start its workers with {py or 'no python on PATH'}, not this "
                         f"interpreter {sys.executable} (no 'python' beside it)")
    if importlib.util.find_spec("mindspore") is None:
        raise ValueError(f"MindSpore is not importable by {sys.executable}: pip install 'kfsim[mindspore]'")


def check_data() -> None:
    """Fashion-MNIST's files present and starting as gzip (the workers decode them)."""
    from kfsim.data import fashion_mnist as F
    d = F.data_dir()
    for split, (images, labels, _) in F.FILES.items():
        for name in (images, labels):
            p = d / name
            try:
                with open(p, "rb") as f:
                    ok = f.read(2) == b"\x1f\x8b"
            except OSError as exc:
                raise ValueError(f"Fashion-MNIST {split} data missing: {p} ({exc.strerror}); install "
                                 f"{F.PACKAGE} or set {F.ENV_DIR}") from None
            if not ok:
                raise ValueError(f"Fashion-MNIST {split} data corrupt: {p} is not a gzip file")


def worker_bytes(avals) -> int:
    """Estimated resident memory of one worker training a model of these (shape, dtype) arrays."""
    import numpy as np
    params = sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in avals)
    return RUNTIME_BYTES + DATA_BYTES + PARAM_COPIES * params


def available_bytes() -> int | None:
    """Memory this job can still use: ``MemAvailable``, capped by the memory cgroup's limit minus
    its usage (v2 ``memory.max``/``memory.current``, v1 ``limit_in_bytes``/``usage_in_bytes``)."""
    free = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            lim, use = Path(limit).read_text().strip(), Path(usage).read_text().strip()
        except OSError:
            continue
        if lim.isdigit() and int(lim) < 1 << 60:
            free.append(max(0, int(lim) - int(use)))
    return min(free) if free else None


def check_memory(workers: int, per_worker: int, available: int | None = None) -> None:
    available = available_bytes() if available is None else available
    need = workers * per_worker + SCHEDULER_BYTES
    if available is not None and need > available:
        raise ValueError(f"{workers} workers x {per_worker / GIB:.2f} GiB each + {SCHEDULER_BYTES / GIB:.1f} GiB "
                         f"scheduler = {need / GIB:.2f} GiB do not fit the {available / GIB:.2f} GiB of memory "
                         "available (fewer workers, a smaller model, or --worker-mem if the estimate is wrong)")


def check_schedule(steps: int, resume_step: int) -> None:
    if resume_step < 0:
        raise ValueError(f"resume step must be >= 0, got {resume_step}")
    if resume_step >= steps:
        raise ValueError(f"resume step {resume_step} must be < steps {steps} (nothing left to train)")


def check(*, workers: int, steps: int, resume_step: int, avals, out_dirs: dict,
          worker_mem: int | None = None) -> None:
    """Every check above, cheapest first; ``out_dirs``: {what: folder} to prove writable."""
    check_schedule(steps, resume_step)
    if worker_mem is not None and not worker_mem > 0:
        raise ValueError(f"worker memory must be > 0 bytes, got {worker_mem}")
    for what, d in out_dirs.items():
        check_writable(d, what)
    check_data()
    check_interpreter()
    check_memory(workers, worker_bytes(avals) if worker_mem is None else int(worker_mem))


def check_device(spec: str, device: str, avals, *, rng: str = "exact", workers: int = 2, steps: int = 1,
                 imports=()) -> None:
    """Refuse (one ValueError line naming the ops and the spec) a spec whose lowered graphs would
    need a CPU-only host kernel on ``device``; every phase of a schedule is checked (the steps
    :func:`kfsim.launch.launcher.validate` checks). CPU and the native baseline always pass."""
    if device == "CPU" or spec == "native":
        return
    import compressors
    from backends.mindspore.device import check_device as inspect
    from kfsim.imports import import_user
    for target in imports:  # a registered user compressor must parse here too
        import_user(target)
    comp = compressors.parse(spec)
    inspect(comp, avals, device, rng=rng, n=workers,
            steps=sorted({0, steps - 1} | set(range(min(steps, 64)))))
