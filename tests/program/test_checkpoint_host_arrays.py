"""A checkpointed step's launches are recomputed with the contents their host-made array arguments were recorded
with, or refused (program/hostarrays.py; docs/checkpointed-loops.md#arrays-host-code-makes-in-a-step): a step
passing an array drawn from a generator it does not reseed from t took another trajectory when recomputed, and
the gradient and the primals were silently wrong (by 0.37 in the state's gradient of this 6-step Langevin loop
with snapshots=2, before session 55). The scalar analogue: test_checkpoint_scalars.py. Interpreter launches
(on_interpreter): the check is the program layer's; one test runs the CuPy stand-in."""

from __future__ import annotations

import checkpoint_schedules as cs
import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.program.schedule import SegmentedSchedule
from gradkern.testing import check_grad

N, T = 5, 6


@gk.kernel
def _langevin(x, kick, c):
    i = gk.tid()
    x[i] = x[i] - c * x[i] * x[i] * x[i] + 0.1 * kick[i]


@gk.kernel
def _gather(x, y, idx, c):
    i = gk.tid()
    y[i] = x[i] - c * x[idx[i]] * x[i]


@gk.kernel
def _scatter(dst, idx, src):
    i = gk.tid()
    dst[idx[i]] = src[i]


@gk.kernel
def _copy(dst, src):
    i = gk.tid()
    dst[i] = src[i]


@gk.custom_rule(reads=(), writes=("y",))
def _fill_cos(y, t):
    y[:] = np.cos(np.arange(y.shape[0]) + t)


def _draws(case, rng, t, pre):
    """The host array step t passes as the kick, spelled as `case` says (`pre`: an array made before the loop)."""
    grid = np.linspace(0.0, 1.0, N)
    if case == "fresh":
        return rng.standard_normal(N)
    if case == "global":
        return np.random.rand(N)
    if case == "const":
        return gk.Const(rng.standard_normal(N))
    if case == "view":
        return rng.standard_normal(2 * N)[::2]  # a view of a random array: its buffer is printed
    if case == "float32":
        return rng.standard_normal(N).astype(np.float32)
    if case == "first-step":  # written in step 0 into a buffer made before the loop, read in every step
        if t == 0:
            pre[:] = rng.standard_normal(N)
        return pre
    if case == "fixed-fresh":  # the draws of "fresh"'s first forward, the same in every run
        return np.random.default_rng(3).standard_normal((T, N))[t]
    if case == "reseeded":
        return np.random.default_rng((3, t)).standard_normal(N)
    if case == "sin":
        return np.sin((t + 1) * grid)
    if case == "first-step-cos":
        if t == 0:
            pre[:] = np.cos(7.0 * grid)
        return pre
    if case == "empty-filled":  # a fresh buffer a launch overwrites whole unread: its first contents never count
        w = np.empty(N)
        gk.fill(w, 0.1 * t)
        return w
    if case == "rule-filled-empty":  # a rule's output: printed at the next launch, as the rule left it
        w = np.empty(N)
        _fill_cos(w, t)
        return w
    if case == "float32-sin":
        return np.sin((t + 1) * grid).astype(np.float32)
    raise AssertionError(case)


def _program(case, loop):
    def program(x, c):
        rng = np.random.default_rng(3)
        pre, y = np.zeros(N), np.zeros(N)

        def step(t):
            if case == "scattered":  # filled whole through a permutation, which the analysis cannot prove
                w = np.zeros(N)  # printed before the scatter (np.empty's garbage would be refused)
                gk.launch(_scatter, N, w, (np.arange(N) * 2 + t) % N, np.cos(np.arange(N) + t))
                gk.launch(_langevin, N, x, w, c)
            elif case.startswith("index"):  # a random index array for a gather, or one made from t
                idx = rng.integers(0, N, N) if case == "index" else (np.arange(N) * (t + 1)) % N
                gk.launch(_gather, N, x, y, idx, c)
                gk.launch(_copy, N, x, y)
            else:
                gk.launch(_langevin, N, x, _draws(case, rng, t, pre), c)
        loop(step)
    return program


def _plain(step):
    for t in range(T):
        step(t)


def _binomial(step):
    gk.checkpointed_loop(step, T, snapshots=2)


def _gradient(case, loop):
    np.random.seed(5)  # np.random.rand's draws: the same first forward in every run
    x = gk.Duplicated(np.random.default_rng(0).uniform(0.5, 1.0, N), np.ones(N))
    dc = gk.autodiff(_program(case, loop), x, gk.Active(0.3))[1]
    return x.dval, dc, x.val


