"""A tenth round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 57): the
ports in tests/support/ported_loops10*.py (PyTorch's Adam and SGD with Nesterov momentum driving inverse problems,
pic-python's particle-in-cell loop, TeaLeaf's Jacobi solver, PyClaw's CFL-controlled SSP RK3 shallow water, LAMMPS'
Verlet run with its skin-triggered neighbour list, Devito's acoustic forward operator), leaning on NumPy between
launches as the drivers have it (optimiser updates rebound each step, minibatches gathered through index arrays,
the displacement check), a step rejected on its CFL number and retaken, a list rebuilt on a derived scalar, a
modular time buffer with injection and interpolation. Each port's primal is checked against a NumPy reference of
the same loop, its gradient by gradkern.testing.check_grad (central differences in float64, the dot-product test
and forward mode, random non-zero inputs, w.r.t. the state and an Active parameter) and, where its loop is
checkpointable, its gk.checkpointed_loop gradient against the store-all one (support/ported_loops.py:
check_loop_gradient). The spellings of the originals that are refused are pinned, each naming its line."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops10 as p10
from support import ported_loops10_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops import assert_same_gradient, plain, round_tests

import gradkern as gk
from gradkern.testing import check_grad


def _u(rng, *shape, lo=0.5, hi=1.5):
    return rng.uniform(lo, hi, shape)


def _dup(a):
    return gk.Duplicated(a, np.zeros_like(a))


def _padded(a):
    out = np.zeros((a.shape[0] + 2, a.shape[1] + 2))
    out[1:-1, 1:-1] = a
    return out


def _beams(rng, n=10):
    """pic-python's two counter-streaming beams: positions spread over the box, velocities +-v_b with a spread."""
    return _u(rng, n, lo=0.05, hi=0.95), np.where(np.arange(n) % 2, 0.3, -0.3) + _u(rng, n, lo=-0.05, hi=0.05)


def _water(rng, n=4):
    """A 1-D shallow-water state (h, hu) with a ghost cell each side (filled by the first stage)."""
    q = np.zeros((2, n + 2))
    q[0, 1:-1], q[1, 1:-1] = _u(rng, n, lo=0.8, hi=1.2), _u(rng, n, lo=-0.2, hi=0.2)
    return q


def _atoms(rng):
    """Six atoms on a staggered lattice closer than the soft pair's cutoff, so forces act from the start."""
    x = np.array([[0.45 * i + 0.3 * (j % 2), 0.4 * j] for i in range(3) for j in range(2)])
    return x + _u(rng, 6, 2, lo=-0.05, hi=0.05)


def _stencil_values(rng, n=6):
    """HPCG's matrix values (2 on the diagonal, -1 beside it), perturbed so each is an input of its own."""
    vals = pa.hpcg_matrix(n)[0]
    return vals + _u(rng, vals.shape[0], lo=-0.05, hi=0.05)


def _specs(rng):
    """name -> (program, its arguments, the loop -> program factory whose checkpointed twin is checked, or None)."""
    pos, vel = _beams(rng)
    labels = (rng.random(8) > 0.5).astype(float)
    return {
        "adam_fit": (p10.adam_fit(), [_dup(_u(rng, 3, lo=-1.0, hi=1.0)), _dup(_u(rng, 5, 3, lo=-1.0, hi=1.0)),
                                      _dup(_u(rng, 5, lo=-1.0, hi=1.0)), gk.Active(0.05)], p10.adam_fit),
        "sgd_nesterov": (p10.sgd_nesterov, [_dup(_u(rng, 3, lo=-0.5, hi=0.5)), _dup(_u(rng, 8, 3, lo=-1.0, hi=1.0)),
                                            gk.Const(labels), gk.Active(0.3)], None),
        "pic_two_stream": (p10.pic_two_stream(plain), [_dup(pos), _dup(vel), gk.Active(0.05)], p10.pic_two_stream),
        "tealeaf_jacobi": (p10.tealeaf_jacobi(), [_dup(_padded(_u(rng, 3, 3))), _dup(_u(rng, 5, 5)),
                                                  gk.Active(0.4)], None),
        "pyclaw_swe": (pa.pyclaw_swe(), [_dup(_water(rng)), gk.Active(9.81)], None),
        "lammps_verlet": (pa.lammps_verlet(), [_dup(_atoms(rng)), _dup(_u(rng, 6, 2, lo=-0.5, hi=0.5)),
                                               gk.Active(0.8)], None),
        "devito_acoustic": (pa.devito_acoustic(plain), [_dup(_u(rng, 6, 6, lo=0.8, hi=1.2)), _dup(np.zeros((5, 2))),
                                                        gk.Active(0.5)], pa.devito_acoustic),
        "hpcg_cg": (pa.hpcg_cg(), [_dup(_u(rng, 6, lo=-1.0, hi=1.0)), _dup(_u(rng, 6)),
                                   _dup(_stencil_values(rng)), gk.Active(0.3)], None),
    }


