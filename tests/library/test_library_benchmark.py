"""benchmarks/library/library.py, the kernel library's benchmark driver, without
timing anything (its --quick run compiles every row's primal, reverse and
hand-written adjoint: minutes, not a test): every row that the
benchmarks/library/library_<family>.py modules define names a kernel of
gradkern.kernels and sets up arguments that kernel takes; rows are picked
by kernel or family name; the table reads goals and reasons right."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import gradkern.kernels as library

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks" / "library"


def _load():
    spec = importlib.util.spec_from_file_location("library_benchmark", BENCHMARKS / "library.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


# the driver puts benchmarks/ and its parts on sys.path (its rows import library_rows, report...): only while it loads
_path = list(sys.path)
bench = _load()
ROWS = bench.discover()
sys.path[:] = _path


def test_rows_are_discovered_from_every_family_module():
    modules = sorted(p.stem for p in BENCHMARKS.glob("library_*.py") if p.stem != "library_rows")
    assert sorted({family for family, _ in ROWS}) == sorted(m.removeprefix("library_") for m in modules
                                                           if getattr(importlib.import_module(m), "ROWS", None))
    names = [row.name for _, row in ROWS]
    assert len(names) == len(set(names)), "two rows with one name"


@pytest.mark.parametrize("family_row", ROWS, ids=[row.name for _, row in ROWS])
def test_row_names_a_library_kernel_and_sets_up_its_arguments(family_row):
    _, row = family_row
    kernel = bench.kernel_of(row)
    args, dim = row.setup(np.random.default_rng(0), 64)
    assert len(args) == len(bench.params(kernel)), f"{row.name}: setup's arguments do not match the kernel's"
    assert isinstance(dim, (int, tuple)), f"{row.name}: the launch extent must be an int or a tuple"
    assert all(a.dtype != np.float32 for a in args if isinstance(a, np.ndarray)), f"{row.name}: float64 only"
    assert int(row.traffic(args)) >= 0
    if row.wrt is not None:
        assert set(row.wrt) <= set(bench.params(kernel)), f"{row.name}: wrt names no parameter"


def _row(name):
    return bench.Row(name, lambda rng, n: ([], n), lambda args: 0)


def test_select_by_kernel_row_or_family_name_and_unknown_names_fail():
    rows = [("blas", _row("saxpy")), ("blas", _row("dot (out Const)")), ("stencils", _row("heat_step_2d"))]
    assert [r.name for _, r in bench.select(rows, "dot")] == ["dot (out Const)"]
    assert [r.name for _, r in bench.select(rows, "stencils,saxpy")] == ["saxpy", "heat_step_2d"]
    assert bench.select(rows, None) == rows
    with pytest.raises(SystemExit, match="no row or family named nope"):
        bench.select(rows, "saxpy,nope")


def test_a_row_name_must_name_a_library_kernel():
    assert bench.kernel_of(_row("saxpy (a Const)")) is library.saxpy
    with pytest.raises(LookupError, match="no kernel named 'no_such_kernel'"):
        bench.kernel_of(_row("no_such_kernel"))


def test_table_reads_goals_and_gives_reasons_for_misses(monkeypatch):
    monkeypatch.setitem(bench.REASONS, "slow_one", "its reverse is a serial loop")
    fast = bench.Result("blas", "fast_one", "1,024", primal_ms=1.0, grad_ms=2.0, hand_ms=1.6, traffic=10**6,
                        grad_traffic=3 * 10**6)
    slow = bench.Result("blas", "slow_one", "1,024", primal_ms=1.0, grad_ms=3.5, traffic=10**6, grad_traffic=10**6)
    no_hand_reason = bench.Result("blas", "other", "1,024", primal_ms=1.0, grad_ms=2.0, hand_ms=1.0)
    broken = bench.Result("blas", "broken", notes=["failed: LookupError: no kernel"])
    lines = bench.table([fast, slow, no_hand_reason, broken], copy_gbs=10.0).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells[0][4] == "1.0" and cells[0][5] == "10" and cells[0][-2:] == ["yes", "—"]  # 1 GB/s of 10
    assert cells[0][9] == "2.00" and cells[0][11] == "—" and cells[0][12] == "1.25"
    assert cells[1][-2:] == ["no", "its reverse is a serial loop"]
    assert cells[2][-2:] == ["no", "—"] and cells[2][4] == "—"  # 2x the hand-written: a miss; compute-bound
    assert cells[3][-2:] == ["—", "failed: LookupError: no kernel"]


def test_a_byte_bound_row_is_held_against_the_hand_written_ratio():
    """Above 3x its primal, a row with a hand-written adjoint meets its goal only by costing, over its own
    primal, no more than the hand-written gradient over the hand-written primal, or no more than the
    hand-written gradient itself (and within 1.3x of it in any case)."""
    as_costly = bench.Result("stencils", "a", primal_ms=1.0, grad_ms=3.2, hand_ms=3.0, hand_primal_ms=0.9)
    assert as_costly.hand_ratio == pytest.approx(3.0 / 0.9) and as_costly.met  # 3.2 <= 3.33, 1.07x the hand's
    worse = bench.Result("stencils", "b", primal_ms=1.0, grad_ms=3.6, hand_ms=3.0, hand_primal_ms=0.9)
    assert not worse.met  # 3.6 > 3.33
    slow_primal_hides_nothing = bench.Result("stencils", "c", primal_ms=2.0, grad_ms=4.0, hand_ms=2.9,
                                             hand_primal_ms=0.9)
    assert not slow_primal_hides_nothing.met  # 2.0 <= 3.2, but 1.38x the hand-written gradient
    no_hand_primal = bench.Result("stencils", "d", primal_ms=1.0, grad_ms=3.2, hand_ms=3.0)
    assert no_hand_primal.hand_ratio is None and not no_hand_primal.met  # then gradient <= hand
    fast_primal = bench.Result("stencils", "e", primal_ms=1.0, grad_ms=3.3, hand_ms=3.4, hand_primal_ms=1.25)
    assert fast_primal.ratio > fast_primal.hand_ratio and fast_primal.met  # 3.3 > 2.72, but 0.97x the hand's


def test_gpu_without_cupy_or_a_gpu_is_a_clear_error():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is here: --gpu would run")
    except Exception:
        pass
    with pytest.raises(SystemExit, match="--gpu needs"):
        bench.main(["--gpu", "--quick"])
