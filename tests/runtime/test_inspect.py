"""gk.inspect in reverse mode says which kernels gk.autodiff runs and how each
Active scalar's per-thread derivatives are summed, and that matches what a
call then runs."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step, heat_step_2d, saxpy
from gradkern.runtime import call


@gk.kernel
def powers(x, y, a, m):
    i = gk.tid()
    s = x[i]
    for _ in range(m):
        s = gk.sin(s) * a  # overwritten in a loop: taped
    y[i] = s


def _roles_run(kernel, *args) -> tuple[str, ...]:
    """The roles of the kernels one gk.autodiff call runs, in order, seen through the runtime's seam."""
    seen: list[str] = []
    with call.observing(lambda run, dim, seconds: seen.append(run.role)):
        gk.autodiff(kernel, *args)
    return tuple(seen)


def _saxpy_args(rng, n=64):
    return gk.Active(1.5), gk.Duplicated(rng.random(n), np.zeros(n)), gk.Duplicated(rng.random(n), rng.random(n))


def test_active_scalar_sums_by_partial_sums_on_the_cpu(rng, monkeypatch):
    args = _saxpy_args(rng)
    ins = gk.inspect(saxpy, *args, mode=gk.Reverse)
    assert ins.runs == ("fused",)  # the sum vectorises in the fused loop (docs/adjoint-forms.md, section 9)
    assert ins.runs == _roles_run(saxpy, *args)
    assert set(ins.active_sums) == {"a"} and "per-chunk partial sums" in ins.active_sums["a"]
    assert "no atomics" in ins.active_sums["a"]


def test_active_scalar_sums_on_the_gpu_are_atomic(rng):
    ins = gk.inspect(saxpy, *_saxpy_args(rng), mode=gk.Reverse, backend="cuda")
    assert ins.runs == ("fused",) and "atomic add" in ins.active_sums["a"]


def test_vector_mode_reports_the_sum_of_its_lanes(rng):
    x, y = rng.random(32), rng.random(32)
    ins = gk.inspect(saxpy, gk.Active(1.5), gk.BatchDuplicated(x, (np.zeros(32), np.ones(32))),
                     gk.BatchDuplicated(y, (rng.random(32), rng.random(32))), mode=gk.Reverse)
    assert "per-chunk partial sums" in ins.active_sums["a"]


@pytest.mark.parametrize("case", ["taped", "const", "gather"])
def test_runs_matches_the_call(rng, monkeypatch, case):
    n = 48
    if case == "taped":  # a tape: the fused kernel sums the Active scalar
        kernel, args = powers, (gk.Duplicated(rng.uniform(0.1, 1, n), np.zeros(n)),
                                gk.Duplicated(rng.random(n), rng.random(n)), gk.Active(0.9), 3)
    elif case == "const":  # nothing Active: fused
        kernel, args = allen_cahn_step, (gk.Duplicated(rng.random(n), np.zeros(n)),
                                         gk.Duplicated(rng.random(n), rng.random(n)), gk.Const(0.1), gk.Const(0.01))
    else:
        kernel, args = heat_step_2d, (gk.Duplicated(rng.random((8, 8)), np.zeros((8, 8))),
                                      gk.Duplicated(rng.random((8, 8)), rng.random((8, 8))), gk.Const(0.1))
    ins = gk.inspect(kernel, *args, mode=gk.Reverse)
    assert ins.runs == _roles_run(kernel, *args)
    if case == "taped":
        assert ins.runs == ("fused",) and ins.tape_bytes_per_thread > 0
        assert "per-chunk partial sums" in ins.active_sums["a"]
    else:
        assert ins.active_sums == {}


def test_vector_mode_in_groups_of_lanes_reports_the_split_plan(rng):
    """On the CPU lanes run in groups (Backend.lane_group): with a gather and nothing taped, each group's
    gather, then one fused launch of all lanes; otherwise the primal once, then each group's reverse."""
    from gradkern.backends import backend

    k = backend("cpu").lane_group + 1  # more lanes than one group holds
    n = 40
    heat = (gk.BatchDuplicated(rng.random((8, 8)), tuple(np.zeros((8, 8)) for _ in range(k))),
            gk.BatchDuplicated(rng.random((8, 8)), tuple(rng.random((8, 8)) for _ in range(k))), gk.Const(0.1))
    assert gk.inspect(heat_step_2d, *heat, mode=gk.Reverse).runs == ("gather", "fused")
    x, y = rng.random(n), rng.random(n)
    ins = gk.inspect(saxpy, gk.Active(1.5), gk.BatchDuplicated(x, tuple(np.zeros(n) for _ in range(k))),
                     gk.BatchDuplicated(y, tuple(rng.random(n) for _ in range(k))), mode=gk.Reverse)
    assert ins.runs == ("augmented_primal", "reverse") and "per-chunk partial sums" in ins.active_sums["a"]
    assert gk.inspect(heat_step_2d, *heat, mode=gk.Reverse, backend="cuda").runs == ("gather", "fused")
