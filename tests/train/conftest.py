"""Shared fixtures: tiny real data subsets (skipped only where the package is truly absent)."""
from __future__ import annotations

import pytest

from kfsim.data import fashion_mnist, kjv


@pytest.fixture(scope="session")
def fmnist_small():
    if not fashion_mnist.available():
        pytest.skip("Fashion-MNIST absent: apt-get install -y dataset-fashion-mnist")
    from kfsim.train import tasks

    return tasks.load("fmnist-mlp", limit_train=1024, limit_test=256)


@pytest.fixture(scope="session")
def kjv_available():
    if not kjv.available():
        pytest.skip("KJV text absent: apt-get install -y bible-kjv")
    return True
