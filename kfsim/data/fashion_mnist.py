"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) from Debian's ``dataset-fashion-mnist``.

Four gzip-compressed IDX files live in ``/usr/share/datasets/fashion-mnist/``.
IDX format (big-endian): magic = 0x00 0x00 <type code> <ndim>, then ndim
uint32 sizes, then the data. Images: magic 0x00000803 (uint8, 3 dims: N, 28,
28); labels: magic 0x00000801 (uint8, 1 dim: N).

``load(split)`` returns ``(images float32 [N, 784] in [0, 1], labels int32 [N])``
with pixel / 255.
"""
from __future__ import annotations

import functools
import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from kfsim.data.errors import DataUnavailable

PACKAGE = "dataset-fashion-mnist"
DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
ENV_DIR = "KFSIM_FASHION_MNIST_DIR"  # override the directory (tests, other installs)
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60000),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10000),
}
IMAGE_MAGIC = 0x00000803
LABEL_MAGIC = 0x00000801
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def data_dir() -> Path:
    return Path(os.environ.get(ENV_DIR, DEFAULT_DIR))


def read_idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """Read one gzipped IDX file, checking its magic number and sizes."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (EOFError, OSError, zlib.error) as exc:  # truncated or not gzip at all
        raise ValueError(f"{path}: corrupt or truncated gzip file ({exc})") from None
    header = 4 + 4 * dims
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes)")
    (got,) = struct.unpack(">I", raw[:4])
    if got != magic:
        raise ValueError(f"{path}: bad IDX magic number 0x{got:08x}, expected 0x{magic:08x}")
    shape = struct.unpack(f">{dims}I", raw[4:header])
    size = int(np.prod(shape))
    if len(raw) - header != size:
        raise ValueError(f"{path}: IDX header says {shape} ({size} bytes) but {len(raw) - header} bytes follow")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


@functools.lru_cache(maxsize=2)
def _load(split: str, directory: str) -> tuple[np.ndarray, np.ndarray]:
    img_name, lab_name, expected = FILES[split]
    d = Path(directory)
    img_path, lab_path = d / img_name, d / lab_name
    missing = [p.name for p in (img_path, lab_path) if not p.is_file()]
    if missing:
        raise DataUnavailable("Fashion-MNIST", PACKAGE, f"missing {', '.join(missing)} in {d}")
    images = read_idx(img_path, IMAGE_MAGIC, 3)
    labels = read_idx(lab_path, LABEL_MAGIC, 1)
    if images.shape[1:] != (28, 28):
        raise ValueError(f"{img_path}: expected 28x28 images, got {images.shape[1:]}")
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"Fashion-MNIST {split}: {images.shape[0]} images but {labels.shape[0]} labels")
    if images.shape[0] != expected:
        raise ValueError(f"Fashion-MNIST {split}: expected {expected} samples, got {images.shape[0]}")
    if labels.max(initial=0) > 9:
        raise ValueError(f"{lab_path}: label {labels.max()} outside 0..9")
    x = images.reshape(images.shape[0], 784).astype(np.float32) / np.float32(255.0)
    y = labels.astype(np.int32)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def load(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(images float32 [N, 784] in [0, 1], labels int32 [N]) for "train" (60k) or "test" (10k).

    The arrays are cached and read-only; copy before modifying."""
    if split not in FILES:
        raise ValueError(f"fashion_mnist.load: split must be 'train' or 'test', got {split!r}")
    return _load(split, str(data_dir()))


def available() -> bool:
    """True when the package's files are present."""
    d = data_dir()
    return all((d / f).is_file() for s in FILES.values() for f in s[:2])