RANDOM = ["fresh", "global", "const", "view", "float32", "first-step", "index"]
DETERMINISTIC = ["reseeded", "sin", "first-step-cos", "float32-sin", "empty-filled", "index-from-t",
                 "scattered", "rule-filled-empty"]


@pytest.mark.parametrize("case", RANDOM)
def test_a_random_host_array_in_a_checkpointed_step_is_refused(case, monkeypatch):
    """Refused when the reverse recomputes the step, naming the kernel's argument and the user's line; the first
    forward's primals and the plain loop's agree (the same draws), so the error is the only sign."""
    on_interpreter(monkeypatch)
    # float32: NumPy's Generator allocates its draws with np.empty, a TrackedArray while a program records
    # (hostcalls.py, session 56), so `.astype(np.float32)` of them is a copy launch, whose source is refused
    arg = {"index": "idx", "float32": "src"}.get(case, "kick")
    with pytest.raises(gk.ProgramError, match=rf"step \d of the checkpointed loop launched '_(langevin|gather|copy1)' "
                                              rf"\(launch 1 of the step\) with argument '{arg}' \(.*holding other "
                                              r"contents than when it was recorded .*, at .*test_checkpoint_host_"
                                              r"arrays\.py:\d+ \(`(gk\.launch|return rng)\(?.*\)`\): host code that "
                                              r"draws random "
                                              r"numbers .*partial gradient") as info:
        _gradient(case, _binomial)
    assert "default_rng((seed, t))" in info.value.hint
    assert "gradkern/" not in str(info.value).split(" at ")[-1]  # the user's line, not ours


def test_the_draws_fixed_give_the_gradient_the_plain_loop_gives(monkeypatch):
    """What the refused loop should have given: the same draws, fixed before the loop and indexed by t (the
    spelling that works), give the plain loop's gradient (tolerance: test_a_host_array_made_the_same_...)."""
    on_interpreter(monkeypatch)
    want, got = _gradient("fresh", _plain), _gradient("fixed-fresh", _binomial)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("schedule", [
    lambda: cs.Revolve(T, 2), lambda: cs.TwoLevelCheckpointSchedule(3, 2, binomial_storage=cs.StorageType.RAM),
    lambda: SegmentedSchedule(T, 2, 2), None],
    ids=["revolve", "two-level", "segmented", "memory"])
def test_every_schedule_refuses_a_fresh_random_array(schedule, monkeypatch):
    """Every schedule recomputes, through the same hooks (MixedCheckpointSchedule too: left out, its first
    iteration costs seconds of CPU in checkpoint_schedules)."""
    on_interpreter(monkeypatch)

    def loop(step):
        if schedule is None:
            gk.checkpointed_loop(step, T, memory=4 * N * 8)
        else:
            gk.checkpointed_loop(step, T, schedule=schedule())
    with pytest.raises(gk.ProgramError, match="holding other contents than when it was recorded"):
        _gradient("fresh", loop)


def test_what_the_refusal_leaves(monkeypatch):
    """The refusal comes during the reverse sweep, before the recomputed launch runs: the loop's state holds what
    the recomputation reached (here step 5's input, restored from a snapshot: the plain loop's state after 5
    steps, bit for bit), not the final state, and the shadows a partial gradient."""
    on_interpreter(monkeypatch)
    want = _gradient("fresh", lambda step: [step(t) for t in range(T - 1)])[2]
    np.random.seed(5)
    x = gk.Duplicated(np.random.default_rng(0).uniform(0.5, 1.0, N), np.ones(N))
    with pytest.raises(gk.ProgramError, match=f"step {T - 1} of the checkpointed loop .*holding other contents"):
        gk.autodiff(_program("fresh", _binomial), x, gk.Active(0.3))
    np.testing.assert_array_equal(x.val, want)
    assert not np.array_equal(x.dval, _gradient("fixed-fresh", _plain)[0])


@pytest.mark.parametrize("case", DETERMINISTIC)
def test_a_host_array_made_the_same_when_recomputed_is_accepted(case, monkeypatch):
    """Bit-identical host arrays (a function of t, a generator seeded by t, a buffer written once from
    constants): the checkpointed gradient is the plain loop's. The same interpreter arithmetic in the same
    order: 1e-12 is room for none but the sweep's other grouping of adds; the primals bit for bit."""
    on_interpreter(monkeypatch)
    want, got = _gradient(case, _plain), _gradient(case, _binomial)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_array_equal(got[2], want[2])


