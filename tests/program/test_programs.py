"""Programs (docs/programs.md, issue 15): gk.autodiff of Python functions that launch
many kernels, checked by check_grad (float64 finite differences of the whole
program and the dot-product test, random non-zero inputs), with the saved
bytes asserted exactly and host writes refused."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.testing import check_grad


def D(a):
    return gk.Duplicated(a, np.zeros_like(a))


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


@gk.kernel
def square_sin(y):
    i = gk.tid()
    y[i] = gk.sin(y[i]) * y[i]


@gk.kernel
def scale_into(x, y, a):
    i = gk.tid()
    y[i] = a * x[i] * x[i]


@gk.kernel
def heat(u, un, c):
    i = gk.tid()
    un[i + 1] = u[i + 1] + c * (u[i] - 2.0 * u[i + 1] + u[i + 2])


@gk.kernel
def heat2d(u, un, c):
    i, j = gk.tid()
    un[i + 1, j + 1] = u[i + 1, j + 1] + c * (u[i, j + 1] + u[i + 2, j + 1] + u[i + 1, j] + u[i + 1, j + 2]
                                              - 4.0 * u[i + 1, j + 1])


@gk.kernel
def lu_column(A, k, n):
    i = gk.tid()
    r = k + 1 + i
    A[r, k] = A[r, k] / A[k, k]
    for j in range(k + 1, n):
        A[r, j] = A[r, j] - A[r, k] * A[k, j]


def ping_pong(u, v, E, c, steps):
    n = u.shape[0]
    for _ in range(steps):
        gk.launch(allen_cahn_step, n, u, v, c, 0.01)
        gk.launch(allen_cahn_step, n, v, u, c, 0.01)
    gk.launch(energy, n, u, E)


def rng_uniform(seed, *shape):
    return np.random.default_rng(seed).uniform(0.2, 0.8, shape)


def test_ping_pong_allen_cahn_gradient_and_one_state_saved_per_step():
    n, steps = 12, 4
    check_grad(ping_pong, D(rng_uniform(0, n)), D(rng_uniform(1, n)), D(np.ones(1)), gk.Active(0.2), steps)
    u, v, E = rng_uniform(0, n), rng_uniform(1, n), np.zeros(1)
    fwd, rev = gk.autodiff_thunk(ping_pong, gk.Duplicated, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
    args = (gk.Duplicated(u, np.zeros(n)), gk.Duplicated(v, np.zeros(n)), gk.Duplicated(E, np.ones(1)),
            gk.Active(0.2), steps)
    tape = fwd(*args)
    # every launch but the first overwrites the state the previous launch's reverse reads
    assert tape.saved_bytes == (2 * steps - 1) * n * 8
    assert [row[2] for row in tape.table()] == [0] + [n * 8] * (2 * steps - 1) + [0]
    after = u.copy(), v.copy(), E.copy()
    split_result = rev(*args, tape)
    for a, b in zip((u, v, E), after):  # the primals end as the program left them
        np.testing.assert_array_equal(a, b)
    u2, v2, E2 = rng_uniform(0, n), rng_uniform(1, n), np.zeros(1)
    du2, dv2 = np.zeros(n), np.zeros(n)
    fused = gk.autodiff(ping_pong, gk.Duplicated(u2, du2), gk.Duplicated(v2, dv2), gk.Duplicated(E2, np.ones(1)),
                        gk.Active(0.2), steps)
    np.testing.assert_array_equal(du2, args[0].dval)  # split equals fused
    assert fused[3] == split_result[3]


def inplace_loop(y, steps):
    for _ in range(steps):
        gk.launch(square_sin, y.shape[0], y)


def test_nonlinear_in_place_loop_saves_nothing_but_kernel_tapes():
    check_grad(inplace_loop, D(rng_uniform(2, 9)), 5)
    fwd, _ = gk.autodiff_thunk(inplace_loop, gk.Duplicated, gk.Const)
    tape = fwd(D(rng_uniform(2, 9)), 5)
    assert tape.saved_bytes == 0  # each launch's reverse reads what its own tape holds, nothing later overwritten
    # y[i] = sin(y[i]) * y[i] destroys y[i], which its reverse needs: one float64 per thread, per launch
    assert tape.kernel_tape_bytes == 5 * 9 * 8


def test_inspect_of_a_program_and_of_its_tape():
    """gk.inspect(fn, *args) records the program and reports, launch by launch, what its reverse keeps."""
    n, steps = 12, 3
    args = (D(rng_uniform(0, n)), D(rng_uniform(1, n)), D(np.ones(1)), gk.Active(0.2), steps)
    shadows = [a.dval.copy() for a in args[:3]]
    report = gk.inspect(ping_pong, *args)
    assert [(r.number, r.kernel, r.saved_bytes, r.kernel_tape_bytes) for r in report.launches] == \
        [(1, "allen_cahn_step", 0, 0)] + [(k, "allen_cahn_step", n * 8, 0) for k in range(2, 2 * steps + 1)] + \
        [(2 * steps + 1, "energy", 0, 0)]
    assert report.bytes == report.saved_bytes == (2 * steps - 1) * n * 8 and report.internal_shadow_bytes == 0
    assert "allen_cahn_step" in str(report) and f"{report.saved_bytes:,}" in str(report)
    for a, before in zip(args, shadows):  # no shadow touched
        np.testing.assert_array_equal(a.dval, before)
    fwd, rev = gk.autodiff_thunk(inplace_loop, gk.Duplicated, gk.Const)
    y = D(rng_uniform(2, 9))
    tape = fwd(y, 2)
    assert gk.inspect(tape).kernel_tape_bytes == tape.kernel_tape_bytes == 2 * 9 * 8
    rev(y, 2, tape)
    with pytest.raises(gk.ProgramError, match="consumed"):
        gk.inspect(tape)
    with pytest.raises(gk.LaunchError, match="tape alone"):
        gk.inspect(tape, 1)


def write_only(x, y, a, steps):
    for _ in range(steps):
        gk.launch(scale_into, x.shape[0], x, y, a)


def test_write_only_output_overwritten_every_step_saves_nothing():
    check_grad(write_only, D(rng_uniform(3, 7)), D(rng_uniform(4, 7)), gk.Active(1.3), 4)
    fwd, _ = gk.autodiff_thunk(write_only, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
    assert fwd(D(rng_uniform(3, 7)), D(rng_uniform(4, 7)), gk.Active(1.3), 4).saved_bytes == 0


def alternating(u, E, c):
    tmp = np.zeros_like(u)  # a temporary: its shadow is the program's own
    for k in range(3):
        gk.launch(heat, u.shape[0] - 2, u, tmp, c * (k + 1))  # host arithmetic on an Active scalar
        gk.launch(square_sin, u.shape[0], tmp)
        gk.launch(scale_into, u.shape[0], tmp, u, 0.5)
    gk.launch(energy, u.shape[0], u, E)


def test_alternating_kernels_temporaries_and_host_arithmetic_on_an_active_scalar():
    check_grad(alternating, D(rng_uniform(5, 10)), D(np.ones(1)), gk.Active(0.3))


def interior_slices(u, v, c, steps):
    for _ in range(steps):
        gk.launch(scale_into, u.shape[0] - 2, u[1:-1], v[1:-1], c)  # views of annotated arrays
        gk.launch(heat, v.shape[0] - 2, v, u, c)


def test_launches_on_slices_of_annotated_arrays():
    check_grad(interior_slices, D(rng_uniform(6, 11)), D(rng_uniform(7, 11)), gk.Active(0.4), 3)


def heat2d_loop(u, v, c, steps):
    for _ in range(steps):
        gk.launch(heat2d, (u.shape[0] - 2, u.shape[1] - 2), u, v, c)
        gk.launch(heat2d, (u.shape[0] - 2, u.shape[1] - 2), v, u, c)


def test_ping_pong_2d_heat():
    check_grad(heat2d_loop, D(rng_uniform(8, 5, 6)), D(rng_uniform(9, 5, 6)), gk.Active(0.1), 2)


def lu(A, n):
    for k in range(n - 1):
        gk.launch(lu_column, n - 1 - k, A, k, n)


def test_lu_k_loop_of_launches():
    """Each launch overwrites rows that later (earlier in the reverse) steps read."""
    A = rng_uniform(10, 4, 4) + 4 * np.eye(4)
    check_grad(lu, D(A), 4)


def host_control(u, v, c):
    def step(a, b):  # nested helpers
        gk.launch(scale_into, a.shape[0], a, b, c)
    step(u, v)
    if v.sum() > 1.0:  # a host read of primal values: control flow, no derivative
        step(v, u)
    else:
        gk.launch(square_sin, u.shape[0], u)


def test_nested_helpers_and_control_flow_on_host_reads():
    check_grad(host_control, D(rng_uniform(11, 6)), D(rng_uniform(12, 6)), gk.Active(0.9))


def test_duplicated_no_need_is_accepted_as_duplicated():
    u, v, E = rng_uniform(0, 8), rng_uniform(1, 8), np.zeros(1)
    du, du2 = np.zeros(8), np.zeros(8)
    gk.autodiff(ping_pong, gk.Duplicated(u, du), gk.DuplicatedNoNeed(v, np.zeros(8)),
                gk.Duplicated(E, np.ones(1)), 0.2, 2)
    u, v, E = rng_uniform(0, 8), rng_uniform(1, 8), np.zeros(1)
    gk.autodiff(ping_pong, gk.Duplicated(u, du2), gk.Duplicated(v, np.zeros(8)), gk.Duplicated(E, np.ones(1)), 0.2, 2)
    np.testing.assert_array_equal(du, du2)


@pytest.mark.parametrize("check", ["auto", "fingerprint"])
@pytest.mark.parametrize("write", ["scale", "element", "assign"])
def test_host_writes_to_recorded_arrays_are_refused_with_shadows_unchanged(write, check, monkeypatch):
    """NumPy's read-only flags (auto) and the fingerprints CuPy arrays get, here on NumPy arrays."""
    monkeypatch.setenv("GRADKERN_HOST_WRITE_CHECK", check)

    def bad(u, v, c):
        gk.launch(scale_into, u.shape[0], u, v, c)
        if write == "scale":
            u *= 2
        elif write == "element":
            u[3] = 0
        else:
            u[:] = v
        gk.launch(scale_into, u.shape[0], v, u, c)

    u, v = rng_uniform(13, 6), rng_uniform(14, 6)
    du, dv = np.random.default_rng(15).standard_normal(6), np.random.default_rng(16).standard_normal(6)
    before = du.copy(), dv.copy()
    with pytest.raises(gk.ProgramError, match=r"host write to 'u'.*after launch 1 \(kernel 'scale_into'\)"):
        gk.autodiff(bad, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.5))
    np.testing.assert_array_equal(du, before[0])
    np.testing.assert_array_equal(dv, before[1])
    assert u.flags.writeable and v.flags.writeable  # the flags are given back


