"""Custom rules (docs/custom-rules.md, gradkern/rules.py and program/rulestep.py): rules
written here checked by check_grad (finite differences + dot-product test,
reverse and forward) alone and inside programs, forward-mode and vector-mode
programs and checkpointed loops; what the runtime keeps for a rule's reverse
(copy-on-write of `reads`, `config.overwritten`); every malformed rule
refused with gk.RuleError and every buffer left as it was.

Tolerances: check_grad's defaults (central differences in float64, rtol 1e-5);
comparisons of two exact computations of the same float64 numbers use 1e-12."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import implicit_heat_rows, tridiagonal_solve
from gradkern.testing import check_grad


def rng(seed=0):
    return np.random.default_rng(seed)


def dup(r, n):
    """A random primal (away from zero) with a zero shadow."""
    return gk.Duplicated(r.uniform(0.5, 1.5, n), np.zeros(n))


# -- rules written here ------------------------------------------------------------------------------------------

@gk.custom_rule(writes=("y",))
def scale(x, y, c):
    """y = c * x (NumPy host code)."""
    y[...] = c * x


SEEN: list = []  # the configs the rules below were given


@scale.reverse
def _(config, tape, x, y, c):
    SEEN.append(config)
    dc = float(np.sum(y.dval * x.val)) if isinstance(c, gk.Active) else None
    if isinstance(x, gk.Duplicated):
        x.dval[...] += c.val * y.dval
    y.dval[...] = 0.0  # y is overwritten whole: its old value does not reach y's new one
    return (None, None, dc)


def lanes(a, width):
    """An argument's tangents, one per lane (zeros for a Const)."""
    if isinstance(a, gk.BatchDuplicated):
        return a.dval
    return (a.dval if isinstance(a, gk.Duplicated) else 0.0,) * width


@scale.forward
def _(config, x, y, c):
    y.val[...] = c.val * x.val
    if not isinstance(y, gk.Const):
        for dx, dy, dc in zip(lanes(x, config.width), lanes(y, config.width), lanes(c, config.width)):
            dy[...] = c.val * dx + dc * x.val


@gk.custom_rule
def exp_inplace(x):
    """x <- exp(x): the reverse needs the result (kept: reads defaults to every array)."""
    np.exp(x, out=x)


@exp_inplace.reverse
def _(config, tape, x):
    SEEN.append(config)
    if isinstance(x, gk.BatchDuplicated):
        for d in x.dval:
            d *= x.val
    else:
        x.dval[...] *= x.val  # d exp(x_old)/d x_old = exp(x_old) = x_new
    return (None,)


@exp_inplace.forward
def _(config, x):
    np.exp(x.val, out=x.val)
    for d in (x.dval if isinstance(x, gk.BatchDuplicated) else (x.dval,)):
        d *= x.val


@gk.custom_rule(reads=(), writes=("y",))
def cumsum(x, y):
    """y = prefix sums of x, along the last axis; its reverse reads no primal (reads=())."""
    np.cumsum(x, axis=-1, out=y)


@cumsum.augmented_primal
def _(config, x, y):
    SEEN.append(config)
    if config.needs_primal:
        cumsum.primal(x.val, y.val)
    return None


@cumsum.reverse
def _(config, tape, x, y):
    g = np.flip(np.cumsum(np.flip(y.dval, -1), axis=-1), -1)  # the transpose of a prefix sum: suffix sums
    if isinstance(x, gk.Duplicated):
        x.dval[...] += g
    y.dval[...] = 0.0
    return (None, None)


@cumsum.forward
def _(config, x, y):
    cumsum.primal(x.val, y.val)
    lanes = zip(x.dval, y.dval) if config.width > 1 else [(x.dval, y.dval)]
    for dx, dy in lanes:  # linear: the tangent is the prefix sum of the tangent
        cumsum.primal(dx, dy)


@gk.kernel
def square(u, v):
    i = gk.tid()
    v[i] = u[i] * u[i]


@gk.kernel
def axpy(a, x, y):
    i = gk.tid()
    y[i] = y[i] + a * x[i]


@gk.custom_rule(writes=("v",))
def square_launching(u, v):
    """A rule whose primal launches a kernel: the launch is not recorded."""
    gk.launch(square, u.size, u, v)


@square_launching.reverse
def _(config, tape, u, v):
    u.dval[...] += 2.0 * u.val * v.dval
    v.dval[...] = 0.0
    return (None, None)


