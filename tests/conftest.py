import os
import tempfile

import numpy as np
import pytest
from devices import device_params

# Compile into a per-session cache so tests never depend on a developer's cache. pytest-xdist's
# workers start after this runs in the controller and inherit its environment: they share one
# cache (safe for several processes, backends/numba_cache.py), loading what another compiled.
if not os.environ.get("GRADKERN_CACHE_DIR"):
    os.environ["GRADKERN_CACHE_DIR"] = tempfile.mkdtemp(prefix="gradkern-test-cache-")
# The suite's arrays are tiny: by default their parallel launches would all take the serial twins
# (backends/numba_cpu.py), and the prange code users run at scale would go untested. The suite runs the
# parallel entries; tests/test_serial_twin.py checks the twins against them.
os.environ.setdefault("GRADKERN_SERIAL_THREADS", "0")


@pytest.fixture(params=device_params())
def device(request):
    """Each device the GPU tests run on (tests/devices.py): CuPy on a GPU, hostcuda everywhere g++ is."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current code generator")


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")
