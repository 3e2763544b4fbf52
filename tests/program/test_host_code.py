"""Host NumPy code on active arrays inside programs (program/hostcode.py, docs/host-code.md): every
operation that makes an array from an active one is differentiated (copies, fills) or refused before
anything changes; arrays made from nothing active stay plain inputs."""

import copy

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def square_into(x, y):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


@gk.kernel
def heat(u, un, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        un[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


N = 7


def _u(rng):
    return rng.random(N) + 0.5  # away from zero: every derivative below is nonzero


# -- differentiated: copies and fills -----------------------------------------------------------------------------

def p_copy(u, E):
    u_old = u.copy()
    v = np.zeros_like(u)
    gk.launch(square_into, N, u_old, v)
    gk.launch(energy, N, v, E)


def p_np_copy(u, E):
    w = np.copy(u)
    gk.launch(energy, N, w, E)


def p_copyto(u, E):
    w = np.empty_like(u)
    np.copyto(w, u)
    gk.launch(energy, N, w, E)


def p_setitem(u, E):
    w = np.zeros_like(u)
    w[0] = 0.5  # a fill first: once the copy below has taken w, host writes to it are refused
    w[1:] = u[:-1]
    gk.launch(energy, N, w, E)


def p_copy_module(u, E):
    """`copy.copy` and `copy.deepcopy` (a kept restart state): the copy launch of `u.copy()` (session 62; refused
    where a launch took them before)."""
    v = copy.deepcopy([u])[0]
    w = copy.copy(u)
    gk.launch(energy, N, v, E)
    gk.launch(energy, N, w, E)


def p_np_array(u, E):
    """`u_old = np.array(u)`, a NumPy code's copy (dtype positional or not, ndmin, a reversed view): the copy
    launches of u.copy() (session 62; refused where a launch took it before)."""
    v = np.array(u, np.float64)
    w = np.array(u[::-1], ndmin=2, order="F")[0, ::-1]
    gk.launch(energy, N, v, E)
    gk.launch(energy, N, w, E)


def p_astype(u, E):
    w = u.astype(np.float32)
    v = np.zeros_like(w)
    gk.launch(square_into, N, w, v)
    gk.launch(energy, N, v.astype(np.float64), E)


def time_loop(steps):
    """The most common line of a time loop: keep the old state, then step from it."""
    def prog(u, E, c):
        un = np.zeros_like(u)
        for _ in range(steps):
            u_old = u.copy()
            gk.launch(heat, N, u_old, un, c)
            gk.copy(u, un)
        gk.launch(energy, N, u, E)
    return prog


p_time_loop = time_loop(3)


def _grad(prog, u, *extra):
    du, E = np.zeros_like(u), np.zeros(1)
    out = gk.autodiff(prog, gk.Duplicated(u.copy(), du), gk.Duplicated(E, np.ones(1)), *extra)
    return du, out


@pytest.mark.parametrize("prog, expected", [
    (p_copy, lambda u: 4 * u ** 3),
    (p_np_copy, lambda u: 2 * u),
    (p_copyto, lambda u: 2 * u),
    (p_setitem, lambda u: np.r_[2 * u[:-1], 0.0]),
    (p_copy_module, lambda u: 4 * u),
    (p_np_array, lambda u: 4 * u),
])
def test_copies_are_differentiated(rng, prog, expected):
    u = _u(rng)
    du, _ = _grad(prog, u)
    np.testing.assert_allclose(du, expected(u), rtol=1e-12)  # exact formulas; float64 rounding only


def test_astype_is_differentiated(rng):
    u = _u(rng)
    du, _ = _grad(p_astype, u)
    # float32 in the middle: relative error of a few float32 ulps in u**3
    np.testing.assert_allclose(du, 4 * u ** 3, rtol=1e-5)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_time_loop_with_copy_check_grad(rng, mode):
    u = _u(rng)
    check_grad(p_time_loop, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.zeros(1)),
               gk.Active(0.2), mode=mode)


def test_copies_reuse_kept_arrays_only_when_nothing_refers_to_them(rng):
    """u.copy() inside a program lends the save pool's kept arrays (docs/programs.md, "Program shapes"): a
    second gradient reuses the first's, with the same result; a copy the program hands out (kept in `held`,
    or a view of it) is never lent again while it is alive, and the temporaries' shadows go back to the pool."""
    from gradkern.program.savepool import POOL

    held = []

    def prog(u, E, c):
        un = np.zeros_like(u)
        for t in range(4):
            u_old = u.copy()
            if t == 1:
                held.append(u_old[1:])  # a view: its array stays lent
            gk.launch(heat, N, u_old, un, c)
            gk.copy(u, un)
        gk.launch(energy, N, u, E)

    gk.release_memory()
    u = _u(rng)
    first = _grad(prog, u, gk.Active(0.2))
    leased, kept = POOL.leased_bytes, np.array(held[0])
    assert leased >= 2 * N * 8
    second = _grad(prog, u, gk.Active(0.2))
    assert POOL.leased_bytes == leased + N * 8  # every copy lent again but the one `held` still refers to
    np.testing.assert_array_equal(second[0], first[0])
    assert second[1][2] == first[1][2]
    np.testing.assert_array_equal(held[0], kept)  # not overwritten by the second call's copies
    assert POOL.free_bytes >= 4 * N * 8  # the four temporaries' shadows
    du_plain, g_plain = _grad(time_loop(4), u, gk.Active(0.2))
    np.testing.assert_array_equal(first[0], du_plain)
    gk.release_memory()
    assert POOL.leased_bytes == 0 and POOL.free_bytes == 0


def test_lent_copies_start_at_their_sources_offset_within_a_page(rng):
    """A lent copy starts where its source does within a page (docs/programs.md, "Program shapes": the step
    reading a copy and writing its source ran 2-3x slower at other offsets), owns its memory as far as the
    program's shadows see (its own root), and its gradient is the plain one's bit for bit."""
    from gradkern.program.savepool import PAGE, placed
    from gradkern.program.shadows import memory_root

    for shift in (0, 8, 24, 2048, 4088):
        src = np.empty(3 * PAGE, np.uint8)[shift:shift + PAGE]
        out = placed((1024,), np.float32, src)
        assert out.ctypes.data % PAGE == src.ctypes.data % PAGE and memory_root(out) is out
        assert out.flags.c_contiguous and out.flags.writeable and out.shape == (1024,)
        assert memory_root(out[3:]) is out
    odd = np.empty(64, np.uint8)[1:33]
    assert placed((4,), np.float64, odd).ctypes.data % 8 == 0  # unaligned source: an aligned start
    seen = []

    def prog(u, E, c):
        un = np.zeros_like(u)
        for _ in range(3):
            u_old = u.copy()
            seen.append((np.asarray(u_old).ctypes.data - np.asarray(u).ctypes.data) % PAGE)
            gk.launch(heat, N, u_old, un, c)
            gk.copy(u, un)
        gk.launch(energy, N, u, E)

    u = _u(rng)
    du, g = _grad(prog, u, gk.Active(0.2))
    assert seen == [0] * 3
    du_plain, g_plain = _grad(time_loop(3), u, gk.Active(0.2))
    np.testing.assert_array_equal(du, du_plain)
    assert g[2] == g_plain[2]


def test_copy_inside_checkpointed_loop(rng):
    """A recomputed step makes the same launches: u.copy() is a launch whenever a program records."""
    def prog(u, E, c):
        un = np.zeros_like(u)

        def step(t):
            u_old = u.copy()
            gk.launch(heat, N, u_old, un, c)
            gk.copy(u, un)
        gk.checkpointed_loop(step, 6, snapshots=2)
        gk.launch(energy, N, u, E)
    u = _u(rng)
    check_grad(prog, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.zeros(1)), gk.Active(0.2))
    du_loop, g_loop = _grad(prog, u, gk.Active(0.2))
    du_plain, g_plain = _grad(time_loop(6), u, gk.Active(0.2))
    np.testing.assert_allclose(du_loop, du_plain, rtol=1e-13)  # the same operations in the same order
    assert g_loop[2] == pytest.approx(g_plain[2], rel=1e-13)