REFERENCES = {"adam_fit": p10.adam_reference, "sgd_nesterov": p10.sgd_reference, "pic_two_stream": p10.pic_reference,
              "tealeaf_jacobi": p10.tealeaf_jacobi_reference, "pyclaw_swe": pa.pyclaw_swe_reference,
              "lammps_verlet": pa.lammps_verlet_reference, "devito_acoustic": pa.devito_acoustic_reference,
              "hpcg_cg": pa.hpcg_cg_reference}

# Every port's check runs in CI on the interpreter (docs/testing.md "Test time"); their Numba twins all run under
# `full`: each compiles its kernels' primal, augmented primal, reverse and tangent and the host ufuncs' kernels,
# 18 s of CPU cold for SGD's (one kernel and five host ufuncs), 38 s for TeaLeaf's, beyond the round's 10 s.
FULL = set()
NUMBA_SAMPLE = set()
globals().update(round_tests(_specs, FULL, NUMBA_SAMPLE))


def _values(args):
    return [a.val.copy() if isinstance(a, gk.Duplicated) else a.val for a in args]


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_primal_matches_the_numpy_reference(name, monkeypatch):
    """The program run plainly (no derivative) on the interpreter against the same loop in NumPy, each output
    within 1e-12 of its largest value: a few dozen roundings a value (matmuls, bincount and the direct solve
    for the reference summing in another order)."""
    on_interpreter(monkeypatch)
    program, args, _ = _specs(np.random.default_rng(4))[name]
    values = _values(args)
    want = REFERENCES[name](*_values(args))
    program(*values)
    for k, expected in want.items():
        scale = float(np.max(np.abs(expected)))
        assert scale > 0.0, (name, k)
        np.testing.assert_allclose(values[k], expected, rtol=0, atol=1e-12 * scale, err_msg=f"{name} {k}")


def test_adam_names_rebound_are_the_buffer_spelling(monkeypatch):
    """PyTorch's moments and parameter rebound each step as NumPy expressions (host launches), the result copied
    into `x` at the end, against the checkpointable spelling writing them into buffers by gk.copy: the same values,
    so the same gradient (to 1e-12) and primals (bit for bit)."""
    on_interpreter(monkeypatch)
    program, args, _ = _specs(np.random.default_rng(3))["adam_fit"]
    assert_same_gradient(program, p10.adam_fit(plain), args)


def test_the_data_driven_paths_are_taken(monkeypatch):
    """The host decisions each port exists for happen on these inputs: PyClaw rejects the first step (CFL above
    1 at dt0) and takes the end time in two, LAMMPS rebuilds its list on some steps but not all, TeaLeaf's Jacobi
    stops on its change before the cap, HPCG's CG on its host-side norm."""
    on_interpreter(monkeypatch)
    specs = _specs(np.random.default_rng(1))
    rejected, steps, builds, iterations, cg = [], [], [], [], []
    pa.pyclaw_swe(rejected=rejected, steps=steps)(*_values(specs["pyclaw_swe"][1]))
    pa.lammps_verlet(builds=builds)(*_values(specs["lammps_verlet"][1]))
    p10.tealeaf_jacobi(iterations=iterations)(*_values(specs["tealeaf_jacobi"][1]))
    pa.hpcg_cg(iterations=cg)(*_values(specs["hpcg_cg"][1]))
    assert rejected[0] >= 1 and steps[0] >= 2, (rejected, steps)
    assert 0 < builds[0] < pa.LMP["nsteps"], builds
    assert 1 < iterations[0] < p10.TEA_JACOBI["max_iters"], iterations
    assert 1 < cg[0] < pa.HPCG_CG["max_iter"], cg


def _refused(program, args, match):
    """gk.autodiff of `program` raises gk.ProgramError matching `match` with every shadow unchanged (the launches
    before the refused line ran on the primals, as a program's launches run when called: those may differ)."""
    rng = np.random.default_rng(6)
    args = [gk.Duplicated(a.val.copy(), rng.standard_normal(a.val.shape)) if isinstance(a, gk.Duplicated) else a
            for a in args]
    before = [a.dval.copy() for a in args if isinstance(a, gk.Duplicated)]
    with pytest.raises(gk.ProgramError, match=match):
        gk.autodiff(program, *args)
    for a, dval in zip([a for a in args if isinstance(a, gk.Duplicated)], before):
        np.testing.assert_array_equal(a.dval, dval)
    return args