@square_launching.forward
def _(config, u, v):
    gk.launch(square, u.val.size, u.val, v.val)
    v.dval[...] = 2.0 * u.val * u.dval


# -- one rule alone ------------------------------------------------------------------------------------------------

def test_plain_call_runs_the_primal():
    x, y = np.arange(3.0), np.zeros(3)
    assert scale(x, y, 2.0) is None
    np.testing.assert_array_equal(y, 2 * x)
    assert scale.primal is scale.__wrapped__ and scale.__name__ == "scale"


@pytest.mark.parametrize("c", [gk.Active(1.3), gk.Const(1.3)])
def test_scale_alone(c):
    r = rng(1)
    check_grad(scale, dup(r, 6), dup(r, 6), c)


def test_scale_alone_exact_and_config():
    r = rng(2)
    x, y, dy = r.random(4), r.random(4), r.random(4)
    dx = np.zeros(4)
    SEEN.clear()
    got = gk.autodiff(scale, gk.Duplicated(x, dx), gk.Duplicated(y, dy.copy()), gk.Active(0.5))
    assert got[0] is None and got[1] is None
    assert got[2] == pytest.approx(float(dy @ x), rel=1e-12)
    np.testing.assert_allclose(dx, 0.5 * dy, rtol=1e-12)
    assert SEEN == [gk.RuleConfig(True, True, 1, (False, False, False))]  # at top level nothing is overwritten


def test_duplicated_no_need_alone():
    r = rng(3)
    SEEN.clear()
    y = r.random(3)
    before = y.copy()
    gk.autodiff(cumsum, gk.DuplicatedNoNeed(r.random(3), np.zeros(3)), gk.DuplicatedNoNeed(y, np.ones(3)))
    assert SEEN[-1].needs_primal is False
    np.testing.assert_array_equal(y, before)  # the augmented primal skipped the primal
    gk.autodiff(cumsum, gk.Duplicated(r.random(3), np.zeros(3)), gk.DuplicatedNoNeed(r.random(3), np.ones(3)))
    assert SEEN[-1].needs_primal is True  # False only when every Duplicated argument is DuplicatedNoNeed


@pytest.mark.parametrize("rule, args", [
    (exp_inplace, lambda r: (dup(r, 5),)),
    (cumsum, lambda r: (gk.Duplicated(r.uniform(-1, 1, (2, 5)), np.zeros((2, 5))), dup(r, (2, 5)))),
    (square_launching, lambda r: (dup(r, 5), dup(r, 5))),
])
def test_rules_alone(rule, args):
    check_grad(rule, *args(rng(4)))


def test_autodiff_thunk_of_a_rule():
    r = rng(5)
    x, dx = r.random(4), np.zeros(4)
    fwd, rev = gk.autodiff_thunk(exp_inplace, gk.Duplicated)
    x0 = x.copy()
    tape = fwd(gk.Duplicated(x, dx))
    np.testing.assert_allclose(x, np.exp(x0), rtol=1e-12)
    dx[...] = 1.0
    rev(gk.Duplicated(x, dx), tape)
    np.testing.assert_allclose(dx, np.exp(x0), rtol=1e-12)


def test_vector_mode_alone():
    """width k: each lane equals a separate call."""
    r = rng(6)
    x0 = r.random(4)
    seeds = [r.random(4) for _ in range(2)]
    lanes = [s.copy() for s in seeds]
    x = x0.copy()
    gk.autodiff(exp_inplace, gk.BatchDuplicated(x, tuple(lanes)))
    assert SEEN[-1].width == 2
    for s, got in zip(seeds, lanes):
        d = s.copy()
        gk.autodiff(exp_inplace, gk.Duplicated(x0.copy(), d))
        np.testing.assert_allclose(got, d, rtol=1e-12)
    t = [r.random(4) for _ in range(2)]
    x = x0.copy()
    gk.autodiff(exp_inplace, gk.BatchDuplicated(x, tuple(u.copy() for u in t)), mode=gk.Forward)
    np.testing.assert_allclose(x, np.exp(x0), rtol=1e-12)


@gk.custom_rule(writes=("y",))
def scale_lanes(x, y, c):
    y[...] = c * x


@scale_lanes.reverse
def _(config, tape, x, y, c):
    dys = y.dval if config.width > 1 else (y.dval,)
    dxs = x.dval if config.width > 1 else (x.dval,)
    dcs = []
    for dx, dy in zip(dxs, dys):
        dcs.append(float(np.sum(dy * x.val)))
        dx += c.val * dy
        dy[...] = 0.0
    return (None, None, tuple(dcs) if config.width > 1 else dcs[0])