# -- refused: derived arrays reaching a launch --------------------------------------------------------------------

# (elementwise arithmetic is a launch, program/hostufuncs.py, broadcasting, %, np.cbrt, where= and dtype= too since
# session 57: these are what stays derived)
def p_scale(u, E):
    w = np.logaddexp(u, 1.5)  # a ufunc with no kernel operation (docs/host-code.md, "Elementwise NumPy")
    gk.launch(energy, N, w, E)


def p_sin(u, E):
    w = np.heaviside(u, 0.5)  # a ufunc the launches do not cover
    gk.launch(energy, N, w, E)


def p_add(u, E):
    w = (u + 1j).real  # complex: no kernel type
    gk.launch(energy, N, w, E)


def p_fancy(u, E):
    w = u[np.arange(N)[::-1].reshape(1, N)][0]  # a 2-D index array: no gather (a 1-D one is: hostgather.py)
    gk.launch(energy, N, w, E)


def p_chain(u, E):
    w = np.cumsum(u)
    z = np.concatenate([w[:3], w[3:]]) + 1.0  # computed from a derived array: derived too
    gk.launch(energy, N, z, E)


def p_out(u, E):
    w = np.empty(N)
    np.logaddexp(u, 3.0, out=w)  # a plain buffer written with derived values (no launch for logaddexp)
    gk.launch(energy, N, w, E)


