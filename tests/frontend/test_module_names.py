"""Module-level names are read once (frontend/captured.py, docs/kernel-language.md "Module-level names are read
once"): a kernel folds in the constants, tables and device functions its module holds when it is made; a launch
after one of them was rebound or changed in place is refused with LaunchError naming it, before anything runs,
never run on the value the kernel read (it was, silently, before session 55). On the interpreter: what is
checked is the launch's entry, not the backend."""

from __future__ import annotations

import types

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk

SCALE = 2.0
TABLE = (1.0, 2.0, 3.0)
CONFIG = types.SimpleNamespace(dt=0.5)  # a configuration object (or module) read by attribute
WEIGHTS = (0.5, 0.25, 0.25)


@gk.func
def helper(v):
    return SCALE * v


@gk.kernel
def scaled(x, y):
    i = gk.tid()
    y[i] = SCALE * x[i]


@gk.kernel
def tabled(x, y):
    i = gk.tid()
    y[i] = TABLE[1] * x[i] + WEIGHTS[0]


@gk.kernel
def dotted(x, y):
    i = gk.tid()
    y[i] = CONFIG.dt * x[i] + np.pi


@gk.kernel
def through_helper(x, y):
    i = gk.tid()
    y[i] = helper(x[i])


@pytest.fixture(autouse=True)
def interp(monkeypatch):
    on_interpreter(monkeypatch)


def _xy():
    return np.arange(1.0, 5.0), np.zeros(4)


@pytest.mark.parametrize("kernel", [scaled, through_helper], ids=["kernel", "device function"])
def test_a_rebound_constant_is_refused_and_an_equal_one_is_not(kernel, monkeypatch):
    x, y = _xy()
    gk.launch(kernel, 4, x, y)
    np.testing.assert_array_equal(y, 2.0 * x)
    monkeypatch.setitem(globals(), "SCALE", 2.0 * 1.0)  # an equal value, another object: still the constant
    gk.launch(kernel, 4, x, y)
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    y[:] = -1.0
    with pytest.raises(gk.LaunchError, match=r"module-level name 'SCALE' .*\(2\.0\), and it is 3\.0 now") as err:
        gk.launch(kernel, 4, x, y)
    assert "pass 'SCALE' as an argument" in err.value.hint
    np.testing.assert_array_equal(y, -1.0)  # nothing ran
    with pytest.raises(gk.LaunchError, match="'SCALE'"):  # every verb
        gk.autodiff(kernel, gk.Duplicated(x, np.ones(4)), gk.Duplicated(y, np.ones(4)), dim=4)
    again = gk.kernel(kernel.fn)  # made again: reads 3.0
    gk.launch(again, 4, x, y)
    np.testing.assert_array_equal(y, 3.0 * x)


def test_a_rebound_table_is_refused(monkeypatch):
    x, y = _xy()
    gk.launch(tabled, 4, x, y)
    np.testing.assert_array_equal(y, 2.0 * x + 0.5)
    monkeypatch.setitem(globals(), "TABLE", (1.0, 2.0, 3.0))  # an equal tuple: the same constants
    gk.launch(tabled, 4, x, y)
    monkeypatch.setitem(globals(), "TABLE", (1.0, 5.0, 3.0))
    with pytest.raises(gk.LaunchError, match=r"'TABLE' .*\(\(1\.0, 2\.0, 3\.0\)\), and it is \(1\.0, 5\.0, 3\.0\)"):
        gk.launch(tabled, 4, x, y)


def test_closure_cells_and_a_rebound_device_function_are_refused():
    def make():
        c = 1.5

        @gk.kernel
        def closed(x, y):
            i = gk.tid()
            y[i] = c * x[i]

        def change():
            nonlocal c
            c = 4.0
        return closed, change
    closed, change = make()
    x, y = _xy()
    gk.launch(closed, 4, x, y)
    change()
    with pytest.raises(gk.LaunchError, match=r"'c' when it was made \(1\.5\), and it is 4\.0 now"):
        gk.launch(closed, 4, x, y)

    def make_with_helper():
        @gk.func
        def f(v):
            return v + 1.0

        @gk.kernel
        def calls(x, y):
            i = gk.tid()
            y[i] = f(x[i])

        def rebind():
            nonlocal f

            @gk.func
            def f(v):
                return v + 2.0
        return calls, rebind
    calls, rebind = make_with_helper()
    gk.launch(calls, 4, x, y)
    rebind()
    with pytest.raises(gk.LaunchError, match="'f' when it was made"):
        gk.launch(calls, 4, x, y)


def test_a_program_replaying_a_launch_is_refused_too(monkeypatch):
    """A program's launches are replayed without their signature (program/replay.py `signed`, record.py): the
    check is on that path too, so a constant rebound between two programs' calls is refused in the second."""
    def prog(x, y):
        for _ in range(3):
            gk.launch(scaled, 4, x, y)
    x, y = _xy()
    gk.autodiff(prog, gk.Duplicated(x, np.ones(4)), gk.Duplicated(y, np.ones(4)))
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    dx, dy = np.ones(4), np.ones(4)
    with pytest.raises(gk.LaunchError, match="'SCALE'"):
        gk.autodiff(prog, gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    np.testing.assert_array_equal(dx, 1.0)
    np.testing.assert_array_equal(dy, 1.0)


def test_an_attribute_read_through_a_module_level_object_is_refused_once_changed(monkeypatch):
    """`CONFIG.dt` (an object's or a configuration module's attribute) is folded in as `SCALE` is: a change to
    it, not only a rebinding of CONFIG, is refused; NumPy's own attributes (`np.pi`) are not kept."""
    x, y = _xy()
    gk.launch(dotted, 4, x, y)
    np.testing.assert_allclose(y, 0.5 * x + np.pi, rtol=1e-15)
    assert [key[1:] for key in dotted._captured.entries] == [("CONFIG", ()), ("CONFIG", ("dt",))]
    monkeypatch.setattr(CONFIG, "dt", 0.75)
    y[:] = -1.0
    with pytest.raises(gk.LaunchError, match=r"'CONFIG\.dt' when it was made \(0\.5\), and it is 0\.75 now"):
        gk.launch(dotted, 4, x, y)
    np.testing.assert_array_equal(y, -1.0)


def test_kernels_that_read_no_module_names_keep_no_check():
    @gk.kernel
    def plain(x, y, a):
        i = gk.tid()
        y[i] = a * x[i] + np.float64(1.0) * gk.clamp(x[i], 0.0, 9.0)
    assert plain._captured is None
    assert scaled._captured is not None
