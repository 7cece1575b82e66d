"""The built-in catalog: models, accelerators, links, clusters (each entry cites its source).

Look-ups accept catalog names (case-insensitive, a few aliases) or the
objects themselves; user entries come from config files
(:mod:`kfsim.catalog.config`) and are added with :func:`register_model` etc.
"""
from __future__ import annotations

from kfsim.catalog import devices as _devices
from kfsim.catalog import links as _links
from kfsim.catalog import models as _models
from kfsim.catalog.cluster import Cluster, Codec, Topology
from kfsim.catalog.devices import Accelerator
from kfsim.catalog.links import Link, gbit
from kfsim.catalog.models import ModelProfile

_USER_MODELS: dict[str, ModelProfile] = {}
_USER_DEVICES: dict[str, Accelerator] = {}
_USER_LINKS: dict[str, Link] = {}
_MODEL_CACHE: dict[str, ModelProfile] = {}


def _norm(name: str, aliases: dict) -> str:
    key = str(name).strip().lower()
    return aliases.get(key, key)


def model_names() -> list[str]:
    return sorted(set(_models.BUILTIN) | set(_USER_MODELS))


def device_names() -> list[str]:
    return sorted(set(_devices.BUILTIN) | set(_USER_DEVICES))


def link_names() -> list[str]:
    return sorted(set(_links.BUILTIN) | set(_USER_LINKS))


def get_model(model: str | ModelProfile) -> ModelProfile:
    """A :class:`ModelProfile` from a catalog name (or the profile itself)."""
    if isinstance(model, ModelProfile):
        return model
    key = _norm(model, _models.ALIASES)
    if key in _USER_MODELS:
        return _USER_MODELS[key]
    if key in _models.BUILTIN:
        if key not in _MODEL_CACHE:
            _MODEL_CACHE[key] = _models.BUILTIN[key]()
        return _MODEL_CACHE[key]
    raise ValueError(f"unknown model {model!r}; known: {', '.join(model_names())}")


def _lookup(value, cls, module, user: dict, what: str, names):
    """A catalog entry by name (user entries first), or the entry itself."""
    if isinstance(value, cls):
        return value
    key = _norm(value, module.ALIASES)
    found = user.get(key) or module.BUILTIN.get(key)
    if found is None:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(names())}")
    return found


def get_device(device: str | Accelerator) -> Accelerator:
    return _lookup(device, Accelerator, _devices, _USER_DEVICES, "device", device_names)


def get_link(link: str | Link) -> Link:
    return _lookup(link, Link, _links, _USER_LINKS, "link", link_names)


def register_model(profile: ModelProfile) -> None:
    _USER_MODELS[profile.name.lower()] = profile


def register_device(dev: Accelerator) -> None:
    _USER_DEVICES[dev.name.lower()] = dev


def register_link(link: Link) -> None:
    _USER_LINKS[link.name.lower()] = link


def seed_cluster() -> Cluster:
    """The seed's scenario: 4 nodes × 4 RTX 3090 (PCIe 4 inside), 1 Gbit/s Ethernet between."""
    return Cluster("seed-3090", get_device("rtx3090"), 4, 4, get_link("pcie4"), get_link("1gbe"),
                   source="the project's seed scenario")


def make_cluster(device="rtx3090", gpus_per_node: int = 4, nodes: int = 4, intra="pcie4",
                 inter="1gbe", **kw) -> Cluster:
    """Build a :class:`Cluster` from catalog names (keyword extras as in Cluster)."""
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    name = kw.pop("name", f"{nodes}x{gpus_per_node}-{_s(device)}-{_s(inter)}")
    return Cluster(name, get_device(device), gpus_per_node, nodes, get_link(intra), get_link(inter), **kw)


def _s(x):
    return x if isinstance(x, str) else x.name


__all__ = ["Accelerator", "Cluster", "Codec", "Link", "ModelProfile", "Topology", "gbit", "get_device",
           "get_link", "get_model", "make_cluster", "model_names", "device_names", "link_names",
           "register_device", "register_link", "register_model", "seed_cluster"]
