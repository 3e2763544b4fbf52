"""A call compiles only what it runs (issue 18, item 3). Numba compiles a generated function on its first
call (backends/numba_cpu.py): the serial twins, and the parallel loop `<entry>_edges` that a 1-D split
launch uses when its edges are too wide to run serially, are printed beside their entry but compiled only
by a launch that needs them; when one does, it gives the results the other paths give."""

from __future__ import annotations

import hashlib
import sys

import numpy as np
from numba.core.dispatcher import Dispatcher

import gradkern as gk
from gradkern.backends import numba_loops, numba_plan


def _compiled(source: str) -> dict[str, bool]:
    """Each njit function of the generated module printed as `source`: whether it has been compiled."""
    mod = sys.modules["gradkern_gen_" + hashlib.sha256(source.encode()).hexdigest()[:24]]
    return {name: bool(f.signatures) for name, f in vars(mod).items() if isinstance(f, Dispatcher)}


@gk.kernel
def allen_cahn_lazy(u, un, c, dt):
    """gradkern.kernels.allen_cahn_step under a name of its own: no other test compiles its generated
    module (modules are shared by source, and a small launch elsewhere would compile the serial twin)."""
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        ui = u[i]
        un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


def test_a_gradient_compiles_only_its_parallel_entries():
    n = 1000
    u, un, du, dun = np.linspace(0.0, 1.0, n), np.zeros(n), np.zeros(n), np.ones(n)
    args = (gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Const(0.2), gk.Const(0.01))
    gk.autodiff(allen_cahn_lazy, *args)
    sources = gk.inspect(allen_cahn_lazy, *args, mode=gk.Reverse).sources
    for role, entry in (("fused", "allen_cahn_lazy_grad_1d"), ("gather", "allen_cahn_lazy_gather_1d")):
        compiled = _compiled(sources[role])
        # the siblings: the serial twin, and the wide edges' loop or (a gather that clears row-lagged, in
        # chunks: docs/adjoint-forms.md, section 6) the chunks' serial path
        siblings = {f"{entry}_serial", f"{entry}_edges" if role == "fused" else f"{entry}_atomics_serial"}
        assert compiled == {entry: True, **dict.fromkeys(siblings, False)}, role


@gk.kernel
def head(u, out, m):
    i = gk.tid()
    if i < m:
        out[i] = u[i] * u[i]
    else:
        out[i] = 2.0 * u[i]


def test_wide_edges_run_in_their_lazily_compiled_parallel_loop(rng):
    """`i < m`: the threads from m on are the edge; 1000 - m of them run serially in the entry up to
    SERIAL_EDGES, in `head_1d_edges` beyond, which the first launch with wide edges compiles."""
    n = 1000
    u = rng.uniform(0.5, 1.5, n)
    source = gk.inspect(head, u, np.zeros(n), 900).source
    assert "def head_1d_edges(" in source and f"if _gkb_w0 <= {numba_loops.SERIAL_EDGES}:" in source
    for m in (n - numba_loops.SERIAL_EDGES, 0, 1, 100, n - numba_loops.SERIAL_EDGES - 1, n, n + 5):
        out, want = np.zeros(n), np.zeros(n)
        gk.launch(head, n, u, out, m)
        gk.launch(head, n, u, want, m, backend="interp")
        np.testing.assert_array_equal(out, want)
        if m == n - numba_loops.SERIAL_EDGES:  # the first launch: its edges are narrow enough
            assert _compiled(source) == {"head_1d": True, "head_1d_serial": False, "head_1d_edges": False}
    assert _compiled(source)["head_1d_edges"]


def test_wide_edges_of_a_gradient(rng):
    n, m = 1000, 100
    u = rng.uniform(0.5, 1.5, n)
    dout = rng.uniform(-1.0, 1.0, n)
    du, out, d_out = np.zeros(n), np.zeros(n), dout.copy()
    gk.autodiff(head, gk.Duplicated(u, du), gk.Duplicated(out, d_out), gk.Const(m))
    want = np.where(np.arange(n) < m, 2.0 * u * dout, 2.0 * dout)
    np.testing.assert_allclose(du, want, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(out, np.where(np.arange(n) < m, u * u, 2.0 * u))
    assert not d_out.any()
    sources = gk.inspect(head, gk.Duplicated(u, du), gk.Duplicated(out, d_out), gk.Const(m),
                         mode=gk.Reverse).sources
    assert any(name.endswith("_edges") and done for src in sources.values() for name, done in _compiled(src).items())


@gk.kernel
def matvec_lazy(A, x, y, n):
    """x[j] is read by every thread: its shadow takes per-chunk private copies in a gradient."""
    i = gk.tid()
    s = 0.0
    for j in range(n):
        s += A[i, j] * x[j]
    y[i] = s


def test_the_serial_path_of_private_copies_compiles_only_when_a_launch_takes_it(rng, monkeypatch):
    """A gradient whose atomic adds go to per-chunk private copies compiles its parallel entry; the serial
    path that runs when the copies would pass the memory limit (`_gkb_chunks` = 0) is `<entry>_atomics_serial`,
    compiled by the first launch that takes it, with the same result up to the order of the sums."""
    m, n = 40, 30
    A, x, w = rng.uniform(-1.0, 1.0, (m, n)), rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, m)

    def gradient():
        dA, dx = np.zeros((m, n)), np.zeros(n)
        args = (gk.Duplicated(A, dA), gk.Duplicated(x, dx), gk.Duplicated(np.zeros(m), w.copy()), gk.Const(n))
        gk.autodiff(matvec_lazy, *args, dim=m)
        return dA, dx, gk.inspect(matvec_lazy, *args, dim=m, mode=gk.Reverse)
    dA, dx, ins = gradient()
    np.testing.assert_allclose(dx, A.T @ w, rtol=1e-13)
    (role,) = ins.runs
    entry = f"matvec_lazy_{'grad' if role == 'fused' else role}_1d"
    compiled = _compiled(ins.sources[role])
    assert compiled[entry] and not compiled[f"{entry}_atomics_serial"], compiled
    monkeypatch.setattr(numba_plan, "private_chunks", lambda copy_bytes, n0, mixed=False, width=0: 0)
    dA2, dx2, _ = gradient()
    assert _compiled(ins.sources[role])[f"{entry}_atomics_serial"]
    np.testing.assert_array_equal(dA2, dA)  # each element's one plain add
    np.testing.assert_allclose(dx2, dx, rtol=1e-13)  # the same adds, summed in another order