def test_a_host_write_after_a_replayed_launch_names_that_launch():
    """From the second launch on the same arrays the guard notes the recorded Step as where they were locked
    (guard.locked_settled: no string per launch); the error still names the launch after which the write came."""
    def bad(u, v, c):
        for _ in range(2):
            gk.launch(scale_into, u.shape[0], u, v, c)
            gk.launch(scale_into, u.shape[0], v, u, c)
        u[3] = 0

    u, v = rng_uniform(13, 6), rng_uniform(14, 6)
    du, dv = np.zeros(6), np.zeros(6)
    with pytest.raises(gk.ProgramError, match=r"host write to 'u'.*after launch 4 \(kernel 'scale_into'\)"):
        gk.autodiff(bad, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.5))
    assert u.flags.writeable and v.flags.writeable


def test_fingerprints_catch_writes_through_old_views_and_after_the_last_launch(monkeypatch):
    """Writes NumPy's flags cannot see (through a view made before the call) and a write after the last
    launch, found by fingerprints; GRADKERN_HOST_WRITE_CHECK=off turns fingerprints off, bad values are refused."""
    u, v = rng_uniform(13, 6), rng_uniform(14, 6)
    old_view = u[2:]

    def through_view(u, v, c):
        gk.launch(scale_into, u.shape[0], u, v, c)
        old_view[0] = 7.0
        gk.launch(scale_into, u.shape[0], v, u, c)

    def after_last(u, v, c):
        gk.launch(scale_into, u.shape[0], u, v, c)
        v[1] = 3.0

    # through the array fn received (a TrackedArray, program/hostcode.py) the write is refused before it happens;
    # through a plain view made before the call, the fingerprint finds it before the next launch
    for fn, where in [(through_view, r"found before launch 2 \(kernel 'scale_into'\)"),
                      (after_last, "refused before it changed anything")]:
        for check in ("fingerprint", "auto"):
            monkeypatch.setenv("GRADKERN_HOST_WRITE_CHECK", check)
            du, dv = np.random.default_rng(15).standard_normal(6), np.random.default_rng(16).standard_normal(6)
            before = du.copy(), dv.copy()
            if check == "auto" and fn is after_last:
                with pytest.raises(gk.ProgramError, match=r"host write to 'v'.*after launch 1"):
                    gk.autodiff(fn, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.5))
            elif check == "auto":  # NumPy cannot revoke the old view's write flag: documented
                gk.autodiff(fn, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.5))
                continue
            else:
                with pytest.raises(gk.ProgramError, match=rf"after launch 1 \(kernel 'scale_into'\), {where}"):
                    gk.autodiff(fn, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.5))
            np.testing.assert_array_equal(du, before[0])
            np.testing.assert_array_equal(dv, before[1])
    monkeypatch.setenv("GRADKERN_HOST_WRITE_CHECK", "sometimes")
    with pytest.raises(gk.ProgramError, match="GRADKERN_HOST_WRITE_CHECK"):
        gk.autodiff(after_last, D(u), D(v), gk.Active(0.5))