def p_later_launch_of_temporary(u, E):
    v = np.zeros_like(u)
    gk.launch(square_into, N, u, v)  # v is active now
    w = np.subtract(v, 1.0, dtype=np.complex128).real  # a complex loop: not a launch
    gk.launch(energy, N, w, E)


@pytest.mark.parametrize("prog, op", [
    (p_scale, "np.logaddexp"), (p_sin, "np.heaviside"), (p_add, "np.add"), (p_fancy, "indexing with an index array"),
    (p_chain, "np.add"), (p_out, "np.logaddexp"), (p_later_launch_of_temporary, "np.subtract"),
])
@pytest.mark.parametrize("mode", ["reverse", "forward", "split"])
def test_derived_arrays_are_refused(rng, prog, op, mode):
    u = _u(rng)
    u0 = u.copy()
    du, E, dE = np.full(N, 0.25), np.zeros(1), np.ones(1)
    args = (gk.Duplicated(u, du), gk.Duplicated(E, dE))
    with pytest.raises(gk.ProgramError) as info:
        if mode == "reverse":
            gk.autodiff(prog, *args)
        elif mode == "forward":
            gk.autodiff(prog, *args, mode=gk.Forward)
        else:
            forward, _ = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated)
            forward(*args)
    msg = str(info.value)
    assert f"`{op}`" in msg and "test_host_code.py" in msg and "derivative would be lost" in msg
    assert "gk.Const" in msg  # the fix is named
    assert "gradkern/program" not in msg  # the user's lines only
    # nothing was launched: every buffer as it was (the derived array reached the program's first launch,
    # or, for the temporary, a launch that wrote only the temporary)
    np.testing.assert_array_equal(u, u0)
    np.testing.assert_array_equal(du, np.full(N, 0.25))
    np.testing.assert_array_equal(E, np.zeros(1))
    np.testing.assert_array_equal(dE, np.ones(1))


def test_refusal_names_arrays_and_lines(rng):
    u = _u(rng)
    with pytest.raises(gk.ProgramError) as info:
        gk.autodiff(p_scale, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1)))
    msg = str(info.value)
    assert "'w'" in msg and "'u'" in msg and "`w = np.logaddexp(u, 1.5)" in msg and "launch 1 (kernel 'energy')" in msg


def p_inplace(u, E):
    np.logaddexp(u, 2.0, out=u)  # (u *= 2.0 and u %= 2.0 are launches: tests/program/test_host_ufuncs.py)
    gk.launch(energy, N, u, E)


def p_inplace_ufunc(u, E):
    np.heaviside(u, 0.5, out=u)
    gk.launch(energy, N, u, E)


def p_mask_write(u, E):
    u[u > 1.0] = 0.0
    gk.launch(energy, N, u, E)


@pytest.mark.parametrize("prog", [p_inplace, p_inplace_ufunc, p_mask_write])
def test_host_writes_into_active_arrays_are_refused(rng, prog):
    u = _u(rng)
    u0 = u.copy()
    du = np.full(N, 0.5)
    with pytest.raises(gk.ProgramError, match="active array"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(np.zeros(1), np.ones(1)))
    np.testing.assert_array_equal(u, u0)
    np.testing.assert_array_equal(du, np.full(N, 0.5))