def test_adam_in_place_update_of_the_parameter_is_refused_naming_the_line(monkeypatch):
    """PyTorch's `param.addcdiv_(exp_avg, denom, value=-step_size)` as `x -= ...`: NumPy writing the parameter the
    gradient's launch took (the contract's host-write rule, docs/host-code.md "Elementwise NumPy"), refused at its
    line with gk.copy named; the rebound spelling (adam_fit) is the one that works."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["adam_fit"]
    kept = [a.val.copy() for a in args[:3]]
    args = _refused(p10.adam_in_place, args, r"a host write to 'x' at .*ported_loops10\.py:\d+ \(`x -= step_size \* "
                                      r"exp_avg(?s:.*)gk\.copy\(dst, src\)")
    for a, val in zip(args, kept):  # no launch before the refused line writes an argument
        np.testing.assert_array_equal(a.val, val)


def test_pyclaw_host_time_step_is_differentiated(monkeypatch):
    """PyClaw's `self.dt = min(self.dt_max, self.dt * self.cfl_desired / cfl)` on the host from the CFL number a
    kernel reduced, filled into the array the stages read: refused as a derived scalar when the port was written,
    a read and Active-scalar arithmetic since session 57's host reads (program/hostreads.py). Its gradient is the
    port's one-thread dt kernel's (the same float64 operations in the same order: rtol 1e-12 leaves a few ulps for
    the atomic sums), and check_grad's."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["pyclaw_swe"]
    assert_same_gradient(pa.pyclaw_swe(), pa.pyclaw_swe(host_dt=True), args)
    check_grad(pa.pyclaw_swe(host_dt=True), *args, max_coords=6)


def test_hpcg_host_alpha_is_differentiated(monkeypatch):
    """HPCG's `alpha = rtz / pAp` from host dot products (ComputeDotProduct_ref is a host loop), then ComputeWAXPBY
    `x + alpha * p` on the host: refused when the port was written, differentiated since session 57's host
    reductions (each np.dot a launch and a read, alpha Active-scalar arithmetic, the WAXPBY a host-ufunc launch).
    The variant adds the host step to the kernels' own (a program of its own, not the port's): check_grad's central
    differences, dot-product test and forward tangents."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["hpcg_cg"]
    check_grad(pa.hpcg_cg(host_alpha=True), *args, max_coords=6)


def _pic_numpy_push(mod):
    """pic-python's main loop as written: `vel += acc * dt / 2.0` (a launch while no launch has taken `vel`),
    `pos += vel * dt` into the positions the deposit took, or with `mod` the wrap `pos = np.mod(pos + vel * dt,
    boxsize)` into a fresh array."""
    def program(pos, vel, dt):
        c = p10.PIC
        dx = c["boxsize"] / c["nx"]
        n, e, d, phi = (np.zeros(c["nx"]) for _ in range(4))
        acc = np.zeros_like(pos)
        gk.launch(p10.pic_deposit, pos.shape[0], pos, n, dx, c["n0"] * c["boxsize"] / pos.shape[0] / dx)
        gk.launch(p10.pic_field, 1, n, e, d, phi, c["n0"], dx)
        gk.launch(p10.pic_accel, pos.shape[0], pos, e, acc, dx)
        vel += acc * dt / 2.0
        if mod:
            pos = np.mod(pos + vel * dt, c["boxsize"])
            gk.launch(p10.pic_deposit, pos.shape[0], pos, n, dx, 1.0)
        else:
            pos += vel * dt
    return program


def test_pic_numpy_push_is_refused_naming_the_line(monkeypatch):
    """The drift as pic-python writes it, refused at its line before anything changed: `pos += vel * dt` writes
    the array the deposit took (gk.copy(pos, pos + vel * dt) works)."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["pic_two_stream"]
    _refused(_pic_numpy_push(False), args,
             r"a host write to 'pos' at .*test_ported_loops10\.py:\d+ \(`pos \+= vel \* dt`\)(?s:.*)gk\.copy")


