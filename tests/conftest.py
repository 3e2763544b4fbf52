import atexit
import gc
import os
import resource
import shutil
import tempfile
import zlib

import numpy as np
import pytest
from support.devices import device_params

# Compile into a per-session cache so tests never depend on a developer's cache. pytest-xdist's
# workers start after this runs in the controller and inherit its environment: they share one
# cache (safe for several processes, backends/numba_cache.py), loading what another compiled.
# The process that made it (the controller, which outlives its workers) removes it when it exits.
if not os.environ.get("GRADKERN_CACHE_DIR"):
    os.environ["GRADKERN_CACHE_DIR"] = tempfile.mkdtemp(prefix="gradkern-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GRADKERN_CACHE_DIR"], ignore_errors=True)
# The suite's arrays are tiny, so its parallel launches take their serial twins (backends/numba_cpu.py), as a
# user's launches of under GRADKERN_SERIAL_THREADS threads do: the same source compiled without
# parallel=True, in less than half the compile time. tests/backends/test_serial_twin.py runs a sample of every
# signature in every mode through the parallel entries and their twins, bit for bit (docs/testing.md).
# No compile workers (runtime/compile_pool.py): pytest-xdist already keeps every core compiling, and a
# worker per test process would only contend with them; tests/runtime/test_compile_pool.py turns them on.
os.environ.setdefault("GRADKERN_COMPILE_WORKERS", "0")
# Idle OpenMP threads wait passively: after each parallel launch libgomp's workers otherwise spin before they
# sleep, and with two test processes on two cores the spinning takes the CPU the other process compiles on
# (docs/performance.md, "Idle OpenMP threads spin"; docs/testing.md, "Test time"). Same code, same results: only
# how an idle thread waits. libgomp reads it once, when Numba first loads it, which is after this line.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


# Modules marked `interp_in_ci` run each test on the reference interpreter (docs/testing.md, "Test time"): their
# subject is a transform's output, which a backend only prints, and most of their CPU was Numba compiling each
# test's kernels once. A test marked `numba` (it reads Numba's source or behaviour) keeps the default backend, and
# so does every NUMBA_EVERY-th test by a hash of its id, the sample that runs the same checks compiled; a test that
# picks its backend itself (a parameter `interp`) is left alone, and so is every test when $GRADKERN_BACKEND names a
# default. GRADKERN_TEST_NUMBA_EVERY=1 runs them all on Numba as before, 0 none (to find the tests that need the
# `numba` mark).
NUMBA_EVERY = int(os.environ.get("GRADKERN_TEST_NUMBA_EVERY", "4"))


def on_interpreter_in_ci(item) -> bool:
    """Whether `item` runs on the interpreter (above): in an `interp_in_ci` module, not marked `numba`, not in the
    Numba sample, not choosing its backend itself."""
    if NUMBA_EVERY == 1 or item.get_closest_marker("interp_in_ci") is None or os.environ.get("GRADKERN_BACKEND"):
        return False  # GRADKERN_BACKEND=hostcuda reruns the suite on the CUDA path (docs/hostcuda.md): all of it
    if item.get_closest_marker("numba") is not None or "interp" in getattr(getattr(item, "callspec", None),
                                                                         "params", {}):
        return False
    return NUMBA_EVERY == 0 or zlib.crc32(item.nodeid.encode()) % NUMBA_EVERY != 0


@pytest.fixture(autouse=True)
def _backend_in_ci(request):
    """The default backend of the test's NumPy launches: the interpreter where `on_interpreter_in_ci`, restored
    after (backends.set_default: $GRADKERN_BACKEND is read once per process, docs/testing.md)."""
    if not on_interpreter_in_ci(request.node):
        yield
        return
    from gradkern import backends
    before = backends.set_default("interp")
    try:
        yield
    finally:
        backends.set_default(before)


@pytest.fixture(params=device_params())
def device(request):
    """Each device the GPU tests run on (tests/support/devices.py): CuPy on a GPU, hostcuda everywhere g++ is."""
    return request.param


@pytest.fixture
def frozen_heap():
    """Objects alive before the test are moved out of the cyclic collector's reach (gc.freeze) until it ends: a
    test that calls gc.collect() to see what its own calls left alive scans only what it made. Late in a CI
    worker the heap holds millions of objects (every kernel compiled so far) and each gc.collect() took 2-7 s of
    CPU (docs/testing.md, "Test time"). Objects the test made are collected as before; nothing is lost, the frozen
    ones go back to the oldest generation after the test."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """One full collection when the tests are done, then the heap frozen (gc.freeze) for the rest of the process.
    pytest collects twice more after this (unconfigure and cleanup, to report what finalizers raise), and a
    pytest-xdist worker does so after telling the controller it has finished: execnet then gives it 5 s before it
    sends the worker a SIGINT, and 10 s more before os._exit. Late in CI a worker's heap holds millions of objects
    and each collection took seconds, so the SIGINT landed in whatever Python code the collector was running
    (hypothesis's gc callback: "Exception ignored in ... gc_callback ... KeyboardInterrupt", every CI run). Collected
    here, before the worker reports, the same garbage is found and its finalizers' exceptions reported as before;
    the later collections, the interpreter's at exit included, scan only what is newer. What must happen at exit is
    registered with atexit (temporary directories, docs/caching.md#temporary-files), which runs all the same
    (docs/testing.md, "Test time")."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/support/golden/ from the current code generator")


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


# GRADKERN_TEST_TIMES=FILE: one line per test as it finishes ("seconds<TAB>cpu seconds<TAB>outcome<TAB>test id",
# appended by the controlling process only), so a suite over its time budget shows where the time goes even when
# it is stopped before pytest's --durations table (docs/testing.md). The CPU column is the test process's own CPU
# (its compile threads included) plus that of the children it waited for (g++, subprocesses, mpiexec), over the
# test's setup and call: on a loaded machine wall time says little, CPU time what a test costs.
_TIMES = os.environ.get("GRADKERN_TEST_TIMES")


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    start = _cpu() if _TIMES else 0.0
    yield
    if _TIMES:
        item._gk_cpu = _cpu() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = _cpu() if _TIMES else 0.0
    yield
    if _TIMES:
        item.user_properties.append(("cpu", getattr(item, "_gk_cpu", 0.0) + _cpu() - start))


def pytest_runtest_logreport(report):
    if _TIMES and report.when == "call" and "PYTEST_XDIST_WORKER" not in os.environ:
        cpu = dict(report.user_properties).get("cpu", float("nan"))
        with open(_TIMES, "a", encoding="utf-8") as f:
            f.write(f"{report.duration:.2f}\t{cpu:.2f}\t{report.outcome}\t{report.nodeid}\n")