def test_rule_call_with_derived_argument_is_refused(rng):
    @gk.custom_rule(writes=("y",))
    def double(x, y):
        y[...] = 2.0 * x

    @double.augmented_primal
    def _(config, x, y):
        double.primal(x.val, y.val)

    @double.reverse
    def _(config, tape, x, y):
        x.dval[...] += 2.0 * y.dval
        y.dval[...] = 0.0
        return (None, None)

    def prog(u, E):
        y = np.zeros_like(u)
        double(np.heaviside(u, 0.5), y)
        gk.launch(energy, N, y, E)
    u = _u(rng)
    with pytest.raises(gk.ProgramError, match=r"rule call 1 \('\S*double'\).*`np.heaviside`"):
        gk.autodiff(prog, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1)))


# -- accepted: constants --------------------------------------------------------------------------------------------

def p_const(u, E):
    w = np.cumsum(u)  # derived (u * 2.0 would be a launch, whose derivative flows: gk.copy's rule)
    gk.launch(energy, N, gk.Const(w), E)  # no derivative through w wanted
    gk.launch(energy, N, u, E)


def p_from_nothing(u, E):
    grid = np.linspace(0.0, 1.0, N)
    ones = np.ones(N)
    gk.launch(energy, N, grid * ones, E)
    gk.launch(energy, N, u, E)


def p_reduced(u, E):
    scale = float(u.max())  # a time step from the state: a constant, as .item() in PyTorch
    total = u.sum()
    mask = u > np.median(u)  # booleans carry no derivative
    # float(): no derivative through the fill value wanted (np.full_like(u, scale * total) is refused at the
    # launch: test_derived_scalars.py)
    w = np.full_like(u, scale * float(total))
    w[mask] = 1.0  # a host write into an array nothing active reached
    gk.launch(energy, N, w, E)
    gk.launch(energy, N, u, E)


@pytest.mark.parametrize("prog", [p_const, p_from_nothing, p_reduced])
def test_constants_are_accepted(rng, prog):
    u = _u(rng)
    du, _ = _grad(prog, u)
    np.testing.assert_allclose(du, 2 * u, rtol=1e-12)  # only the last launch carries u's derivative


def test_const_launch_argument_outside_a_program(rng):
    u = _u(rng)
    E = np.zeros(1)
    gk.launch(energy, N, gk.Const(u), E)
    assert E[0] == pytest.approx(np.sum(u * u), rel=1e-12)


def test_views_and_plain_calls_unchanged(rng):
    """Outside a derivative the program runs as plain code; views of tracked arrays are views."""
    u = _u(rng)
    E = np.zeros(1)
    p_copy(u, E)
    assert E[0] == pytest.approx(np.sum(u ** 4), rel=1e-12)

    def prog(u, E):
        inner = u[1:-1]
        assert np.shares_memory(inner, u) and inner.base is not None
        gk.launch(energy, N - 2, inner, E)
    du, _ = _grad(prog, u)
    np.testing.assert_allclose(du, np.r_[0.0, 2 * u[1:-1], 0.0], rtol=1e-12)


@pytest.mark.parametrize("check", ["auto", "fingerprint"])
def test_write_through_an_earlier_view_of_a_taken_buffer_is_refused(rng, monkeypatch, check):
    """w was made before the copy took a view of its buffer, so NumPy left w writable: the guard refuses the
    write by its buffer (flags or fingerprints alike), before anything changed."""
    monkeypatch.setenv("GRADKERN_HOST_WRITE_CHECK", check)

    def prog(u, E):
        w = np.zeros_like(u)
        w[1:] = u[:-1]
        w[0] = 0.5
        gk.launch(energy, N, w, E)
    u = _u(rng)
    du, dE = rng.random(N), np.ones(1)
    before = [u.copy(), du.copy(), dE.copy()]
    with pytest.raises(gk.ProgramError, match=r"host write to 'w'.*after launch 1 \(kernel '_copy1'"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(np.zeros(1), dE))
    for a, b in zip(before, (u, du, dE)):
        np.testing.assert_array_equal(a, b)


def test_tracked_argument_is_locked_with_its_buffer(rng):
    """The view fn received is read-only after a launch took a view of its buffer (guard.follow)."""
    def prog(u, E):
        gk.launch(energy, N - 1, u[1:], E)
        u.sort()  # an in-place method: NumPy's read-only flag refuses it
    u = _u(rng)
    u0 = u.copy()
    with pytest.raises(gk.ProgramError, match="host write"):
        gk.autodiff(prog, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1)))
    np.testing.assert_array_equal(u, u0)
    assert u.flags.writeable


# -- unwrapping a launch's arguments ------------------------------------------------------------------------------


