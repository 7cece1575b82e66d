"""Fixtures for the backend suites: ``ops`` runs a test on every backend."""
from __future__ import annotations

import pytest

from tests.backends.ops_backends import OPS_BACKENDS, get_ops


@pytest.fixture(params=OPS_BACKENDS)
def ops(request):
    return get_ops(request.param)