def test_vector_mode_active_scalar_lanes():
    r = rng(7)
    x, y = r.random(3), r.random(3)
    dys = (r.random(3), r.random(3))
    got = gk.autodiff(scale_lanes, gk.BatchDuplicated(x, (np.zeros(3), np.zeros(3))),
                      gk.BatchDuplicated(y, tuple(d.copy() for d in dys)), gk.Active(0.7))
    np.testing.assert_allclose(got[2], [d @ x for d in dys], rtol=1e-12)


# -- rules inside programs ---------------------------------------------------------------------------------------

def test_rule_and_launches_in_a_program():
    """A temporary written by a rule gets a shadow; a later launch overwrites what the rule's reverse reads."""
    def prog(u, E, c):
        t = np.empty_like(u)
        scale(u, t, c)
        gk.launch(square, u.size, t, u)
        exp_inplace(u)
        scale(u, t, c * 0.5)
        gk.launch(axpy, u.size, 1.0, t, E)
    check_grad(prog, dup(rng(8), 5), dup(rng(9), 5), gk.Active(0.8))  # reverse and forward mode


def test_launches_inside_a_rule_are_not_recorded():
    def prog(u, v):
        square_launching(u, v)
    r = rng(9)
    u, v = r.random(4), r.random(4)
    fwd, _ = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated)
    tape = fwd(gk.Duplicated(u, np.zeros(4)), gk.Duplicated(v, np.zeros(4)))
    assert [s.kernel for s in tape.steps] == ["square_launching"]
    check_grad(prog, dup(r, 4), dup(r, 4))


def test_what_is_kept_for_a_rules_reverse():
    """exp_inplace's reverse reads u after the call; a later launch overwrites u: u is saved before it (one copy,
    reported), and the gradient is right. cumsum (reads=()) keeps nothing."""
    n = 6

    def prog(u, w, E):
        exp_inplace(u)           # its reverse reads u as it left it
        gk.launch(square, n, w, u)   # overwrites u: a copy of u is saved first
        cumsum(u, w)             # writes w, which square's reverse reads: w saved; reads=(): u is not kept for it
        gk.launch(square, n, w, u)   # overwrites u, which nothing still to be reversed reads as it is now
        gk.launch(axpy, n, 1.0, u, E)
    r = rng(10)
    args = (dup(r, n), dup(r, n), dup(r, n))
    check_grad(prog, *args)
    fwd, _ = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, gk.Duplicated)
    tape = fwd(*(gk.Duplicated(a.val.copy(), np.zeros(n)) for a in args))
    table = {row[0]: row for row in tape.table()}
    assert table[2][1:3] == ("square", n * 8)   # u, kept for exp_inplace's reverse
    assert table[3][1:3] == ("cumsum", n * 8)   # w, read by square's reverse
    assert table[4][2] == 0                      # u after cumsum: no reverse reads it
    assert gk.inspect(prog, *(gk.Duplicated(a.val.copy(), np.zeros(n)) for a in args)).saved_bytes == 2 * n * 8


@gk.custom_rule(reads=("a",), writes=("y",))
def mul(a, b, y):
    """y = a * b; its reverse reads a from the runtime, b from its own tape when b may be overwritten."""
    y[...] = a * b


@mul.augmented_primal
def _(config, a, b, y):
    SEEN.append(config)
    mul.primal(a.val, b.val, y.val)
    return b.val.copy() if config.overwritten[1] else None


@mul.forward
def _(config, a, b, y):
    mul.primal(a.val, b.val, y.val)
    y.dval[...] = a.dval * b.val + a.val * b.dval


@mul.reverse
def _(config, tape, a, b, y):
    bv = tape if config.overwritten[1] else b.val
    if isinstance(a, gk.Duplicated):
        a.dval[...] += bv * y.dval
    if isinstance(b, gk.Duplicated):
        b.dval[...] += a.val * y.dval
    y.dval[...] = 0.0
    return (None, None, None)


