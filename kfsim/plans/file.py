"""Plan files: which compressor each tensor of a model uses (``kfsim plan`` writes one).

A plan file is TOML (``.toml``) or JSON (``.json``), one table ``plan``::

    [plan]
    model = "mlp"                      # kfsim.train.models name the paths belong to
    default = "none()"                 # tensors the plan does not name
    [plan.tensors]                     # tensor path -> compressor spec
    w1 = "ef(topk(ratio=0.01))"
    w2 = "int8()"

plus, from ``kfsim plan``, an informational ``[plan.chosen]`` table (budget,
errors, predicted times) that readers ignore. A plan *is* a compressor: the
per-tensor combinator ``compressors.paths`` (:func:`Plan.spec`), so
everything that takes a spec — ``kfsim train``, ``kfsim launch``, the
simulator — runs it unchanged. :func:`load` checks every path against the
model's parameters and parses every spec, raising one-line ``ValueError``s
that name the file and the entry.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import compressors
from kfsim.train import models

KEYS = {"model", "default", "tensors", "chosen"}


class Plan(NamedTuple):
    model: str
    default: str                  # canonical spec
    tensors: tuple                # ((path, canonical spec), ...) sorted by path
    chosen: Mapping[str, Any] | None = None

    @property
    def spec(self) -> str:
        """The plan as one compressor spec (``paths(default, 'w1', spec, ...)``)."""
        return self.compressor().spec

    def compressor(self, indexed: bool = False) -> compressors.Compressor:
        """The plan as a compressor; ``indexed``: its paths the tensors' positions among the
        model's sorted parameter names ("0", "1", ...), for gradients held as a sequence in that
        order (a ``kfsim launch`` worker's reducer)."""
        d = compressors.parse(self.default)
        index = {k: str(i) for i, k in enumerate(param_names(self.model))}
        return compressors.paths(d, *(v for p, s in self.tensors
                                      for v in (index[p] if indexed else p, compressors.parse(s))))


def param_names(model: str) -> tuple[str, ...]:
    """The model's tensor paths (the keys of its parameter dict), sorted."""
    return tuple(sorted(models.get(model).shapes))


def make(model: str, default: str, tensors: Mapping[str, str], chosen: Mapping | None = None,
         where: str = "plan") -> Plan:
    """A checked :class:`Plan` (specs canonical, paths the model's)."""
    if not isinstance(model, str) or model not in models.NAMES:
        raise ValueError(f"{where}: model must be one of {', '.join(models.NAMES)}, got {model!r}")
    known = param_names(model)
    out = []
    for path, spec in tensors.items():
        if path not in known:
            raise ValueError(f"{where}: tensor {path!r} is not a parameter of model {model!r} "
                             f"(it has: {', '.join(known)})")
        out.append((path, _canonical(spec, f"{where}: tensor {path!r}")))
    return Plan(model, _canonical(default, f"{where}: default"), tuple(sorted(out)), chosen)


def _canonical(spec: Any, where: str) -> str:
    if not isinstance(spec, str):
        raise ValueError(f"{where}: expected a compressor spec string, got {spec!r}")
    try:
        comp = compressors.parse(spec)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if comp.paths:
        raise ValueError(f"{where}: a tensor's compressor cannot itself be a per-tensor plan")
    return comp.spec


def load(path: str | Path, model: str | None = None) -> Plan:
    """Read and check a plan file; ``model``: the model it must be for (None: any)."""
    path = Path(path)
    where = f"plan file {str(path)!r}"
    if path.suffix not in (".toml", ".json"):
        raise ValueError(f"{where}: a plan file ends in .toml or .json")
    if not path.is_file():
        raise ValueError(f"{where} does not exist" if not path.exists() else f"{where} is not a regular file")
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: cannot read: {exc}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{where}: cannot parse: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"plan"} or not isinstance(data["plan"], dict):
        raise ValueError(f"{where}: expected exactly one table [plan]")
    body = data["plan"]
    extra = sorted(set(body) - KEYS)
    if extra:
        raise ValueError(f"{where}: unknown key plan.{extra[0]} (known: {', '.join(sorted(KEYS))})")
    for key in ("model", "tensors"):
        if key not in body:
            raise ValueError(f"{where}: plan.{key} is missing")
    tensors = body["tensors"]
    if not isinstance(tensors, dict):
        raise ValueError(f"{where}: plan.tensors must be a table of tensor path = compressor spec")
    plan = make(body["model"], body.get("default", "none()"), tensors, body.get("chosen"), where)
    if model is not None and plan.model != model:
        raise ValueError(f"{where}: the plan is for model {plan.model!r}, not {model!r}")
    return plan


def dumps(plan: Plan) -> str:
    """The plan as TOML text (strings quoted as JSON, which TOML reads alike)."""
    q = json.dumps
    lines = ["# kfsim plan: per-tensor compressors (kfsim plan writes it; `--plan FILE` reads it)", "[plan]",
             f"model = {q(plan.model)}", f"default = {q(plan.default)}", "", "[plan.tensors]"]
    lines += [f"{q(p)} = {q(s)}" for p, s in plan.tensors]
    if plan.chosen:
        lines += ["", "[plan.chosen]  # how kfsim plan chose (informational)"]
        lines += [f"{q(k)} = {_toml_value(v)}" for k, v in plan.chosen.items()]
    return "\n".join(lines) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


def resolve(compressor: str, plan_file: str | Path | None, model: str | None = None,
            default: str = "none()", indexed: bool = False) -> str:
    """What a command runs: ``plan_file``'s spec if given (for ``model``; ``indexed``:
    see :meth:`Plan.compressor`), else ``compressor``; a ``compressor`` other than the
    command's ``default`` beside a plan is an error."""
    if plan_file is None:
        return compressor
    if compressor != default:
        raise ValueError("give either --compressor or --plan, not both")
    return load(plan_file, model).compressor(indexed).spec


def for_simulator(plan_file: str | Path, model: str | None = None, bucket_mb: float | None = None,
                  batch_per_worker: int = 32) -> tuple[str, str, float | None]:
    """(catalog model name, plan spec, bucket cap in MiB) for ``kfsim scale`` / ``advise`` ``--plan``.

    The plan's model (``kfsim-mlp`` ...: its parameter shapes and names, as ``kfsim train`` prices it)
    is registered in the catalog; ``model``, if given, must be it. With no ``bucket_mb``, the cap is
    the model's size if that is under the default 25 MiB (one bucket, as ``kfsim train`` prices it)."""
    from kfsim import catalog
    from kfsim.train import timing

    plan = load(plan_file)
    profile = timing.model_profile(plan.model, batch_per_worker)
    if model is not None and model.lower() != profile.name.lower():
        raise ValueError(f"--plan {plan_file} is for model {profile.name}, not {model!r} (leave --model out)")
    catalog.register_model(profile)
    if bucket_mb is None:
        bucket_mb = min(25.0, profile.params * 4 / 2**20)
    return profile.name, plan.spec, bucket_mb
