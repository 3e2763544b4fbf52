"""Random programs against brute-force oracles (issue 15's copy-on-write saves, issue 16's state analysis).

Each program is a random sequence of launches from a small pool of kernels (in-place nonlinear updates,
read-modify-writes, stencils, write-only outputs, atomic losses, gk.copy, gk.fill) and calls of functions
with custom rules (NumPy code: an in-place update that tapes its input, a read-modify-write whose reverse
reads one argument kept by the runtime, a prefix sum that keeps nothing) on three annotated
buffers, half-length views of them and a temporary allocated inside the program, with an Active scalar and
host arithmetic on it; a random stretch of it is a time loop, plain or `gk.checkpointed_loop` with random
snapshots and schedule (binomial, Revolve, mixed), whose launches may depend on t. What decides what is
saved (which old contents a later reverse reads), and what is a loop's state, is checked two ways:
* against finite differences of the whole program and the dot-product test (check_grad, float64);
* the checkpointed program against the same program with a plain loop (equal to 1e-12: the same kernels
  on the same values), and the primals after the call against a plain call of the function.

GRADKERN_FUZZ_PROGRAMS sets the number of programs (CI default 12), GRADKERN_FUZZ_SEED the seed.
"""

from __future__ import annotations

import os

import checkpoint_schedules as cs
import numpy as np
import pytest

import gradkern as gk
from gradkern.backends import set_default
from gradkern.backends.hostcuda import compiler
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_PROGRAMS", "12"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
N = 8
H = N // 2


@gk.kernel
def nonlinear(y):
    i = gk.tid()
    y[i] = gk.sin(y[i]) * y[i] + 0.5 * y[i]


@gk.kernel
def axpy_squared(x, y, a):
    i = gk.tid()
    y[i] = y[i] + a * x[i] * x[i]


@gk.kernel
def stencil(x, y, c):
    i = gk.tid()
    y[i + 1] = x[i + 1] + c * (x[i] - 2.0 * x[i + 1] + x[i + 2])


@gk.kernel
def scale(x, y, a):
    i = gk.tid()
    y[i] = a * x[i]


@gk.kernel
def loss(x, E):
    i = gk.tid()
    gk.atomic_add(E, 0, x[i] * x[i])


@gk.custom_rule(reads=())
def r_sin(y):
    """y <- sin(y) y + y/2 in place; its reverse needs the old y, which it tapes (reads=(): nothing kept)."""
    y[...] = np.sin(y) * y + 0.5 * y


@r_sin.augmented_primal
def _(config, y):
    old = y.val.copy()
    r_sin.primal(y.val)
    return old


@r_sin.reverse
def _(config, old, y):
    y.dval[...] *= np.cos(old) * old + np.sin(old) + 0.5
    return (None,)


@r_sin.forward
def _(config, y):
    old = y.val.copy()
    r_sin.primal(y.val)
    y.dval[...] *= np.cos(old) * old + np.sin(old) + 0.5


@gk.custom_rule(reads=("x",), writes=("y",))
def r_axpy(x, y, a):
    """y <- y + a x^2; its reverse reads x (kept by the runtime), not y."""
    y += a * x * x


@r_axpy.reverse
def _(config, tape, x, y, a):
    if isinstance(x, gk.Duplicated):
        x.dval[...] += 2.0 * a.val * x.val * y.dval
    return (None, None, float(np.sum(x.val * x.val * y.dval)) if isinstance(a, gk.Active) else None)


@r_axpy.forward
def _(config, x, y, a):
    r_axpy.primal(x.val, y.val, a.val)
    if isinstance(y, gk.Duplicated):
        dx = x.dval if isinstance(x, gk.Duplicated) else 0.0
        da = a.dval if isinstance(a, gk.Duplicated) else 0.0
        y.dval[...] += 2.0 * a.val * x.val * dx + da * x.val * x.val