def test_reads_narrows_what_is_kept_and_sets_overwritten():
    n = 5

    def prog(a, b, y):
        mul(a, b, y)
        gk.launch(square, n, y, a)   # overwrites a: kept for mul (reads=("a",)): saved
        gk.launch(square, n, y, b)   # overwrites b: not kept (mul tapes it itself, config.overwritten[1])
    r = rng(11)
    SEEN.clear()
    check_grad(prog, dup(r, n), dup(r, n), dup(r, n))
    assert SEEN[-1].overwritten == (False, True, True)
    fwd, _ = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, gk.Duplicated)
    tape = fwd(dup(r, n), dup(r, n), dup(r, n))
    assert [(row[1], row[2], row[3]) for row in tape.table()] == [("mul", 0, n * 8), ("square", n * 8, 0),
                                                                   ("square", 0, 0)]


def test_active_scalar_through_host_arithmetic_into_a_rule():
    def prog(u, v, c):
        scale(u, v, c * c + 1.0)
        exp_inplace(v)
    r = rng(12)
    check_grad(prog, dup(r, 4), dup(r, 4), gk.Active(0.3))


def test_forward_mode_and_vector_mode_programs():
    def prog(u, v, w):
        scale(u, v, 0.7)
        exp_inplace(v)
        cumsum(v, w)
        gk.launch(square, 4, w, u)
    r = rng(13)
    check_grad(prog, dup(r, 4), dup(r, 4), dup(r, 4), mode=gk.Forward)
    u0, v0, w0 = r.random(4), r.random(4), r.random(4)
    tangents = [r.random(4) for _ in range(2)]
    out = [np.zeros(4), np.zeros(4)]
    gk.autodiff(prog, gk.BatchDuplicated(u0.copy(), tuple(t.copy() for t in tangents)),
                gk.BatchDuplicated(v0.copy(), (np.zeros(4), np.zeros(4))),
                gk.BatchDuplicated(w0.copy(), tuple(out)), mode=gk.Forward)
    for t, got in zip(tangents, out):
        dw = np.zeros(4)
        gk.autodiff(prog, gk.Duplicated(u0.copy(), t.copy()), gk.Duplicated(v0.copy(), np.zeros(4)),
                    gk.Duplicated(w0.copy(), dw), mode=gk.Forward)
        np.testing.assert_allclose(got, dw, rtol=1e-12)


def test_vector_mode_reverse_program():
    def prog(u, v, c):
        scale_lanes(u, v, c)
        gk.launch(square, 3, v, u)
    r = rng(14)
    u0, v0 = r.random(3), r.random(3)
    seeds = [r.random(3) for _ in range(2)]
    dus = tuple(s.copy() for s in seeds)
    got = gk.autodiff(prog, gk.BatchDuplicated(u0.copy(), dus),
                      gk.BatchDuplicated(v0.copy(), (np.zeros(3), np.zeros(3))), gk.Active(0.6))
    for k, s in enumerate(seeds):
        du = s.copy()
        one = gk.autodiff(prog, gk.Duplicated(u0.copy(), du), gk.Duplicated(v0.copy(), np.zeros(3)), gk.Active(0.6))
        np.testing.assert_allclose(dus[k], du, rtol=1e-12)
        assert got[2][k] == pytest.approx(one[2], rel=1e-12)


@pytest.mark.parametrize("snapshots", [1, 2])
def test_rules_in_a_checkpointed_loop(snapshots):
    n, nsteps = 4, 5

    def step_of(u, v, c):
        def step(t):
            w = np.empty_like(u)      # a temporary of the step, written by a rule
            scale(u, v, c)            # v = c u
            exp_inplace(v)            # v = exp(c u)
            cumsum(v, w)
            scale(w, u, 0.1)          # overwrites u, which the first scale's reverse reads
            gk.launch(axpy, n, 0.05, v, u)
        return step

    def prog(u, v, E, c):
        gk.checkpointed_loop(step_of(u, v, c), nsteps, snapshots=snapshots)
        gk.launch(axpy, n, 1.0, u, E)

    def plain(u, v, E, c):
        step = step_of(u, v, c)
        for t in range(nsteps):
            step(t)
        gk.launch(axpy, n, 1.0, u, E)
    r = rng(15)
    u0, v0, E0 = r.uniform(0.1, 0.3, n), r.random(n), r.random(n)
    check_grad(prog, gk.Duplicated(u0.copy(), np.zeros(n)), gk.Duplicated(v0.copy(), np.zeros(n)),
               gk.Duplicated(E0.copy(), np.zeros(n)), gk.Active(0.9))
    seed = r.random(n)
    grads = []
    for f in (prog, plain):
        du, dv, dE = np.zeros(n), np.zeros(n), seed.copy()
        c = gk.autodiff(f, gk.Duplicated(u0.copy(), du), gk.Duplicated(v0.copy(), dv), gk.Duplicated(E0.copy(), dE),
                        gk.Active(0.9))[3]
        grads.append((du, dv, dE, c))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# -- an implicit diffusion loop: launches and the shipped tridiagonal rule ----------------------------------------