def test_the_one_pass_unwrapping_gives_what_the_full_one_gives(monkeypatch):
    """`hostargs._unwrap_plain` (TrackedArrays, floats, ints and Active scalars: a time loop's launches) against
    the full path of `unwrap_args`: the same plain view objects, the guard following each TrackedArray, other
    arguments left to the full path, and bit-identical gradients of a loop with the one pass refused."""
    from gradkern.program import hostargs
    from gradkern.recording import active_recorder
    one_pass = hostargs._unwrap_plain

    def loop(u, v, E, c):
        rec = active_recorder()
        args = (u, v, 1.5, 2, c, u)
        fast = one_pass(args, rec.host, rec.guard)
        assert fast is not None and fast[0] is fast[5]  # an array passed twice is one view twice
        assert all(any(r() is a for refs in rec.guard.followers.values() for r in refs) for a in (u, v))
        with monkeypatch.context() as m:
            m.setattr(hostargs, "_unwrap_plain", lambda *a: None)
            full = hostargs.unwrap_args(args, "a check")
        assert len(fast) == len(full) and all(a is b for a, b in zip(fast, full))
        assert one_pass((gk.Const(u), v), rec.host, rec.guard) is None
        assert one_pass((u, np.float32(1.0)), rec.host, rec.guard) is None
        for _ in range(3):
            gk.launch(heat, N, u, v, c)
            gk.launch(heat, N, v, u, c)
        gk.launch(energy, N, u, E)

    def gradient():
        u, v, E = _u(np.random.default_rng(4)), np.zeros(N), np.zeros(1)
        du, dv, dE = np.zeros(N), np.zeros(N), np.ones(1)
        got = gk.autodiff(loop, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.2))
        return du, dv, got[3], u, v

    fast = gradient()
    monkeypatch.setattr(hostargs, "_unwrap_plain", lambda *a: None)
    full = gradient()
    for a, b in zip(fast, full):
        assert np.array_equal(np.asarray(a), np.asarray(b)) and np.array_equal(np.signbit(a), np.signbit(b))


# -- NumPy writing into its first argument without out= (session 57) ---------------------------------------------


@gk.kernel
def _doubled(a, out):
    i = gk.tid()
    out[i] = 2.0 * a[i]


def _into_active(u, y):
    np.add.at(u, [0, 0, 2], 1.0)
    gk.launch(_doubled, 4, u, y)


def _put_into_active(u, y):
    u.put([1], [3.0])
    gk.launch(_doubled, 4, u, y)


def _sort_active(u, y):
    u.sort()
    gk.launch(_doubled, 4, u, y)


def _add_at_into_taken(u, y):
    gk.launch(_doubled, 4, u, y)
    np.add.at(y, [0], 1.0)


@pytest.mark.parametrize("program, match", [
    (_into_active, r"`np\.add\.at` writes its result into 'u', an active array.*`np\.add\.at\(u, \[0, 0, 2\], 1\.0\)`"),
    (_put_into_active, r"`ndarray\.put` writes its result into 'u', an active array.*`u\.put\(\[1\], \[3\.0\]\)`"),
    (_sort_active, r"`ndarray\.sort` writes its result into 'u', an active array.*`u\.sort\(\)`"),
    (_add_at_into_taken, r"a host write to 'y' at .*`np\.add\.at\(y, \[0\], 1\.0\)`.*after launch 1")])
def test_numpy_writing_into_its_first_argument_is_refused_before_it_writes(program, match, monkeypatch):
    """`np.add.at(u, ...)`, `u.put(...)`, `u.sort()` into an active argument wrote it on the host unseen before
    session 57 (the primal changed, its derivative lost); into an array a launch took, the read-only flag
    refused them. Each is now checked as `out=` is: refused at its line before anything is written, primals and
    shadows unchanged (docs/host-code.md "Host operations, one by one")."""
    from gradkern import backends
    monkeypatch.setattr(backends, "_default", ["interp"])  # as support/ported_harness.on_interpreter
    u0 = np.array([4.0, 1.0, 3.0, 2.0])
    u, y = gk.Duplicated(u0.copy(), np.ones(4)), gk.Duplicated(np.zeros(4), np.full(4, 0.5))
    with pytest.raises(gk.ProgramError, match=match):
        gk.autodiff(program, u, y)
    np.testing.assert_array_equal(u.val, u0)
    np.testing.assert_array_equal(u.dval, np.ones(4))
    np.testing.assert_array_equal(y.dval, np.full(4, 0.5))
