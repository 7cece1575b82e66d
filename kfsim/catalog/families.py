"""The catalog's model builders by family, for config files: ``family = "resnet", depth = 50``.

Each family names the builder of :mod:`kfsim.catalog.models` it runs, the
parameters it takes, and how its training FLOPs per sample follow from the
built tensors:

* CNNs (resnet, resnext, vgg, efficientnet): 6 × the forward MACs of the
  matmuls and convolutions (training ≈ 3 × forward; catalog notes);
* transformers (transformer = BERT-style encoder, gpt, llama):
  6·N·T + 6·L·T²·d (Kaplan et al. 2020, the catalog notes' convention).

Layer kinds come from the builders' tensors (:mod:`kfsim.catalog.kinds`).
"""
from __future__ import annotations

import math

from kfsim.catalog import models
from kfsim.catalog.models import ModelProfile

RESNET_BLOCKS = {18: ((2, 2, 2, 2), False), 34: ((3, 4, 6, 3), False), 50: ((3, 4, 6, 3), True),
                 101: ((3, 4, 23, 3), True), 152: ((3, 8, 36, 3), True)}   # torchvision / He et al. 2016
RESNEXT_DEPTHS = (50, 101, 152)

# family -> (parameters it takes, required ones, default batch)
FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...], int]] = {
    "resnet": (("depth", "classes"), ("depth",), 64),
    "resnext": (("depth", "groups", "width_per_group", "classes"), ("depth",), 64),
    "vgg": (("depth", "classes"), ("depth",), 64),
    "efficientnet": (("variant", "classes"), (), 128),
    "transformer": (("layers", "width", "ffn", "vocab", "seq"), ("layers", "width"), 32),
    "gpt": (("layers", "width", "vocab", "seq"), ("layers", "width"), 8),
    "llama": (("layers", "width", "ffn", "kv_width", "vocab", "seq"), ("layers", "width", "ffn"), 4),
}
PARAMS = ("depth", "layers", "width", "ffn", "kv_width", "vocab", "seq", "groups", "width_per_group",
          "classes", "variant")


def build(name: str, family: str, params: dict, batch: int | None = None, source: str = "",
          efficiency=()) -> ModelProfile:
    """A ModelProfile from a family and its parameters; ValueError naming the parameter."""
    if family not in FAMILIES:
        raise ValueError(f"family: unknown model family {family!r} (known: {', '.join(FAMILIES)})")
    takes, required, default_batch = FAMILIES[family]
    given = {k: v for k, v in params.items() if v is not None}
    for k in given:
        if k not in takes:
            raise ValueError(f"{k}: not a parameter of family {family!r} (it takes: {', '.join(takes)})")
    for k in required:
        if k not in given:
            raise ValueError(f"{k}: family {family!r} needs it")
    net, flops, what = _BUILD[family](**given)
    return models.profile(name, net, flops, batch or default_batch, None, source or f"kfsim family {what}",
                          efficiency)


def _depth(depth: int, known, family: str) -> None:
    if depth not in known:
        raise ValueError(f"depth: {family} depth {depth} is not supported (supported: "
                         f"{', '.join(str(d) for d in known)})")


def _cnn(net):
    km = net.kind_macs()
    return 6.0 * sum(m for k, m in km.items() if k != "elementwise")


def _resnet(depth, classes=1000):
    _depth(depth, RESNET_BLOCKS, "resnet")
    blocks, bottleneck = RESNET_BLOCKS[depth]
    net = models.resnet_imagenet(blocks, classes, bottleneck)
    return net, _cnn(net), f"resnet depth {depth} (torchvision layout, 224 px)"


def _resnext(depth, groups=32, width_per_group=4, classes=1000):
    _depth(depth, RESNEXT_DEPTHS, "resnext")
    net = models.resnet_imagenet(RESNET_BLOCKS[depth][0], classes, True, groups, width_per_group)
    return net, _cnn(net), f"resnext{depth}-{groups}x{width_per_group}d (torchvision layout, 224 px)"


def _vgg(depth, classes=1000):
    _depth(depth, models.VGG_CONFIGS, "vgg")
    net = models.vgg16(classes, depth)
    return net, _cnn(net), f"vgg{depth} (torchvision layout, 224 px)"


def _efficientnet(variant="b0", classes=1000):
    if variant != "b0":
        raise ValueError(f"variant: efficientnet variant {variant!r} is not supported (supported: b0)")
    net = models.efficientnet_b0(classes)
    return net, _cnn(net), "efficientnet-b0 (torchvision layout, 224 px)"


def _kaplan(net, layers, width, seq):
    n = sum(math.prod(s) for s in net.shapes)
    return 6.0 * n * seq + 6.0 * layers * seq * seq * width


def _transformer(layers, width, ffn=None, vocab=30522, seq=128):
    net = models.bert(layers, width, vocab, max(512, seq), seq, ffn)
    return net, _kaplan(net, layers, width, seq), f"BERT-style encoder, {layers} layers, d={width}, T={seq}"


def _gpt(layers, width, vocab=50257, seq=1024):
    net = models.gpt2(layers, width, vocab, max(1024, seq), seq)
    return net, _kaplan(net, layers, width, seq), f"GPT-2-style decoder, {layers} layers, d={width}, T={seq}"


def _llama(layers, width, ffn, kv_width=None, vocab=32000, seq=2048):
    net = models.llama(layers, width, ffn, kv_width, vocab, seq)
    return net, _kaplan(net, layers, width, seq), f"LLaMA-style decoder, {layers} layers, d={width}, T={seq}"


_BUILD = {"resnet": _resnet, "resnext": _resnext, "vgg": _vgg, "efficientnet": _efficientnet,
          "transformer": _transformer, "gpt": _gpt, "llama": _llama}