@gk.kernel
def source(u, s):
    """A nonlinear source between the implicit steps: u <- u + s u (1 - u)."""
    i = gk.tid()
    u[i] = u[i] + s * u[i] * (1.0 - u[i])


def implicit_diffusion(loop):
    def prog(u, v, E, kappa, nsteps):
        n = u.size
        a, b, c = np.empty_like(u), np.empty_like(u), np.empty_like(u)  # CuPy u: CuPy bands (NEP 18)
        gk.launch(implicit_heat_rows, n, a, b, c, kappa * 0.5)  # r = kappa dt / h^2: host arithmetic on an Active

        def step(t):
            tridiagonal_solve(a, b, c, u, v)  # ping-pong: v <- A^-1 u
            gk.launch(source, n, v, 0.1)
            tridiagonal_solve(a, b, c, v, v)  # in place: v <- A^-1 v
            gk.copy(u, v)
        loop(step, nsteps)
        gk.launch(axpy, n, 1.0, u, E)
    return prog


def _plain_loop(step, nsteps):
    for t in range(nsteps):
        step(t)


@pytest.mark.parametrize("loop", ["plain", "checkpointed"])
def test_implicit_diffusion_with_the_tridiagonal_rule(loop):
    """Gradient w.r.t. the initial state and an Active coefficient against finite differences (check_grad:
    reverse and forward), and the checkpointed loop against the plain one."""
    ck = lambda step, nsteps: gk.checkpointed_loop(step, nsteps, snapshots=2)  # noqa: E731
    prog = implicit_diffusion(_plain_loop if loop == "plain" else ck)
    r = rng(20)
    n = 7
    u0, v0, E0 = r.uniform(0.2, 0.8, n), r.uniform(0.2, 0.8, n), r.random(n)
    check_grad(prog, gk.Duplicated(u0.copy(), np.zeros(n)), gk.Duplicated(v0.copy(), np.zeros(n)),
               gk.Duplicated(E0.copy(), np.zeros(n)), gk.Active(0.8), 4)
    if loop == "checkpointed":
        seed = r.random(n)
        out = []
        for f in (prog, implicit_diffusion(_plain_loop)):
            du, dv, dE = np.zeros(n), np.zeros(n), seed.copy()
            g = gk.autodiff(f, gk.Duplicated(u0.copy(), du), gk.Duplicated(v0.copy(), dv),
                            gk.Duplicated(E0.copy(), dE), gk.Active(0.8), 4)
            out.append((du, dv, dE, g[3]))
        for a, b in zip(*out):
            np.testing.assert_allclose(a, b, rtol=1e-12)


# -- malformed rules: RuleError, buffers unchanged ------------------------------------------------------------------

def _rule_returning(value, writes=("y",)):
    @gk.custom_rule(writes=writes)
    def f(x, y, c):
        y[...] = c * x

    @f.reverse
    def _(config, tape, x, y, c):
        x.dval[...] += 1.0  # changes a shadow before returning what it should not
        return value

    @f.forward
    def _(config, x, y, c):
        y.dval[...] = 1.0
        return value
    return f


MALFORMED = {
    "too few entries": (_rule_returning((None, None)), "tuple of 3 entries"),
    "not a tuple": (_rule_returning(None), "tuple of 3 entries"),
    "a derivative for a non-Active argument": (_rule_returning((np.ones(3), None, 0.0)), "argument 'x'"),
    "an array where a scalar is due": (_rule_returning((None, None, np.ones(3))), "where a real number"),
    "None for an Active argument": (_rule_returning((None, None, None)), "where a real number"),
}


def _buffers(r):
    return r.random(3), np.zeros(3), r.random(3), r.random(3)


