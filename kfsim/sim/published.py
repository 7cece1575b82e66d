"""Published measurements predicted by the simulator (``kfsim validate --published``).

The rows live in ``kfsim/data/published.toml``: each table cites its source (authors, venue,
year, the table or figure) and states its setup (device, GPUs per node, links, precision, the
baseline compressor); each row a model, worker count, batch per worker, compressor and the
published number. A row is predicted with the one cost model, :func:`kfsim.sim.predict.
predict_iteration`, on a catalog cluster built from the table's setup — nothing is fitted:

* ``efficiency`` = single-worker compute time / T_iter(p) (the scaling efficiency
  throughput(p) / (p · throughput(1)) of a weak-scaling benchmark);
* ``speedup`` = T_iter(p, baseline) / T_iter(p, compressor).

The relative error of a row is predicted / published − 1; a compressed row is on the *right
side of 1×* when the predicted and the published speedup are both above or both below 1.
"""
from __future__ import annotations

import math
import statistics
import tomllib
from importlib import resources
from pathlib import Path
from typing import NamedTuple

METRICS = ("efficiency", "speedup")
KINDS = ("dense", "compressed")
_TABLE_KEYS = {"id", "kind", "metric", "role", "title", "authors", "venue", "year", "locator", "url", "device",
               "gpus_per_node", "intra", "inter", "inter_effective_gbit", "precision", "baseline", "assumptions",
               "exchange", "row"}
_CITATION = ("authors", "venue", "year", "locator", "url")
_ROW_KEYS = {"model", "workers", "batch", "compressor", "published"}


class Table(NamedTuple):
    id: str
    kind: str
    metric: str
    role: str
    title: str
    citation: dict
    setup: dict
    rows: tuple


class Row(NamedTuple):
    table: str
    model: str
    workers: int
    batch: int
    compressor: str
    published: float


class Result(NamedTuple):
    table: str
    kind: str
    metric: str
    model: str
    workers: int
    batch: int
    compressor: str
    published: float
    predicted: float

    @property
    def rel_error(self) -> float:
        return self.predicted / self.published - 1.0

    @property
    def right_side(self) -> bool | None:
        """Compressed speedups: predicted and published on the same side of 1× (None otherwise)."""
        if self.metric != "speedup":
            return None
        return (self.predicted > 1.0) == (self.published > 1.0)


def data_path() -> Path:
    return Path(str(resources.files("kfsim.data").joinpath("published.toml")))


def load(path: Path | str | None = None) -> list[Table]:
    """The published tables, checked: ValueError naming the table and field that is wrong."""
    p = data_path() if path is None else Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: not valid TOML ({exc})") from None
    tables = raw.get("table")
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"{p}: no [[table]] entries")
    return [_table(t, i, p) for i, t in enumerate(tables)]


def _table(t: dict, i: int, p: Path) -> Table:
    name = t.get("id", f"#{i}")
    where = f"{p}: table {name!r}"
    extra = set(t) - _TABLE_KEYS
    if extra:
        raise ValueError(f"{where}: unknown fields {sorted(extra)}")
    for key in ("id", "kind", "metric", "role", "title", *_CITATION, "device", "gpus_per_node", "intra", "inter",
                "precision", "baseline"):
        if t.get(key) in (None, ""):
            raise ValueError(f"{where}: missing {key!r}")
    if t["kind"] not in KINDS or t["metric"] not in METRICS:
        raise ValueError(f"{where}: kind must be one of {KINDS} and metric one of {METRICS}")
    from kfsim.sim.inputs import EXCHANGES
    if t.get("exchange", "buckets") not in EXCHANGES:
        raise ValueError(f"{where}: exchange must be one of {EXCHANGES}, got {t['exchange']!r}")
    if not isinstance(t["year"], int) or not 1990 <= t["year"] <= 2100:
        raise ValueError(f"{where}: year must be an integer year, got {t['year']!r}")
    rows = t.get("row")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{where}: no [[table.row]] entries")
    out = []
    for j, r in enumerate(rows):
        if set(r) != _ROW_KEYS:
            raise ValueError(f"{where}, row {j}: fields must be exactly {sorted(_ROW_KEYS)}, got {sorted(r)}")
        if not (isinstance(r["workers"], int) and r["workers"] >= 2 and isinstance(r["batch"], int)
                and r["batch"] >= 1):
            raise ValueError(f"{where}, row {j}: workers must be an integer >= 2 and batch >= 1")
        v = r["published"]
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{where}, row {j}: published must be a positive number, got {v!r}")
        out.append(Row(name, str(r["model"]), r["workers"], r["batch"], str(r["compressor"]), float(v)))
    setup = {k: t[k] for k in ("device", "gpus_per_node", "intra", "inter", "inter_effective_gbit", "precision",
                               "baseline", "assumptions") if k in t}
    setup["exchange"] = t.get("exchange", "buckets")
    return Table(name, t["kind"], t["metric"], t["role"], t["title"], {k: t[k] for k in _CITATION}, setup,
                 tuple(out))


def cluster_for(table: Table, workers: int):
    """The catalog cluster of ``table``'s setup with enough nodes for ``workers``."""
    from kfsim import catalog
    s = table.setup
    g = int(s["gpus_per_node"])
    inter = catalog.get_link(s["inter"])
    if "inter_effective_gbit" in s:  # a measured achievable rate: the source's own number, efficiency 1
        inter = inter._replace(name=f"{inter.name}@{s['inter_effective_gbit']:g}Gbit/s",
                               bandwidth=catalog.gbit(float(s["inter_effective_gbit"])), efficiency=1.0)
    return catalog.make_cluster(s["device"], g, -(-workers // g), s["intra"], inter,
                                precision=s["precision"], source=f"{table.id}: {table.title}")


def predict_row(table: Table, row: Row) -> float:
    from kfsim.sim.inputs import exchanged
    from kfsim.sim.predict import predict_iteration, single_worker_time
    cl = cluster_for(table, row.workers)
    model = exchanged(row.model, table.setup["exchange"])
    t = predict_iteration(model, cl, row.compressor, row.workers, batch_per_worker=row.batch).total_s
    if table.metric == "efficiency":
        return single_worker_time(model, cl, row.batch) / t
    base = predict_iteration(model, cl, table.setup["baseline"], row.workers, batch_per_worker=row.batch)
    return base.total_s / t


def predict_all(tables: list[Table]) -> list[Result]:
    return [Result(t.id, t.kind, t.metric, r.model, r.workers, r.batch, r.compressor, r.published,
                   predict_row(t, r)) for t in tables for r in t.rows]


class Summary(NamedTuple):
    rows: int
    median_abs_error: float
    worst_abs_error: float
    compressed_rows: int
    right_side: int          # compressed rows on the right side of 1×


def summarise(results: list[Result]) -> Summary:
    if not results:
        raise ValueError("no published rows to summarise")
    errs = [abs(r.rel_error) for r in results]
    comp = [r for r in results if r.metric == "speedup"]
    return Summary(len(results), statistics.median(errs), max(errs), len(comp), sum(bool(r.right_side) for r in comp))
