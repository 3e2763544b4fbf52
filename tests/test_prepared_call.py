"""One prepared call (runtime/call.py, docs/prepared-call.md): the path of a call whose signature was
prepared before enters binding.py at most 3 times (counted with sys.setprofile), every verb's runs are
seen through the runtime's seam (call.observing), and gk.inspect reports the runs a call makes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import heat_step_2d, saxpy
from gradkern.runtime import call


def _entries(fn, module: str = "runtime/binding.py") -> list[str]:
    """The functions of `module` entered while `fn` runs (Python calls, each frame counted once)."""
    seen: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.replace("\\", "/").endswith(module):
            seen.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


@pytest.fixture
def saxpy_calls(rng):
    x, y, dx, dy = rng.random(8), rng.random(8), np.zeros(8), rng.random(8)
    return {
        "launch": lambda: gk.launch(saxpy, 8, 1.5, x, y),
        "reverse": lambda: gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy)),
        "forward": lambda: gk.autodiff(saxpy, gk.Duplicated(1.5, 1.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy),
                                       mode=gk.Forward),
    }


@pytest.mark.parametrize("verb", ["launch", "reverse", "forward"])
def test_a_prepared_call_enters_binding_at_most_three_times(saxpy_calls, verb):
    fn = saxpy_calls[verb]
    for _ in range(3):  # prepared, then found again
        fn()
    entered = _entries(fn)
    assert len(entered) <= 3, entered


def test_the_seam_sees_every_run_of_every_verb(saxpy_calls):
    seen: list = []
    with call.observing(lambda run, dim, seconds: seen.append((run.role, dim, seconds >= 0))):
        for verb in ("launch", "reverse", "forward"):
            saxpy_calls[verb]()
    roles = [r for r, _, _ in seen]
    assert roles == ["primal", *gk.inspect(saxpy, gk.Active(1.5), gk.Duplicated(np.ones(8), np.ones(8)),
                                            gk.Duplicated(np.ones(8), np.ones(8)), mode=gk.Reverse).runs,
                     "forward_mode"]
    assert all(dim == (8,) and ok for _, dim, ok in seen)
    saxpy_calls["launch"]()  # the seam is gone
    assert len(seen) == len(roles)


def test_inspect_lists_every_launch_in_every_mode(rng):
    u, un = rng.random((8, 8)), rng.random((8, 8))
    k = 5  # more lanes than one CPU group holds (Backend.lane_group)
    du, dun = tuple(np.zeros((8, 8)) for _ in range(k)), tuple(rng.random((8, 8)) for _ in range(k))
    assert gk.inspect(heat_step_2d, u, un, 0.1).launches == ("primal",)
    cases = {gk.Reverse: (gk.BatchDuplicated(u, du), gk.BatchDuplicated(un, dun), gk.Const(0.1)),
             gk.Forward: (gk.BatchDuplicated(u, du), gk.BatchDuplicated(un, dun), 0.1)}
    seen: list = []
    for mode, args in cases.items():
        ins = gk.inspect(heat_step_2d, *args, mode=mode)
        seen.clear()
        with call.observing(lambda run, dim, seconds: seen.append(run.label)):
            gk.autodiff(heat_step_2d, *args, mode=mode)
        assert ins.launches == tuple(seen) and len(seen) > 1, (mode, seen)