def test_deterministic_host_arrays_pass_check_grad(monkeypatch):
    """Central differences and the dot-product test (check_grad's defaults, float64) on random inputs, every
    step recomputed from snapshots=2 with its host arrays compared."""
    on_interpreter(monkeypatch)

    def program(x, c):
        grid = np.linspace(0.0, 1.0, x.shape[0])

        def step(t):
            gk.launch(_langevin, x.shape[0], x, np.random.default_rng((3, t)).standard_normal(x.shape[0]), c)
            gk.launch(_langevin, x.shape[0], x, np.sin((t + 1) * grid).astype(np.float32), c)
        gk.checkpointed_loop(step, T, snapshots=2)
    rng = np.random.default_rng(1)
    check_grad(program, gk.Duplicated(rng.uniform(0.3, 0.8, 4), np.zeros(4)), gk.Active(rng.uniform(0.2, 0.4)))


def test_a_buffer_rewritten_by_an_early_step_is_compared_where_the_final_state_is_rebuilt(monkeypatch):
    """Step 0 writes a buffer made before the loop that steps 2 and on read. With a snapshot at every step the
    reverse recomputes step 0 last, after every launch that reads the buffer; the final state's rebuild then
    reruns step T-1, whose launch was not printed (the guard held the buffer there): it is compared with the
    buffer's print all the same, since a recomputed step 0 may have written it (hostarrays.py `unverified`)."""
    on_interpreter(monkeypatch)

    def program(x, c):
        rng, late = np.random.default_rng(3), np.zeros(N)

        def step(t):
            if t == 0:
                late[:] = rng.standard_normal(N)
            gk.launch(_langevin, N, x, late if t >= 2 else np.full(N, 0.5), c)
        gk.checkpointed_loop(step, T, snapshots=T)
    x = gk.Duplicated(np.random.default_rng(0).uniform(0.5, 1.0, N), np.ones(N))
    with pytest.raises(gk.ProgramError, match=rf"step {T - 1} of the checkpointed loop .*'late'.*holding other "
                                              "contents"):
        gk.autodiff(program, x, gk.Active(0.3))


def test_a_recomputed_launch_kept_as_it_ran_is_compared_too(monkeypatch):
    """A recomputed launch on the same objects reruns as it ran before (recompute.py's entries), past the loop
    state's checks: its host-made argument is compared all the same. Step 0's write into a buffer made before
    the loop gives the recorded contents on the first recomputation of step 0 and others on the second."""
    on_interpreter(monkeypatch)
    first = np.random.default_rng(4).standard_normal(N)
    draws = iter([first, first.copy(), first + 1.0])

    def program(x, c):
        pre = np.zeros(N)

        def step(t):
            if t == 0:
                pre[:] = next(draws)
            gk.launch(_langevin, N, x, pre, c)
        gk.checkpointed_loop(step, T, snapshots=2)
    x = gk.Duplicated(np.random.default_rng(0).uniform(0.5, 1.0, N), np.ones(N))
    with pytest.raises(gk.ProgramError, match=r"step 0 of the checkpointed loop .*'pre'.*holding other contents"):
        gk.autodiff(program, x, gk.Active(0.3))


def test_a_device_array_filled_in_place_in_a_step_is_compared_on_the_cupy_stand_in():
    """CuPy arrays have no read-only flag: the guard fingerprints them, and what it holds is what `held` reads
    (hostarrays.py). A device buffer made before the program and filled in step 0 from an unseeded generator is
    refused; filled from constants, the gradient is the plain loop's (the stand-in's g++ build of the CUDA C,
    the same launches in the same order: the tolerance of the NumPy cases above)."""
    from support.fakecupy import installed

    def gradient(cp, random, loop):
        pre = cp.zeros(N)

        def program(x, c):
            rng = np.random.default_rng(3)

            def step(t):
                if t == 0:
                    pre.set(rng.standard_normal(N) if random else np.cos(np.arange(N)))
                gk.launch(_langevin, N, x, pre, c)
            loop(step)
        x = gk.Duplicated(cp.asarray(np.random.default_rng(0).uniform(0.5, 1.0, N)), cp.ones(N))
        dc = gk.autodiff(program, x, gk.Active(0.3))[1]
        return x.dval.get(), dc, x.val.get()
    with installed() as cp:
        want, got = gradient(cp, False, _plain), gradient(cp, False, _binomial)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
        np.testing.assert_array_equal(got[2], want[2])
        with pytest.raises(gk.ProgramError, match=r"step 0 of the checkpointed loop .*'pre'.*holding other contents"):
            gradient(cp, True, _binomial)
