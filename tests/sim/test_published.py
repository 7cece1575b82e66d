"""``kfsim validate --published``: the published tables parse, cite their source, and are predicted.

The bounds asserted here are the measured ones (every compressed row on the right side of 1x,
median |error| 15.2 % against the issue's 20 %: see docs/simulator.md, "Published
measurements"); each check fails if the prediction moves past what was measured.
"""
import json

import pytest
from typer.testing import CliRunner

import kfsim.cli.testbed_cmd  # noqa: F401  (registers validate)
from kfsim import catalog
from kfsim.cli import app
from kfsim.sim import published as pub

runner = CliRunner()

# Compressed rows whose predicted speedup is on the wrong side of 1x today (docs/simulator.md): none
# since 1-bit Adam's compressed all-reduce is priced as what it is (doublesqueeze: all-to-all + shards)
KNOWN_WRONG_SIDE: set = set()
MEASURED_MEDIAN = 0.20      # measured 15.2 % (goal 20 %)
MEASURED_DENSE_WORST = 0.45  # measured +41.5 % (VGG-16, 512 GPUs)


@pytest.fixture(scope="module")
def tables():
    return pub.load()


@pytest.fixture(scope="module")
def results(tables):
    return pub.predict_all(tables)


def test_data_parses_and_every_table_cites_its_source(tables):
    assert len(tables) >= 3
    assert {t.kind for t in tables} == {"dense", "compressed"}
    for t in tables:
        for key in ("authors", "venue", "locator", "url"):
            assert isinstance(t.citation[key], str) and len(t.citation[key]) > 5, (t.id, key)
        assert 2000 <= t.citation["year"] <= 2030
        assert t.role == "held-out" and t.setup["assumptions"]
        catalog.get_device(t.setup["device"]), catalog.get_link(t.setup["intra"]), catalog.get_link(t.setup["inter"])
        for r in t.rows:
            catalog.get_model(r.model)
            assert r.published > 0 and r.workers >= 2 and r.batch >= 1


def test_a_table_without_its_citation_is_refused(tmp_path):
    text = pub.data_path().read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('locator = "README', 'where = "README', 1))
    with pytest.raises(ValueError, match="horovod-128.*unknown fields"):
        pub.load(bad)
    bad.write_text(text.replace('authors = "A. Sergeev, M. Del Balso"', 'authors = ""', 1))
    with pytest.raises(ValueError, match="horovod-128.*missing 'authors'"):
        pub.load(bad)
    bad.write_text(text.replace("published = 0.90", "published = -1", 1))
    with pytest.raises(ValueError, match="published must be a positive number"):
        pub.load(bad)


def test_flat_exchange_is_one_tensor_after_backward(tables, tmp_path):
    from kfsim.sim.inputs import as_model, flattened
    from kfsim.sim.predict import predict_iteration
    t = next(t for t in tables if t.setup["exchange"] == "flat")
    m, f = as_model("bert-large"), flattened("bert-large")
    assert f.tensor_shapes == ((m.params,),) and f.params == m.params and f.flops_per_sample == m.flops_per_sample
    cl = pub.cluster_for(t, 64)
    a, b = (predict_iteration(x, cl, "doublesqueeze()", 64, batch_per_worker=16) for x in (m, f))
    assert b.compute_s == pytest.approx(a.compute_s) and b.codec_s < a.codec_s / 1.5  # one codec call, no launches per tensor
    assert (a.buckets, b.buckets) == (50, 1)
    assert {t.setup["exchange"] for t in tables} == {"buckets", "flat"}
    bad = tmp_path / "bad.toml"
    bad.write_text(pub.data_path().read_text().replace('exchange = "flat"', 'exchange = "fused"', 1))
    with pytest.raises(ValueError, match="exchange must be one of"):
        pub.load(bad)


def test_effective_link_rate_replaces_the_line_rate(tables):
    t = next(t for t in tables if "inter_effective_gbit" in t.setup)
    cl = pub.cluster_for(t, 64)
    assert cl.inter.bandwidth * cl.inter.efficiency == pytest.approx(catalog.gbit(t.setup["inter_effective_gbit"]))
    assert cl.workers == 64 and cl.precision == t.setup["precision"]


def test_compressed_rows_side_of_one_and_median_error(results):
    comp = [r for r in results if r.metric == "speedup"]
    assert comp
    for r in comp:
        expected = (r.table, r.model, r.workers) not in KNOWN_WRONG_SIDE
        assert r.right_side is expected, (r, "update KNOWN_WRONG_SIDE and docs/simulator.md")
    s = pub.summarise(results)
    assert s.median_abs_error <= MEASURED_MEDIAN
    dense = [abs(r.rel_error) for r in results if r.metric == "efficiency"]
    assert max(dense) <= MEASURED_DENSE_WORST
    assert all(0 < r.predicted <= 1.0 for r in results if r.metric == "efficiency")


def test_validate_published_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / "v"
    r = runner.invoke(app, ["validate", "--published", "--out", str(out)])
    assert r.exit_code == 0, r.output
    for word in ("predicted", "published", "horovod-512", "onebit-adam-ethernet", "median |error|"):
        assert word in r.output
    doc = json.loads((out / "published.json").read_text())
    assert len(doc["results"]) == sum(len(t["rows"]) for t in doc["tables"]) == 6
    assert doc["summary"]["median_abs_error"] == pytest.approx(pub.summarise(pub.predict_all(pub.load()))
                                                               .median_abs_error)


def test_validate_published_bad_out_is_one_error_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = runner.invoke(app, ["validate", "--published", "--out", str(f)])
    assert r.exit_code == 2
    assert r.output.strip().startswith("error:") and "Traceback" not in r.output
