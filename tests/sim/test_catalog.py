"""Built-in models: parameter counts and MACs derived from the architectures match the sources."""
import pytest

from kfsim import catalog

EXACT = {  # reference implementations' parameter counts
    "resnet-50": 25_557_032, "resnet-18": 11_173_962, "vgg-16": 138_357_544, "gpt2-124m": 124_439_808,
    "gpt2-xl": 1_557_611_200, "llama-7b": 6_738_415_616, "tinyllama-1.1b": 1_100_048_384,
    "bert-base": 109_482_240, "bert-large": 335_141_888,
}
MACS = {"resnet-50": 4.11e9, "resnet-18": 0.555e9, "vgg-16": 15.47e9}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_parameter_counts(name):
    m = catalog.get_model(name)
    assert m.params == EXACT[name]
    assert len(m.weights()) == len(m.tensor_shapes)
    assert sum(m.weights()) == pytest.approx(1.0)
    assert m.source


@pytest.mark.parametrize("name", sorted(MACS))
def test_cnn_forward_macs(name):
    assert sum(catalog.get_model(name).tensor_flops) == pytest.approx(MACS[name], rel=0.01)


def test_lookups_and_aliases():
    assert catalog.get_model("ResNet50").name == "resnet-50"
    assert catalog.get_device("3090").name == "rtx3090"
    assert catalog.get_link("1gbe").bandwidth == 125e6
    for bad, fn in (("alexnet", catalog.get_model), ("tpu9", catalog.get_device), ("carrier-pigeon", catalog.get_link)):
        with pytest.raises(ValueError, match="unknown"):
            fn(bad)


def test_seed_cluster():
    c = catalog.seed_cluster()
    assert c.workers == 16 and c.inter.name == "1gbe" and c.device.name == "rtx3090"
