"""The real-code kernels of benchmarks/compile/realcode.py (issue 29; docs/compile-time.md): each gradkern primal
against its hand-written Numba version, each gradient against finite differences (check_grad), on tiny
3-D shapes. Run with `python -m pytest -n0 benchmarks/compile/realcode_check.py` before reporting compile times.
Not in the CI suite yet: cold, the isoneutral program compiles 7 kernels in three modes for minutes, which
the suite's 25-minute budget cannot take until its compile time meets the issue's goals."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realcode as rc  # noqa: E402

pytestmark = pytest.mark.slow

# the isoneutral program's inner block is (nx - 3, ny - 4, nz): at least 2 x 2 x 3 threads
SHAPE = (5, 6, 3)


def _copies(args: dict) -> dict:
    return {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in args.items()}


def test_eos_matches_numba_and_its_gradient_checks():
    sa, ct, p, rho = rc.eos_inputs(SHAPE)
    want = np.zeros_like(rho)
    rc.eos(sa, ct, p, rho)
    rc.eos_numba(sa, ct, p, want)
    np.testing.assert_allclose(rho, want, rtol=1e-13)  # the same float64 arithmetic, maybe reassociated
    check_grad(rc.eos_density, *(gk.Duplicated(x, np.zeros_like(x)) for x in (sa, ct, p, rho)))


def test_isoneutral_matches_numba_and_its_gradient_checks():
    a = rc.isoneutral_inputs(SHAPE)
    b = _copies(a)
    rc.isoneutral(*[a[n] for n in rc.ISONEUTRAL_ARGS])
    rc.isoneutral_numba(*[b[n] for n in rc.ISONEUTRAL_ARGS])
    for n in rc.ISONEUTRAL_OUTPUTS:
        np.testing.assert_allclose(a[n], b[n], rtol=1e-12, atol=1e-300, err_msg=n)
    # the inputs reach the tapers' sloped part: the gradient is not that of a saturated taper
    tapered = np.abs(a["Ai_ez"][a["Ai_ez"] != 0])
    assert tapered.size and tapered.max() > 1e-4
    a = rc.isoneutral_inputs(SHAPE, seed=1)
    args = [gk.Duplicated(a[n], np.zeros_like(a[n])) if n in ("salt", "temp", *rc.ISONEUTRAL_OUTPUTS) else a[n]
            for n in rc.ISONEUTRAL_ARGS]
    check_grad(rc.isoneutral, *args)


def test_superbee_matches_numba_and_its_gradient_checks():
    a = rc.superbee_inputs(SHAPE)
    b = _copies(a)
    rc.superbee_step(*[a[n] for n in rc.SUPERBEE_ARGS])
    rc.superbee_numba(*[b[n] for n in rc.SUPERBEE_ARGS])
    for n in ("flux_e", "flux_n", "flux_t"):
        np.testing.assert_allclose(a[n], b[n], rtol=1e-13, atol=1e-300, err_msg=n)
    a = rc.superbee_inputs(SHAPE, seed=1)
    args = [gk.Duplicated(a[n], np.zeros_like(a[n])) if n in ("var", "u", "v", "w", "flux_e", "flux_n", "flux_t")
            else gk.Const(a[n]) for n in rc.SUPERBEE_ARGS]
    check_grad(rc.superbee_fluxes, *args)
