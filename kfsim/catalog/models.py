"""Built-in models with per-tensor shapes derived from the architectures.

Each entry is a :class:`ModelProfile`: the parameter tensors in forward
(definition) order, a forward-MAC weight per tensor (how much of the
backward pass produces that tensor's gradient; DDP buckets need it), the
layer kind of each tensor summed into FLOPs per kind (``kind_flops``, priced
per kind by :mod:`kfsim.catalog.kinds`) and the training FLOPs per sample
(≈ 3 × forward FLOPs = 6 × forward MACs for CNNs; ≈ 6·N·T + 6·L·T²·d for
transformers, Kaplan et al. 2020).

Sources (cited next to each builder): torchvision model definitions (CNNs),
Devlin et al. 2019 (BERT), Radford et al. 2019 (GPT-2), Touvron et al. 2023
(LLaMA), Zhang et al. 2024 (TinyLlama). FLOPs per sample: the project's
shared catalog notes (derived from those definitions).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from kfsim.catalog.kinds import ELEMENTWISE_FLOPS, conv_kind


class ModelProfile(NamedTuple):
    """What the simulator needs to know about a model.

    tensor_shapes: parameter shapes in forward order (backward produces the
    gradients in reverse order). tensor_flops: relative backward work per
    tensor (defaults to its parameter count). flops_per_sample: training
    FLOPs (forward + backward) per sample. mfu: achievable model-FLOPs
    utilisation for this kind of model (None: the device's default).
    tensor_names: the tensors' path names, which a per-tensor plan
    (``compressors.paths``) refers to; None names them by forward index.
    kind_flops: training FLOPs per sample per layer kind (``kfsim.catalog.kinds``),
    ((kind, flops), ...); the builders derive it from their tensors. None: the
    model is one kind at ``mfu`` (hand-written or imported shapes; the built-ins'
    ``mfu`` is the single figure used before per-kind efficiencies, kept for reference).
    efficiency: ((kind, efficiency), ...) replacing :data:`kfsim.catalog.kinds.EFFICIENCY`.
    """

    name: str
    tensor_shapes: Sequence[tuple]
    flops_per_sample: float
    tensor_flops: Sequence[float] | None = None
    batch: int = 32
    mfu: float | None = None
    source: str = ""
    tensor_names: tuple | None = None  # path name per tensor (per-tensor plans); None: "0", "1", ...
    kind_flops: tuple | None = None    # ((layer kind, training FLOPs per sample), ...); None: one kind at mfu
    efficiency: tuple = ()             # ((layer kind, efficiency), ...) overriding kinds.EFFICIENCY

    @property
    def sizes(self) -> list[int]:
        return [math.prod(s) for s in self.tensor_shapes]

    @property
    def params(self) -> int:
        return sum(self.sizes)

    def weights(self) -> list[float]:
        """Relative backward cost per tensor (sums to 1)."""
        w = list(self.tensor_flops) if self.tensor_flops is not None else [float(s) for s in self.sizes]
        total = sum(w)
        if total <= 0:
            return [1.0 / len(w)] * len(w) if w else []
        return [x / total for x in w]

    def key(self) -> tuple:
        """Hashable identity for caches."""
        return (self.name, tuple(tuple(int(d) for d in s) for s in self.tensor_shapes),
                float(self.flops_per_sample),
                None if self.tensor_flops is None else tuple(float(x) for x in self.tensor_flops),
                self.kind_flops, tuple(self.efficiency), self.mfu)


# --- builders: (shapes, macs) lists in forward order -------------------------

class _Net:
    """Parameter tensors in forward order, each with its forward MACs and its layer kind.
    A normalisation layer books the elementwise work of the activations it normalises
    (``elems`` elements × ELEMENTWISE_FLOPS / 2 MAC-equivalents) on its weight."""

    def __init__(self):
        self.shapes: list[tuple] = []
        self.macs: list[float] = []
        self.kinds: list[str] = []

    def add(self, shape, macs=0.0, kind="matmul"):
        self.shapes.append(tuple(int(s) for s in shape))
        self.macs.append(float(macs))
        self.kinds.append(kind)

    def linear(self, out_f, in_f, tokens=1, bias=True):
        self.add((out_f, in_f), out_f * in_f * tokens)
        if bias:
            self.add((out_f,), out_f * tokens)

    def norm(self, d, bias=True, elems=0):
        self.add((d,), elems * ELEMENTWISE_FLOPS / 2, "elementwise")
        if bias:
            self.add((d,), 0.0, "elementwise")

    def conv(self, out_c, in_c, k, hw_out, bias=False, groups=1):
        kind = conv_kind(groups, in_c, out_c)
        self.add((out_c, in_c // groups, k, k), out_c * (in_c // groups) * k * k * hw_out * hw_out, kind)
        if bias:   # the bias add is elementwise work
            self.add((out_c,), out_c * hw_out * hw_out, "elementwise")

    def conv_bn(self, out_c, in_c, k, hw_out, groups=1):
        """A bias-free convolution and the batch norm of its output."""
        self.conv(out_c, in_c, k, hw_out, groups=groups)
        self.norm(out_c, elems=out_c * hw_out * hw_out)

    def kind_macs(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, m in zip(self.kinds, self.macs):
            out[k] = out.get(k, 0.0) + m
        return out


def bert(layers: int, hidden: int, vocab: int = 30522, max_pos: int = 512, seq: int = 128,
         inter: int | None = None) -> _Net:
    """BERT encoder + pooler (Devlin et al. 2019; HF BertModel layout). The layer norms book
    the elementwise work of the layer (norms, GELU, residuals, dropout); the attention softmax
    is taken as fused into the attention matmuls (fused softmax / FlashAttention, Dao et al.
    2022), so it books no elementwise pass over the heads × T² scores."""
    n = _Net()
    n.add((vocab, hidden)); n.add((max_pos, hidden)); n.add((2, hidden)); n.norm(hidden, elems=seq * hidden)
    inter = inter or 4 * hidden
    for _ in range(layers):
        for _qkv in range(3):
            n.linear(hidden, hidden, seq)
        n.linear(hidden, hidden, seq)
        n.norm(hidden, elems=seq * hidden)
        n.linear(inter, hidden, seq)
        n.linear(hidden, inter, seq)
        n.norm(hidden, elems=seq * hidden + seq * inter)
    n.linear(hidden, hidden, 1)  # pooler
    return n


def gpt2(layers: int, d: int, vocab: int = 50257, ctx: int = 1024, seq: int = 1024) -> _Net:
    """GPT-2 (Radford et al. 2019) with the LM head tied to wte. The head's
    backward runs first, so its MACs are booked on the final layer norm (the
    first gradient produced); wte's gradient is complete only at the very end."""
    n = _Net()
    n.add((vocab, d)); n.add((ctx, d))
    for _ in range(layers):     # elementwise work as in bert() (softmax fused)
        n.norm(d, elems=seq * d)
        n.linear(3 * d, d, seq)
        n.linear(d, d, seq)
        n.norm(d, elems=seq * d + 4 * seq * d)
        n.linear(4 * d, d, seq)
        n.linear(d, 4 * d, seq)
    n.add((d,), vocab * d * seq); n.add((d,))
    return n


def llama(layers: int, d: int, inter: int, kv_dim: int | None = None, vocab: int = 32000,
          seq: int = 2048) -> _Net:
    """LLaMA decoder (Touvron et al. 2023): no biases, RMSNorm, SwiGLU, untied head;
    kv_dim < d for grouped-query attention (TinyLlama)."""
    kv = kv_dim or d
    n = _Net()
    n.add((vocab, d))
    for _ in range(layers):     # elementwise work as in bert() (softmax fused); SwiGLU's product
        n.norm(d, bias=False, elems=seq * d)
        n.linear(d, d, seq, bias=False)
        n.linear(kv, d, seq, bias=False)
        n.linear(kv, d, seq, bias=False)
        n.linear(d, d, seq, bias=False)
        n.norm(d, bias=False, elems=seq * d + 2 * seq * inter)
        n.linear(inter, d, seq, bias=False)
        n.linear(inter, d, seq, bias=False)
        n.linear(d, inter, seq, bias=False)
    n.norm(d, bias=False, elems=seq * d)
    n.linear(vocab, d, seq, bias=False)
    return n


def resnet_imagenet(blocks=(3, 4, 6, 3), classes: int = 1000, bottleneck: bool = True, groups: int = 1,
                    width_per_group: int = 64) -> _Net:
    """torchvision ResNet / ResNeXt (v1.5: stride on the 3×3 conv), 224×224 input. ``bottleneck``
    False: basic blocks (ResNet-18/34); ``groups`` × ``width_per_group``: ResNeXt's grouped 3×3
    (torchvision: width = planes · width_per_group / 64 · groups)."""
    n = _Net()
    n.conv_bn(64, 3, 7, 112)
    in_c, hw = 64, 56
    for i, (count, planes) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for b in range(count):
            stride = 2 if (b == 0 and i > 0) else 1
            out_hw = hw // stride
            out_c = 4 * planes if bottleneck else planes
            if bottleneck:
                width = planes * width_per_group // 64 * groups
                n.conv_bn(width, in_c, 1, hw)
                n.conv_bn(width, width, 3, out_hw, groups=groups)
                n.conv_bn(out_c, width, 1, out_hw)
            else:
                n.conv_bn(planes, in_c, 3, out_hw)
                n.conv_bn(planes, planes, 3, out_hw)
            if stride != 1 or in_c != out_c:
                n.conv_bn(out_c, in_c, 1, out_hw)
            in_c, hw = out_c, out_hw
    n.linear(classes, in_c, 1)
    return n


def efficientnet_b0(classes: int = 1000) -> _Net:
    """torchvision EfficientNet-B0 (Tan & Le 2019), 224×224: MBConv blocks (1×1 expand, k×k
    depthwise, squeeze-excitation with biases, 1×1 project), each conv followed by batch norm."""
    n = _Net()
    n.conv_bn(32, 3, 3, 112)
    hw = 112
    #         expand, kernel, stride, in, out, repeats
    stages = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
              (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))
    for expand, k, stride, c_in, c_out, repeats in stages:
        for r in range(repeats):
            in_c, s = (c_in, stride) if r == 0 else (c_out, 1)
            exp = in_c * expand
            if expand != 1:
                n.conv_bn(exp, in_c, 1, hw)
            hw //= s
            n.conv_bn(exp, exp, k, hw, groups=exp)
            sq = max(1, in_c // 4)
            n.conv(sq, exp, 1, 1, bias=True); n.conv(exp, sq, 1, 1, bias=True)
            n.conv_bn(c_out, exp, 1, hw)
    n.conv_bn(1280, 320, 1, hw)
    n.linear(classes, 1280, 1)
    return n


def resnet18_cifar(classes: int = 10) -> _Net:
    """ResNet-18 for 32×32 CIFAR (3×3 stem, no max-pool; He et al. 2016)."""
    n = _Net()
    n.conv_bn(64, 3, 3, 32)
    in_c, hw = 64, 32
    for i, width in enumerate((64, 128, 256, 512)):
        for b in range(2):
            stride = 2 if (b == 0 and i > 0) else 1
            out_hw = hw // stride
            n.conv_bn(width, in_c, 3, out_hw)
            n.conv_bn(width, width, 3, out_hw)
            if stride != 1 or in_c != width:
                n.conv_bn(width, in_c, 1, out_hw)
            in_c, hw = width, out_hw
    n.linear(classes, in_c, 1)
    return n


VGG_CONFIGS = {  # Simonyan & Zisserman 2015, configurations A, B, D, E (torchvision's cfgs)
    11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    13: [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    19: [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


def vgg16(classes: int = 1000, depth: int = 16) -> _Net:
    """torchvision VGG-11/13/16/19 (no batch norm), 224×224 input; ReLU booked as elementwise."""
    n = _Net()
    cfg = VGG_CONFIGS[depth]
    in_c, hw = 3, 224
    for v in cfg:
        if v == "M":
            hw //= 2
            continue
        n.conv(v, in_c, 3, hw, bias=True)
        n.macs[-1] += v * hw * hw * ELEMENTWISE_FLOPS / 2    # its ReLU, booked on the bias
        in_c = v
    n.linear(4096, 512 * 7 * 7, 1); n.linear(4096, 4096, 1); n.linear(classes, 4096, 1)
    return n


def profile(name, net: _Net, flops, batch, mfu=None, source="", efficiency=()) -> ModelProfile:
    """A ModelProfile of a builder's net. ``flops``: training FLOPs per sample of its matmuls and
    convolutions (the catalog's figure); each kind gets its share of them by its MACs, and the
    elementwise kind its MAC-equivalents at the same FLOPs-per-MAC (6 for a CNN)."""
    km = net.kind_macs()
    dense = sum(m for k, m in km.items() if k != "elementwise")
    scale = float(flops) / dense if dense > 0 else 0.0
    kinds = tuple((k, m * scale) for k, m in sorted(km.items()) if m > 0)
    return ModelProfile(name, tuple(net.shapes), float(flops), tuple(net.macs), batch, mfu, source,
                        kind_flops=kinds, efficiency=tuple(efficiency))


_profile = profile


_CNN_MFU = 0.22      # catalog notes: CNN training ≈ 20–25 % MFU (derived from NVIDIA's ResNet-50 numbers)
_TRANSFORMER_MFU = 0.40  # catalog notes: large transformers ≈ 30–55 % MFU

BUILTIN: dict[str, callable] = {
    "bert-large": lambda: _profile("bert-large", bert(24, 1024), 0.264e12, 8, _TRANSFORMER_MFU,
                                   "Devlin et al. 2019 (24 layers, d=1024), T=128"),
    "bert-base": lambda: _profile("bert-base", bert(12, 768), 0.085e12, 32, _TRANSFORMER_MFU,
                                  "Devlin et al. 2019 (12 layers, d=768), T=128"),
    "resnet-50": lambda: _profile("resnet-50", resnet_imagenet(), 24.7e9, 64, _CNN_MFU,
                                  "torchvision resnet50, ImageNet 224 px (4.11 G MACs)"),
    "resnet-101": lambda: _profile("resnet-101", resnet_imagenet((3, 4, 23, 3)), 46.8e9, 64, _CNN_MFU,
                                   "torchvision resnet101, ImageNet 224 px (7.80 G MACs)"),
    # SQuAD fine-tuning length: 6·N·T + 6·L·T²·d = 6·340e6·384 + 6·24·384²·1024 ≈ 0.805 TFLOP (derived)
    "bert-large-384": lambda: _profile("bert-large-384", bert(24, 1024, seq=384), 0.805e12, 3,
                                       _TRANSFORMER_MFU, "Devlin et al. 2019 (24 layers, d=1024), T=384 (SQuAD)"),
    # grouped / depthwise convolutions (kinds.py): 6 × the builders' forward MACs (derived)
    "resnext101-32x4d": lambda: _profile("resnext101-32x4d", resnet_imagenet((3, 4, 23, 3), groups=32,
                                         width_per_group=4), 47.8e9, 128, _CNN_MFU,
                                         "NVIDIA DeepLearningExamples resnext101-32x4d (44.18 M), 224 px (7.97 G MACs)"),
    "efficientnet-b0": lambda: _profile("efficientnet-b0", efficientnet_b0(), 2.315e9, 256, _CNN_MFU,
                                        "torchvision efficientnet_b0 (5.29 M), 224 px (0.386 G MACs)"),
    "resnet-18": lambda: _profile("resnet-18", resnet18_cifar(), 3.33e9, 128, _CNN_MFU,
                                  "ResNet-18 for CIFAR-10, 32 px (0.555 G MACs)"),
    "vgg-16": lambda: _profile("vgg-16", vgg16(), 92.8e9, 64, _CNN_MFU,
                               "torchvision vgg16, ImageNet 224 px (15.47 G MACs)"),
    "gpt2-124m": lambda: _profile("gpt2-124m", gpt2(12, 768), 0.82e12, 8, _TRANSFORMER_MFU,
                                  "Radford et al. 2019 (12 layers, d=768), T=1024"),
    "gpt2-xl": lambda: _profile("gpt2-xl", gpt2(48, 1600), 10.06e12, 1, _TRANSFORMER_MFU,
                                "Radford et al. 2019 (48 layers, d=1600), T=1024"),
    "tinyllama-1.1b": lambda: _profile("tinyllama-1.1b", llama(22, 2048, 5632, kv_dim=256), 14.65e12, 4,
                                       _TRANSFORMER_MFU, "Zhang et al. 2024 (22 layers, d=2048, GQA 4 kv heads), T=2048"),
    "llama-7b": lambda: _profile("llama-7b", llama(32, 4096, 11008), 86.1e12, 1, _TRANSFORMER_MFU,
                                 "Touvron et al. 2023 (32 layers, d=4096), T=2048"),
}

ALIASES = {"bert_large": "bert-large", "bert_base": "bert-base", "resnet50": "resnet-50",
           "resnet18": "resnet-18", "resnet101": "resnet-101", "vgg16": "vgg-16", "gpt2": "gpt2-124m", "gpt2-small": "gpt2-124m",
           "tinyllama": "tinyllama-1.1b", "llama7b": "llama-7b",
           "resnext101": "resnext101-32x4d", "efficientnet": "efficientnet-b0", "efficientnetb0": "efficientnet-b0"}