def test_float_of_an_active_scalar_is_refused():
    def bad(u, v, c):
        gk.launch(scale_into, u.shape[0], u, v, float(c))

    with pytest.raises(gk.ProgramError, match=r"float\(\) of an Active scalar"):
        gk.autodiff(bad, D(rng_uniform(0, 4)), D(rng_uniform(1, 4)), gk.Active(0.5))


def with_host_ops(u, v, c):
    tmp = np.empty_like(u)
    gk.fill(tmp, c)  # an Active scalar into every element
    gk.launch(scale_into, u.shape[0], u, v, 1.5)
    gk.copy(u, v)  # instead of u[:] = v
    gk.launch(square_sin, u.shape[0], u)
    gk.launch(scale_into, u.shape[0], tmp, v, c)


def test_copy_and_fill_are_differentiated_inside_programs():
    check_grad(with_host_ops, D(rng_uniform(20, 7)), D(rng_uniform(21, 7)), gk.Active(0.7))
    a, b = np.zeros((3, 4)), rng_uniform(22, 3, 4)
    gk.copy(a, b)  # outside a program: plain launches
    np.testing.assert_array_equal(a, b)
    gk.fill(a, 2.5)
    assert (a == 2.5).all()
    with pytest.raises(gk.LaunchError, match="shape"):
        gk.copy(a, np.zeros(5))


