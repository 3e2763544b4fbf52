"""The suite's interpreter switch (tests/conftest.py `on_interpreter_in_ci`, docs/testing.md "Test time"): in a module
marked `interp_in_ci`, a test's launches that name no backend run on the interpreter but for the Numba sample and
the tests marked `numba`, and the default is restored after each test."""

import os
import zlib

import numpy as np
import pytest
from conftest import NUMBA_EVERY, on_interpreter_in_ci

import gradkern as gk
from gradkern import backends

pytestmark = pytest.mark.interp_in_ci

DEFAULT = os.environ.get("GRADKERN_BACKEND") or "cpu"


@gk.kernel
def double(x):
    i = gk.tid()
    x[i] = 2.0 * x[i]


@pytest.mark.parametrize("k", range(8))
def test_a_test_runs_where_the_sample_says(k, request):
    switched = on_interpreter_in_ci(request.node)
    assert backends.default_name() == ("interp" if switched else DEFAULT)
    if NUMBA_EVERY > 1 and not os.environ.get("GRADKERN_BACKEND"):
        assert switched == (NUMBA_EVERY == 0 or zlib.crc32(request.node.nodeid.encode()) % NUMBA_EVERY != 0)
    x = np.arange(4.0)
    gk.launch(double, 4, x)
    np.testing.assert_array_equal(x, [0.0, 2.0, 4.0, 6.0])


@pytest.mark.numba
def test_a_numba_test_keeps_the_default(request):
    """In file order after the parametrised test, in the same process: what a switched test set was undone."""
    assert not on_interpreter_in_ci(request.node)
    assert backends.default_name() == DEFAULT