def test_pic_numpy_wrap_is_differentiated(monkeypatch):
    """pic-python's wrap `pos = np.mod(pos + vel * dt, boxsize)` into a fresh array is an elementwise launch
    (session 57: `%` joined the host ufuncs; it was refused as a derived array when the port was written), so the
    drift as written gives the gradient: central differences, the dot-product test and forward tangents."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["pic_two_stream"]
    check_grad(_pic_numpy_push(True), *args)


def _pic_scipy_get_acc():
    """pic-python's getAcc as written, in a program: the cloud-in-cell weights in NumPy, pic.py's `np.bincount`
    deposit, `spsolve(Lmtx, n - n0)`, `-Gmtx @ phi_grid`, the field interpolated back, then the kick `vel += acc *
    dt / 2.0` (a launch: no launch has taken `vel`)."""
    sparse = pytest.importorskip("scipy.sparse")
    spsolve = pytest.importorskip("scipy.sparse.linalg").spsolve
    c = p10.PIC
    nx, dx = c["nx"], c["boxsize"] / c["nx"]
    ones = np.ones(nx)
    grad = sparse.diags([-ones[1:], ones[1:]], [-1, 1]).tolil()
    grad[0, nx - 1], grad[nx - 1, 0] = -1.0, 1.0
    lap = sparse.diags([ones[1:], -2.0 * ones, ones[1:]], [-1, 0, 1]).tolil()
    lap[0, nx - 1] = lap[nx - 1, 0] = 1.0
    grad, lap = grad.tocsr() / (2.0 * dx), lap.tocsc() / dx ** 2

    def program(pos, vel, dt):
        j = np.floor(pos / dx).astype(int)
        jp1 = j + 1
        weight_j, weight_jp1 = (jp1 * dx - pos) / dx, (pos - j * dx) / dx
        jp1 = np.mod(jp1, nx)
        n = np.bincount(j, weights=weight_j, minlength=nx) + np.bincount(jp1, weights=weight_jp1, minlength=nx)
        n = n * (c["n0"] * c["boxsize"] / pos.shape[0] / dx)
        phi_grid = spsolve(lap, n - c["n0"])
        e_grid = -(grad @ phi_grid)
        acc = -(weight_j * e_grid[j] + weight_jp1 * e_grid[jp1])
        vel += acc * dt / 2.0
    return program


def _pic_add_at_deposit(pos, vel, dt):
    """The deposit as many PIC codes write it, `np.add.at(n, j, w)` on the host, then the port's field solve."""
    c = p10.PIC
    nx, dx = c["nx"], c["boxsize"] / c["nx"]
    scale = c["n0"] * c["boxsize"] / pos.shape[0] / dx
    j = np.floor(pos / dx).astype(int)
    weight_j = ((j + 1) * dx - pos) / dx
    n, e, d, phi = (np.zeros(nx) for _ in range(4))
    np.add.at(n, j, weight_j * scale)
    np.add.at(n, (j + 1) % nx, (1.0 - weight_j) * scale)
    gk.launch(p10.pic_field, 1, n, e, d, phi, c["n0"], dx)
    gk.copy(vel[:nx], e)


def test_pic_add_at_deposit_is_refused_naming_the_line(monkeypatch):
    """`np.add.at(n, j, w)` wrote the weights (computed from the active positions) into the fresh `n` on the
    host unseen: before session 57 the field solve launched on `n` took it as a constant and the program's
    gradient was off central differences (by 0.67 in a field solve and kick's dot-product test), silently.
    np.add.at's write is now checked as out='s is (program/hostcode.py): `n` remembers the weights' origin and
    the launch taking it is refused naming the line. The port deposits by atomic_add in a kernel."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["pic_two_stream"]
    _refused(_pic_add_at_deposit, args, r"kernel 'pic_field'\) takes 'n'.*`np\.add\.at` of 'n' and an array of "
                                        r"shape \(10,\) at .*test_ported_loops10\.py:\d+ \(`np\.add\.at\(n, \(j \+ 1\) "
                                        r"% nx, \(1\.0 - weight_j\) \* scale\)`\)(?s:.*)compute it in a kernel")


def test_pic_scipy_field_solve_is_not_seen(monkeypatch):
    """A known hole, pinned (docs/host-code.md "What is not seen"): pic.py's `spsolve(Lmtx, n - n0)` converts
    its right-hand side with a NumPy function SciPy bound at its import, so the potential is a plain ndarray, a
    constant: the program runs and its gradient lacks d phi / d pos (the same with np.add.at's deposit: SciPy's
    plain result drops the origin). When the hole closes this test fails (the spelling becomes refused or
    differentiated): turn it into that."""
    from gradkern.testing import check_grad
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["pic_two_stream"]
    report = check_grad(_pic_scipy_get_acc(), *args, max_coords=3, raise_on_failure=False)
    assert not report.ok and report.checked > 0, str(report)
