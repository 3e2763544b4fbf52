import os
import tempfile

import numpy as np
import pytest

# Compile into a per-session cache so tests never depend on a developer's cache.
os.environ.setdefault("GRADKERN_CACHE_DIR", tempfile.mkdtemp(prefix="gradkern-test-cache-"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current code generator")


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")
