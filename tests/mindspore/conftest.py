"""MindSpore suites: CPU, graph mode; each test module sets MindSpore up once."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("GLOG_v", "3")


@pytest.fixture(scope="session", autouse=True)
def _mindspore_cpu():
    from backends.mindspore.runtime import setup
    setup("CPU")
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