def test_forward_mode_of_a_program_against_finite_differences_and_reverse():
    """Forward mode (check_grad also runs it for every program above): the tangent of E along (du0, dc)."""
    n, steps, h = 10, 3, 1e-6
    u0, v0 = rng_uniform(30, n), rng_uniform(31, n)
    du0 = np.random.default_rng(32).standard_normal(n)

    def energy_of(u_start, c):
        u, v, E = u_start.copy(), v0.copy(), np.zeros(1)
        ping_pong(u, v, E, c, steps)
        return E[0]

    u, v, E, dE = u0.copy(), v0.copy(), np.zeros(1), np.zeros(1)
    gk.autodiff(ping_pong, gk.Duplicated(u, du0.copy()), gk.Duplicated(v, np.zeros(n)), gk.Duplicated(E, dE),
                gk.Duplicated(0.2, 0.5), steps, mode=gk.Forward)
    fd = (energy_of(u0 + h * du0, 0.2 + 0.5 * h) - energy_of(u0 - h * du0, 0.2 - 0.5 * h)) / (2 * h)
    # central differences at h = 1e-6 in float64: rounding ~ 1e-16 * E / h ~ 1e-10, truncation ~ h**2; 1e-6 is generous
    assert abs(dE[0] - fd) <= 1e-6 * abs(fd)
    np.testing.assert_array_equal(E, [energy_of(u0, 0.2)])  # the primals hold their post-program values


def partial_overwrites(u, y):
    n = u.shape[0]
    h = n // 2
    gk.launch(scale_into, n, u, y, 1.0)  # its reverse reads all of u
    gk.launch(square_sin, h, u[:h])  # then each half of u is overwritten by a launch of its own
    gk.launch(square_sin, n - h, u[h:])


