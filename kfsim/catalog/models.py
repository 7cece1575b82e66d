"""Built-in models with per-tensor shapes derived from the architectures.

Each entry is a :class:`ModelProfile`: the parameter tensors in forward
(definition) order, a forward-MAC weight per tensor (how much of the
backward pass produces that tensor's gradient; DDP buckets need it) and the
training FLOPs per sample (≈ 3 × forward FLOPs = 6 × forward MACs for CNNs;
≈ 6·N·T + 6·L·T²·d for transformers, Kaplan et al. 2020).

Sources (cited next to each builder): torchvision model definitions (CNNs),
Devlin et al. 2019 (BERT), Radford et al. 2019 (GPT-2), Touvron et al. 2023
(LLaMA), Zhang et al. 2024 (TinyLlama). FLOPs per sample: the project's
shared catalog notes (derived from those definitions).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence


class ModelProfile(NamedTuple):
    """What the simulator needs to know about a model.

    tensor_shapes: parameter shapes in forward order (backward produces the
    gradients in reverse order). tensor_flops: relative backward work per
    tensor (defaults to its parameter count). flops_per_sample: training
    FLOPs (forward + backward) per sample. mfu: achievable model-FLOPs
    utilisation for this kind of model (None: the device's default).
    tensor_names: the tensors' path names, which a per-tensor plan
    (``compressors.paths``) refers to; None names them by forward index.
    """

    name: str
    tensor_shapes: Sequence[tuple]
    flops_per_sample: float
    tensor_flops: Sequence[float] | None = None
    batch: int = 32
    mfu: float | None = None
    source: str = ""
    tensor_names: tuple | None = None  # path name per tensor (per-tensor plans); None: "0", "1", ...

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
                None if self.tensor_flops is None else tuple(float(x) for x in self.tensor_flops))


# --- builders: (shapes, macs) lists in forward order -------------------------

class _Net:
    def __init__(self):
        self.shapes: list[tuple] = []
        self.macs: list[float] = []

    def add(self, shape, macs=0.0):
        self.shapes.append(tuple(int(s) for s in shape))
        self.macs.append(float(macs))

    def linear(self, out_f, in_f, tokens=1, bias=True):
        self.add((out_f, in_f), out_f * in_f * tokens)
        if bias:
            self.add((out_f,), out_f * tokens)

    def norm(self, d, bias=True):
        self.add((d,))
        if bias:
            self.add((d,))

    def conv(self, out_c, in_c, k, hw_out, bias=False):
        self.add((out_c, in_c, k, k), out_c * in_c * k * k * hw_out * hw_out)
        if bias:
            self.add((out_c,), out_c * hw_out * hw_out)


def bert(layers: int, hidden: int, vocab: int = 30522, max_pos: int = 512, seq: int = 128) -> _Net:
    """BERT encoder + pooler (Devlin et al. 2019; HF BertModel layout)."""
    n = _Net()
    n.add((vocab, hidden)); n.add((max_pos, hidden)); n.add((2, hidden)); n.norm(hidden)
    inter = 4 * hidden
    for _ in range(layers):
        for _qkv in range(3):
            n.linear(hidden, hidden, seq)
        n.linear(hidden, hidden, seq)
        n.norm(hidden)
        n.linear(inter, hidden, seq)
        n.linear(hidden, inter, seq)
        n.norm(hidden)
    n.linear(hidden, hidden, 1)  # pooler
    return n


def gpt2(layers: int, d: int, vocab: int = 50257, ctx: int = 1024, seq: int = 1024) -> _Net:
    """GPT-2 (Radford et al. 2019) with the LM head tied to wte. The head's
    backward runs first, so its MACs are booked on the final layer norm (the
    first gradient produced); wte's gradient is complete only at the very end."""
    n = _Net()
    n.add((vocab, d)); n.add((ctx, d))
    for _ in range(layers):
        n.norm(d)
        n.linear(3 * d, d, seq)
        n.linear(d, d, seq)
        n.norm(d)
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
    for _ in range(layers):
        n.norm(d, bias=False)
        n.linear(d, d, seq, bias=False)
        n.linear(kv, d, seq, bias=False)
        n.linear(kv, d, seq, bias=False)
        n.linear(d, d, seq, bias=False)
        n.norm(d, bias=False)
        n.linear(inter, d, seq, bias=False)
        n.linear(inter, d, seq, bias=False)
        n.linear(d, inter, seq, bias=False)
    n.norm(d, bias=False)
    n.linear(vocab, d, seq, bias=False)
    return n


def resnet_imagenet(blocks=(3, 4, 6, 3), classes: int = 1000) -> _Net:
    """torchvision ResNet-50 (v1.5: stride on the 3×3 conv), 224×224 input."""
    n = _Net()
    n.conv(64, 3, 7, 112); n.norm(64)
    in_c, hw = 64, 56
    for i, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for b in range(count):
            stride = 2 if (b == 0 and i > 0) else 1
            out_hw = hw // stride
            n.conv(width, in_c, 1, hw); n.norm(width)
            n.conv(width, width, 3, out_hw); n.norm(width)
            n.conv(4 * width, width, 1, out_hw); n.norm(4 * width)
            if b == 0:
                n.conv(4 * width, in_c, 1, out_hw); n.norm(4 * width)
            in_c, hw = 4 * width, out_hw
    n.linear(classes, in_c, 1)
    return n


def resnet18_cifar(classes: int = 10) -> _Net:
    """ResNet-18 for 32×32 CIFAR (3×3 stem, no max-pool; He et al. 2016)."""
    n = _Net()
    n.conv(64, 3, 3, 32); n.norm(64)
    in_c, hw = 64, 32
    for i, width in enumerate((64, 128, 256, 512)):
        for b in range(2):
            stride = 2 if (b == 0 and i > 0) else 1
            out_hw = hw // stride
            n.conv(width, in_c, 3, out_hw); n.norm(width)
            n.conv(width, width, 3, out_hw); n.norm(width)
            if stride != 1 or in_c != width:
                n.conv(width, in_c, 1, out_hw); n.norm(width)
            in_c, hw = width, out_hw
    n.linear(classes, in_c, 1)
    return n


def vgg16(classes: int = 1000) -> _Net:
    """torchvision VGG-16 (configuration D, no batch norm), 224×224 input."""
    n = _Net()
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    in_c, hw = 3, 224
    for v in cfg:
        if v == "M":
            hw //= 2
            continue
        n.conv(v, in_c, 3, hw, bias=True)
        in_c = v
    n.linear(4096, 512 * 7 * 7, 1); n.linear(4096, 4096, 1); n.linear(classes, 4096, 1)
    return n


def _profile(name, net: _Net, flops, batch, mfu, source) -> ModelProfile:
    return ModelProfile(name, tuple(net.shapes), float(flops), tuple(net.macs), batch, mfu, source)


_CNN_MFU = 0.22      # catalog notes: CNN training ≈ 20–25 % MFU (derived from NVIDIA's ResNet-50 numbers)
_TRANSFORMER_MFU = 0.40  # catalog notes: large transformers ≈ 30–55 % MFU

BUILTIN: dict[str, callable] = {
    "bert-large": lambda: _profile("bert-large", bert(24, 1024), 0.264e12, 8, _TRANSFORMER_MFU,
                                   "Devlin et al. 2019 (24 layers, d=1024), T=128"),
    "bert-base": lambda: _profile("bert-base", bert(12, 768), 0.085e12, 32, _TRANSFORMER_MFU,
                                  "Devlin et al. 2019 (12 layers, d=768), T=128"),
    "resnet-50": lambda: _profile("resnet-50", resnet_imagenet(), 24.7e9, 64, _CNN_MFU,
                                  "torchvision resnet50, ImageNet 224 px (4.11 G MACs)"),
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
           "resnet18": "resnet-18", "vgg16": "vgg-16", "gpt2": "gpt2-124m", "gpt2-small": "gpt2-124m",
           "tinyllama": "tinyllama-1.1b", "llama7b": "llama-7b"}