@gk.custom_rule(reads=(), writes=("y",))
def r_cumsum(x, y):
    """y <- prefix sums of x; linear: its reverse reads no primal."""
    np.cumsum(x, out=y)


@r_cumsum.reverse
def _(config, tape, x, y):
    if isinstance(x, gk.Duplicated):
        x.dval[...] += np.cumsum(y.dval[::-1])[::-1]
    y.dval[...] = 0.0
    return (None, None)


@r_cumsum.forward
def _(config, x, y):
    np.cumsum(x.val, out=y.val)
    if isinstance(y, gk.Duplicated):
        if isinstance(x, gk.Duplicated):
            np.cumsum(x.dval, out=y.dval)
        else:
            y.dval[...] = 0.0


def _program(rng: np.random.Generator):
    """A random program (a function of the buffers A, B, C, the loss E and the Active scalar c) and a
    description of it for failure messages; `loop(step, nsteps)` runs its time loop."""
    ops = []
    for _ in range(int(rng.integers(2, 6))):
        kind = rng.choice(["nonlinear", "axpy", "stencil", "scale", "copy", "fill", "loss", "r_sin", "r_axpy",
                           "r_cumsum"])
        half = bool(rng.integers(0, 2)) and kind != "stencil"
        src, dst = rng.choice(4, size=2, replace=False)  # 0..2: A, B, C; 3: the temporary
        part = int(rng.integers(0, 2))  # which half, for half views
        scalar = rng.choice(["c", "const", "host"])
        by_t = bool(rng.integers(0, 2))  # inside the loop, the launch runs only on even t
        ops.append((kind, half, int(src), int(dst), part, scalar, by_t))
    start = int(rng.integers(0, len(ops)))
    stop = int(rng.integers(start + 1, len(ops) + 1))
    nsteps = int(rng.integers(1, 6))
    snapshots = int(rng.integers(1, nsteps + 1))
    schedule = str(rng.choice(["binomial", "revolve", "mixed"]))

    def run_op(op, arrays, c, t):
        kind, half, src, dst, part, scalar, by_t = op
        if t is not None and by_t and t % 2:
            return
        x, y = arrays[src], arrays[dst]
        if half:
            x, y = x[part * H:(part + 1) * H], y[part * H:(part + 1) * H]
        a = c if scalar == "c" else 0.7 if scalar == "const" else c * 0.5 + 0.1
        if t is not None and scalar != "const":
            a = a * (1.0 + 0.1 * t)
        if kind == "nonlinear":
            gk.launch(nonlinear, y.shape[0], y)
        elif kind == "axpy":
            gk.launch(axpy_squared, y.shape[0], x, y, a)
        elif kind == "stencil":
            gk.launch(stencil, N - 2, x, y, a * 0.3)
        elif kind == "scale":
            gk.launch(scale, y.shape[0], x, y, a)
        elif kind == "copy":
            gk.copy(y, x)
        elif kind == "fill":
            gk.fill(y, a)
        elif kind == "r_sin":
            r_sin(y)
        elif kind == "r_axpy":
            r_axpy(x, y, a)
        elif kind == "r_cumsum":
            r_cumsum(x, y)
        else:
            gk.launch(loss, x.shape[0], x, arrays[4])

    def make(loop):
        def program(A, B, C, E, c):
            T = np.zeros_like(A)  # a temporary of the program's own
            arrays = [A, B, C, T, E]
            for op in ops[:start]:
                run_op(op, arrays, c, None)

            def step(t):
                for op in ops[start:stop]:
                    run_op(op, arrays, c, t)
            loop(step, nsteps, snapshots, schedule)
            for op in ops[stop:]:
                run_op(op, arrays, c, None)
            gk.launch(loss, N, A, E)
            gk.launch(loss, N, T, E)
        return program
    text = f"ops={ops}, loop over ops[{start}:{stop}], nsteps={nsteps}, snapshots={snapshots}, {schedule}"
    return make, text