def test_a_write_to_part_of_a_buffer_keeps_the_rest_needed():
    """Overwriting one half must not make the other half's old contents look unneeded."""
    check_grad(partial_overwrites, D(rng_uniform(40, 8)), D(rng_uniform(41, 8)))
    fwd, _ = gk.autodiff_thunk(partial_overwrites, gk.Duplicated, gk.Duplicated)
    assert [row[2] for row in fwd(D(rng_uniform(40, 8)), D(rng_uniform(41, 8))).table()] == [0, 32, 32]


def test_vector_mode_equals_separate_calls():
    """BatchDuplicated through a program (temporaries and an Active scalar included): each lane as one call."""
    n, seeds = 9, [np.random.default_rng(50 + k).standard_normal(1) for k in range(3)]

    def run(lanes):
        u, E = rng_uniform(51, n), np.zeros(1)
        dus = tuple(np.zeros(n) for _ in lanes)
        dEs = tuple(s.copy() for s in lanes)
        got = gk.autodiff(alternating, gk.BatchDuplicated(u, dus), gk.BatchDuplicated(E, dEs), gk.Active(0.3))
        return dus, got[2]

    dus, dcs = run(seeds)
    for k, s in enumerate(seeds):
        u, E, du = rng_uniform(51, n), np.zeros(1), np.zeros(n)
        dc = gk.autodiff(alternating, gk.Duplicated(u, du), gk.Duplicated(E, s.copy()), gk.Active(0.3))[2]
        # the same operations per lane; sums over threads may associate differently: a few ulps of float64
        np.testing.assert_allclose(dus[k], du, rtol=1e-13, atol=1e-15)
        assert abs(dcs[k] - dc) <= 1e-13 * abs(dc)


def test_vector_forward_mode_equals_separate_forward_calls():
    """Forward vector mode: k tangents (of arrays and of the scalar c, through host arithmetic and a temporary)
    give what k forward calls give."""
    n, k = 10, 3
    dus = [np.random.default_rng(60 + j).standard_normal(n) for j in range(k)]
    dcs = [0.5, -1.25, 2.0]
    u, E = rng_uniform(61, n), np.zeros(1)
    tus, tEs = tuple(d.copy() for d in dus), tuple(np.zeros(1) for _ in range(k))
    gk.autodiff(alternating, gk.BatchDuplicated(u, tus), gk.BatchDuplicated(E, tEs),
                gk.BatchDuplicated(0.3, tuple(dcs)), mode=gk.Forward)
    for j in range(k):
        u1, E1, tu, tE = rng_uniform(61, n), np.zeros(1), dus[j].copy(), np.zeros(1)
        gk.autodiff(alternating, gk.Duplicated(u1, tu), gk.Duplicated(E1, tE), gk.Duplicated(0.3, dcs[j]),
                    mode=gk.Forward)
        # the same operations per lane: sums over threads may associate differently, a few ulps of float64
        np.testing.assert_allclose(tus[j], tu, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(tEs[j], tE, rtol=1e-13)
        np.testing.assert_array_equal(u, u1)  # the primals hold their post-program values
    with pytest.raises(gk.AnnotationError, match="same number of shadows"):
        gk.autodiff(alternating, gk.BatchDuplicated(u, tus), gk.Duplicated(E, np.zeros(1)),
                    gk.Duplicated(0.3, 1.0), mode=gk.Forward)


def test_a_launch_past_its_arrays_inside_a_program_is_refused_before_anything_is_written():
    def bad(u, v, c):
        gk.launch(scale_into, u.shape[0], u, v, c)
        w, t = np.ones(6), np.zeros(6)
        gk.launch(scale_into, u.shape[0] + 3, w, t, 2.0)  # nothing active in it: a plain launch, still checked

    u, v = rng_uniform(60, 6), rng_uniform(61, 6)
    du, dv = np.zeros(6), np.ones(6)
    with pytest.raises(gk.LaunchError, match="outside"):
        gk.autodiff(bad, gk.Duplicated(u, du), gk.Duplicated(v, dv), 0.5)
    np.testing.assert_array_equal(du, np.zeros(6))
    np.testing.assert_array_equal(dv, np.ones(6))