def _state(*arrays):
    return [a.copy() for a in arrays]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_reverse_alone(case):
    f, message = MALFORMED[case]
    x, dx, y, dy = _buffers(rng(16))
    before = _state(x, dx, y, dy)
    with pytest.raises(gk.RuleError, match=message) as e:
        gk.autodiff(f, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(2.0))
    assert "'f'" in str(e.value) or "f'" in str(e.value)
    for a, b in zip(before, (x, dx, y, dy)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_reverse_in_a_program_leaves_shadows(case):
    f, message = MALFORMED[case]
    assert not f.validated  # (a rule whose reverse once returned well-formed entries is trusted afterwards)

    def prog(x, y, E, c):
        f(x, y, c)
        gk.launch(axpy, 3, 1.0, y, E)
    r = rng(17)
    x, dx, y, dy = _buffers(r)
    E, dE = r.random(3), r.random(3)
    shadows = _state(dx, dy, dE)
    with pytest.raises(gk.RuleError, match=message):
        gk.autodiff(prog, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Duplicated(E, dE), gk.Active(2.0))
    for a, b in zip(shadows, (dx, dy, dE)):
        np.testing.assert_array_equal(a, b)


def test_missing_reverse_and_forward():
    @gk.custom_rule
    def f(x):
        x *= 2.0
    x, dx = np.ones(3), np.ones(3)
    for mode, part in ((gk.Reverse, "reverse"), (gk.Forward, "forward")):
        with pytest.raises(gk.RuleError, match=f"no {part} rule"):
            gk.autodiff(f, gk.Duplicated(x, dx), mode=mode)
        np.testing.assert_array_equal(x, 1.0)
        np.testing.assert_array_equal(dx, 1.0)

    def prog(u):
        f(u)
    with pytest.raises(gk.RuleError, match="no reverse rule"):
        gk.autodiff(prog, gk.Duplicated(x, dx))
    np.testing.assert_array_equal(dx, 1.0)
    f(x)  # plain calls need no rule
    np.testing.assert_array_equal(x, 2.0)


def test_forward_returning_a_value():
    f = _rule_returning(1.0)
    x, dx, y, dy = _buffers(rng(18))
    before = _state(x, dx, y, dy)
    with pytest.raises(gk.RuleError, match="returns None"):
        gk.autodiff(f, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Duplicated(2.0, 1.0), mode=gk.Forward)
    for a, b in zip(before, (x, dx, y, dy)):
        np.testing.assert_array_equal(a, b)


def test_write_outside_writes_is_refused():
    f = _rule_returning((None, None, 0.0), writes=("x",))  # its primal writes y
    x, dx, y, dy = _buffers(rng(19))
    before = _state(x, dx, y, dy)
    with pytest.raises(gk.RuleError, match="writes="):
        gk.autodiff(f, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(2.0))
    for a, b in zip(before, (x, dx, y, dy)):
        np.testing.assert_array_equal(a, b)
    assert y.flags.writeable and x.flags.writeable


def test_registration_is_checked():
    def f(a, b):
        pass
    with pytest.raises(gk.RuleError, match=r"must take \(config, tape, a, b\)"):
        gk.custom_rule(f).reverse(lambda config, a, b: None)
    with pytest.raises(gk.RuleError, match=r"must take \(config, a, b\)"):
        gk.custom_rule(f).forward(lambda config, tape, a, b, extra: None)
    with pytest.raises(gk.RuleError, match="'c'"):
        gk.custom_rule(reads=("c",))(f)
    with pytest.raises(gk.RuleError, match="tuple of parameter names"):
        gk.custom_rule(writes="a")(f)
    with pytest.raises(gk.RuleError, match="variadic"):
        gk.custom_rule(lambda *xs: None)
    with pytest.raises(gk.RuleError, match="does not take"):
        def prog(u):
            scale(u)
        gk.autodiff(prog, gk.Duplicated(np.ones(2), np.ones(2)))


def test_host_write_after_a_rule_call_is_refused():
    """An array a rule took is guarded like a launch's: a host write to it is refused, naming the rule call."""
    def prog(u, v, c):
        scale(u, v, c)
        v[0] = 3.0
        scale(v, u, c)
    du, dv = np.zeros(3), np.ones(3)
    with pytest.raises(gk.ProgramError, match="a call of rule 'scale'"):
        gk.autodiff(prog, gk.Duplicated(np.ones(3), du), gk.Duplicated(np.ones(3), dv), gk.Active(2.0))
    np.testing.assert_array_equal(du, 0.0)
    np.testing.assert_array_equal(dv, 1.0)


def test_active_array_is_refused_before_anything_runs():
    x, dx, y, dy = np.ones(3), np.zeros(3), np.ones(3), np.ones(3)
    with pytest.raises(gk.AnnotationError, match="argument 'c' is Active but is ndarray"):
        gk.autodiff(scale, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(np.ones(3)))
    for a, want in ((x, 1.0), (dx, 0.0), (y, 1.0), (dy, 1.0)):
        np.testing.assert_array_equal(a, want)
