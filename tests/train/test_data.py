"""Data loaders: shapes, ranges, header validation, clear errors naming the package."""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from kfsim.data import DataUnavailable, fashion_mnist, kjv


def test_fashion_mnist_shapes_and_ranges(fmnist_small):
    x, y = fashion_mnist.load("train")
    assert x.shape == (60000, 784) and x.dtype == np.float32
    assert y.shape == (60000,) and y.dtype == np.int32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))
    xt, yt = fashion_mnist.load("test")
    assert xt.shape == (10000, 784) and np.bincount(yt).tolist() == [1000] * 10


def test_fashion_mnist_bad_split():
    with pytest.raises(ValueError, match="split"):
        fashion_mnist.load("valid")


def test_fashion_mnist_missing_names_package(tmp_path, monkeypatch):
    monkeypatch.setenv(fashion_mnist.ENV_DIR, str(tmp_path))
    with pytest.raises(DataUnavailable, match="apt-get install -y dataset-fashion-mnist"):
        fashion_mnist.load("test")


def _idx(path, magic, shape, payload):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(f">{len(shape)}I", *shape) + payload)


def test_fashion_mnist_validates_magic_and_sizes(tmp_path):
    p = tmp_path / "bad.gz"
    _idx(p, 0x00000802, (2, 28, 28), bytes(2 * 784))
    with pytest.raises(ValueError, match="magic"):
        fashion_mnist.read_idx(p, fashion_mnist.IMAGE_MAGIC, 3)
    _idx(p, fashion_mnist.IMAGE_MAGIC, (2, 28, 28), bytes(784))
    with pytest.raises(ValueError, match="bytes follow"):
        fashion_mnist.read_idx(p, fashion_mnist.IMAGE_MAGIC, 3)
    _idx(p, fashion_mnist.LABEL_MAGIC, (3,), bytes([1, 2, 3]))
    assert fashion_mnist.read_idx(p, fashion_mnist.LABEL_MAGIC, 1).tolist() == [1, 2, 3]


def test_kjv_text_vocab_and_round_trip(kjv_available):
    text = kjv.text()
    assert len(text) > 4_000_000 and text.lstrip().startswith("Genesis")
    assert len(kjv.vocab()) == 73
    s = "In the beginning God created the heaven and the earth."
    assert kjv.decode(kjv.encode(s)) == s
    tr, te = kjv.load("train"), kjv.load("test")
    assert tr.dtype == np.int32 and len(tr) + len(te) == len(text)
    x, y = kjv.windows(tr, np.array([0, 5]), 8)
    assert x.shape == y.shape == (2, 8) and (x[:, 1:] == y[:, :-1]).all()
    with pytest.raises(ValueError, match="not in the vocabulary"):
        kjv.encode("\u00e9")


def test_kjv_missing_names_package(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(kjv.shutil, "which", lambda name: None)
    kjv.text.cache_clear()
    try:
        with pytest.raises(DataUnavailable, match="apt-get install -y bible-kjv"):
            kjv.text()
    finally:
        kjv.text.cache_clear()