def plain_loop(step, nsteps, snapshots, schedule):
    for t in range(nsteps):
        step(t)


def checkpointed_loop(step, nsteps, snapshots, schedule):
    made = None if schedule == "binomial" else cs.Revolve(nsteps, snapshots) if schedule == "revolve" else \
        cs.MixedCheckpointSchedule(nsteps, snapshots)
    gk.checkpointed_loop(step, nsteps, snapshots=snapshots, schedule=made)


def checkpointed_loop_on_host(step, nsteps, snapshots, schedule):
    """As checkpointed_loop, with storage="host": on a device, snapshots copied out of device memory."""
    made = None if schedule == "binomial" else cs.Revolve(nsteps, snapshots) if schedule == "revolve" else \
        cs.MixedCheckpointSchedule(nsteps, snapshots)
    gk.checkpointed_loop(step, nsteps, snapshots=snapshots, schedule=made, storage="host")


def _inputs(seed):
    r = np.random.default_rng(seed)
    return [r.uniform(0.2, 0.8, N) for _ in range(3)] + [np.zeros(1)]


def _gradient(program, seed):
    A, B, C, E = _inputs(seed)
    shadows = [np.zeros(N), np.zeros(N), np.zeros(N), np.ones(1)]
    got = gk.autodiff(program, *[gk.Duplicated(x, d) for x, d in zip((A, B, C, E), shadows)], gk.Active(0.4))
    return shadows, got[4], (A, B, C, E)


@pytest.mark.parametrize("case", range(N_PROGRAMS))
def test_random_programs_against_finite_differences_and_the_plain_loop(case):
    rng = np.random.default_rng(SEED * 100_003 + case)
    make, text = _program(rng)
    plain, checkpointed = make(plain_loop), make(checkpointed_loop)
    try:
        A, B, C, E = _inputs(case)
        check_grad(checkpointed, *[gk.Duplicated(x, np.zeros_like(x)) for x in (A, B, C, E)], gk.Active(0.4),
                   seed=case)
        want, got = _gradient(plain, case), _gradient(checkpointed, case)
        for a, b in zip(want[0], got[0]):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
        assert abs(got[1] - want[1]) <= 1e-12 * max(abs(want[1]), 1e-300)
        direct = _inputs(case)
        plain(*direct, 0.4)  # the primals after the call are those of a plain call
        for a, b in zip(got[2], direct):
            np.testing.assert_array_equal(a, b)
    except (AssertionError, gk.GradkernError) as e:
        raise AssertionError(f"program {case} (seed {SEED}): {text}\n{e}") from e


@pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH: backend hostcuda is unavailable")
@pytest.mark.parametrize("case", range(0, N_PROGRAMS, 4))
def test_random_programs_on_hostcuda_equal_the_cpu(case):
    """The fuzzer's slice on the CUDA path (docs/hostcuda.md): with hostcuda the default backend, every launch
    runs the CUDA backend's C and the program takes its device paths (fingerprint guard, storage="host"
    snapshots copied out and back). Gradients and primals equal the compiled CPU backend's to 1e-12 relative:
    the same operations, except that atomic adds into the loss sum in the schedule's order on hostcuda
    (float64 sums of at most 2 N terms of like size: tests/backends/test_hostcuda.py's RTOL derivation)."""
    rng = np.random.default_rng(SEED * 100_003 + case)
    make, text = _program(rng)
    program = make(checkpointed_loop_on_host)
    want = _gradient(program, case)
    before = set_default("hostcuda")
    try:
        got = _gradient(program, case)
    finally:
        set_default(before)
    try:
        for a, b in zip(want[0] + list(want[2]), got[0] + list(got[2])):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
        assert abs(got[1] - want[1]) <= 1e-12 * max(abs(want[1]), 1e-300)
    except AssertionError as e:
        raise AssertionError(f"program {case} (seed {SEED}) on hostcuda: {text}\n{e}") from e
