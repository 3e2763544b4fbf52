"""One prepared call (runtime/call.py, docs/prepared-call.md): a launch or derivative call whose signature
was prepared before runs the prepared call kept in the one signature cache, entering binding.py at most 3
times (counted with sys.setprofile, the way every test here watches the runtime: no monkeypatching); every
verb's runs are seen through the runtime's seam (call.observing), and gk.inspect reports the runs a call
makes. Pinned too: a prepared call's results equal the full path's bit for bit; every component of the
signature, and every value a prepared call does not settle (the overlap of buffers, int64 range, a finite
Active value, integer scalars the bounds depend on, data a race or segment check reads), is checked again
after a hit and refused with the same error, nothing touched; emptying a kernel's specialisation cache
drops its prepared calls; they keep no arrays alive; a program's reverse sweep validates nothing."""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import gradkern as gk
from gradkern.errors import AliasingError, AnnotationError, KernelTypeError, LaunchError, RaceError
from gradkern.kernels import heat_step_2d, saxpy
from gradkern.runtime import annotate, binding, call


def _entries(fn, *modules: str) -> list[str]:
    """The functions of `modules` (default runtime/binding.py) entered while `fn` runs (Python calls, each
    frame counted once), as "module.py:function"."""
    modules = modules or ("runtime/binding.py",)
    seen: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            file = frame.f_code.co_filename.replace("\\", "/")
            for m in modules:
                if file.endswith(m):
                    seen.append(f"{m.rsplit('/', 1)[-1]}:{frame.f_code.co_name}")
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


@pytest.fixture
def saxpy_calls(rng):
    x, y, dx, dy = rng.random(8), rng.random(8), np.zeros(8), rng.random(8)
    return {
        "launch": lambda: gk.launch(saxpy, 8, 1.5, x, y),
        "reverse": lambda: gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy)),
        "forward": lambda: gk.autodiff(saxpy, gk.Duplicated(1.5, 1.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy),
                                       mode=gk.Forward),
    }


@pytest.mark.parametrize("verb", ["launch", "reverse", "forward"])
def test_a_prepared_call_enters_binding_at_most_three_times(saxpy_calls, verb):
    fn = saxpy_calls[verb]
    for _ in range(3):  # prepared, then found again
        fn()
    entered = _entries(fn)
    assert len(entered) <= 3, entered


def test_the_seam_sees_every_run_of_every_verb(saxpy_calls):
    seen: list = []
    with call.observing(lambda run, dim, seconds: seen.append((run.role, dim, seconds >= 0))):
        for verb in ("launch", "reverse", "forward"):
            saxpy_calls[verb]()
    roles = [r for r, _, _ in seen]
    assert roles == ["primal", *gk.inspect(saxpy, gk.Active(1.5), gk.Duplicated(np.ones(8), np.ones(8)),
                                            gk.Duplicated(np.ones(8), np.ones(8)), mode=gk.Reverse).runs,
                     "forward_mode"]
    assert all(dim == (8,) and ok for _, dim, ok in seen)
    saxpy_calls["launch"]()  # the seam is gone
    assert len(seen) == len(roles)


def test_inspect_lists_every_launch_in_every_mode(rng):
    u, un = rng.random((8, 8)), rng.random((8, 8))
    k = 5  # more lanes than one CPU group holds (Backend.lane_group)
    du, dun = tuple(np.zeros((8, 8)) for _ in range(k)), tuple(rng.random((8, 8)) for _ in range(k))
    assert gk.inspect(heat_step_2d, u, un, 0.1).launches == ("primal",)
    cases = {gk.Reverse: (gk.BatchDuplicated(u, du), gk.BatchDuplicated(un, dun), gk.Const(0.1)),
             gk.Forward: (gk.BatchDuplicated(u, du), gk.BatchDuplicated(un, dun), 0.1)}
    seen: list = []
    for mode, args in cases.items():
        ins = gk.inspect(heat_step_2d, *args, mode=mode)
        seen.clear()
        with call.observing(lambda run, dim, seconds: seen.append(run.label)):
            gk.autodiff(heat_step_2d, *args, mode=mode)
        assert ins.launches == tuple(seen) and len(seen) > 1, (mode, seen)


@gk.kernel
def shifted(x, y, k):
    i = gk.tid()
    y[i] = x[i + k] * 2.0


@gk.kernel
def scatter(x, idx, y):
    i = gk.tid()
    y[idx[i]] = x[i] * 3.0


@gk.kernel
def csr_rows(indptr, indices, data, x, y):
    i = gk.tid()
    acc = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        acc += data[k] * x[indices[k]]
    y[i] = acc


@pytest.fixture
def cold():
    call._CALLS.clear()
    yield
    call._CALLS.clear()


FULL_PATH = ("binding.py:_bind", "annotate.py:annotate")  # what only the full path enters


def _full_path_taken(fn) -> list[str]:
    """The full path's functions `fn` entered."""
    return [e for e in _entries(fn, "runtime/binding.py", "runtime/annotate.py") if e in FULL_PATH]


def _inputs(seed):
    r = np.random.default_rng(seed)
    return r.random(8), r.random(8), r.uniform(-1, 1, 8), r.uniform(-1, 1, 8)


CALLS = {
    "launch": lambda x, y, s, t: gk.launch(saxpy, 8, 1.5, x, y),
    "launch int a": lambda x, y, s, t: gk.launch(saxpy, 8, 2, x, y),
    "reverse": lambda x, y, s, t: gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, s), gk.Duplicated(y, t)),
    "reverse Const": lambda x, y, s, t: gk.autodiff(saxpy, gk.Const(np.float32(1.5)), x, gk.Duplicated(y, t)),
    "reverse no need": lambda x, y, s, t: gk.autodiff(saxpy, gk.Active(1.5), gk.Const(x),
                                                      gk.DuplicatedNoNeed(y, t)),
    "reverse vector": lambda x, y, s, t: gk.autodiff(saxpy, gk.Active(1.5), gk.BatchDuplicated(x, (s, 2 * s, 3 * s)),
                                                     gk.BatchDuplicated(y, (t, -t, 0.5 * t))),
    "forward": lambda x, y, s, t: gk.autodiff(saxpy, gk.Duplicated(1.5, 0.25), gk.Duplicated(x, s),
                                              gk.Duplicated(y, t), mode=gk.Forward),
    "forward vector": lambda x, y, s, t: gk.autodiff(saxpy, gk.BatchDuplicated(1.5, (0.25, 1.0, -2.0)),
                                                     gk.BatchDuplicated(x, (s, 2 * s, 3 * s)),
                                                     gk.BatchDuplicated(y, (t, -t, 0.5 * t)), mode=gk.Forward),
    "reverse split": lambda x, y, s, t: (lambda fr: fr[1](gk.Active(1.5), gk.Duplicated(x, s), gk.Duplicated(y, t),
                                                          fr[0](gk.Active(1.5), gk.Duplicated(x, s),
                                                                gk.Duplicated(y, t))))(
        gk.autodiff_thunk(saxpy, gk.Active, gk.Duplicated, gk.Duplicated)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_prepared_call_equals_the_full_path(cold, name):
    call = CALLS[name]
    runs = []
    for n in range(3):  # the full path, the full path building the split's entry's call, the prepared call alone
        arrays = _inputs(7)
        got: list = []
        taken = _full_path_taken(lambda got=got, arrays=arrays: got.append(call(*arrays)))
        if n == 2:
            assert not taken, taken
        runs.append((got[0], arrays))
    (want, want_arrays), *prepared = runs
    for got, arrays in prepared:
        assert got == want
        for a, b in zip(arrays, want_arrays, strict=True):
            np.testing.assert_array_equal(a, b)


def test_prepared_calls_are_kept_per_signature(cold):
    x, y, s, t = _inputs(0)
    gk.launch(saxpy, 8, 1.5, x, y)
    prepared = call.cached(saxpy, "launch", 8, None, (1.5, x, y))
    assert prepared is not None and prepared.spec in saxpy._specs.values()
    args = (gk.Active(1.5), gk.Duplicated(x, s), gk.Duplicated(y, t))
    gk.autodiff(saxpy, *args)
    assert call.cached(saxpy, "reverse", None, None, args) is not None
    fargs = (gk.Duplicated(1.5, 1.0), gk.Duplicated(x, s), gk.Duplicated(y, t))
    gk.autodiff(saxpy, *fargs, mode=gk.Forward)
    assert call.cached(saxpy, "forward", None, None, fargs) is not None


def test_emptying_the_specialisation_cache_drops_the_prepared_calls(cold):
    x, y, s, t = _inputs(1)
    args = (gk.Active(1.5), gk.Duplicated(x, s), gk.Duplicated(y, t))
    gk.launch(saxpy, 8, 1.5, x, y)
    gk.autodiff(saxpy, *args)
    launch_call = call.cached(saxpy, "launch", 8, None, (1.5, x, y))
    reverse_call = call.cached(saxpy, "reverse", None, None, args)
    saxpy._specs.clear()
    gk.launch(saxpy, 8, 1.5, x, y)
    gk.autodiff(saxpy, *args)
    new_launch = call.cached(saxpy, "launch", 8, None, (1.5, x, y))
    new_reverse = call.cached(saxpy, "reverse", None, None, args)
    assert new_launch is not launch_call and new_launch.spec is not launch_call.spec
    assert new_launch.spec in saxpy._specs.values()
    assert new_reverse is not reverse_call and new_reverse.spec is not reverse_call.spec


def _readonly(a):
    a.flags.writeable = False
    return a


# after a prepared launch of saxpy(8, 1.5, x, y): another launch's (dim, a, x, y), its error and message
LAUNCH_REFUSED = {
    "read-only y": (lambda r, x, y: (8, 1.5, x, _readonly(y.copy())), LaunchError, "read-only"),
    "int8 y": (lambda r, x, y: (8, 1.5, x, np.zeros(8, np.int8)), LaunchError, "dtype int8"),
    # a 4-D array is a valid argument since arrays have 1-5 dimensions (docs/language.md): refused by type
    "4-D x": (lambda r, x, y: (8, 1.5, r.random((2, 2, 2, 1)), y), KernelTypeError, "has 4 dimensions"),
    "short x": (lambda r, x, y: (8, 1.5, r.random(7), y), LaunchError, "outside 'x'"),
    "wider dim": (lambda r, x, y: (9, 1.5, x, y), LaunchError, "outside"),
    "dim tuple": (lambda r, x, y: ((2, 4), 1.5, x, y), LaunchError, "unpacks|outside|dim"),
    "string a": (lambda r, x, y: (8, "1.5", x, y), LaunchError, "must be a number"),
    "int beyond int64": (lambda r, x, y: (8, 2**64, x, y), LaunchError, "int64"),
    "x overlaps y": (lambda r, x, y: (8, 1.5, *(lambda z: (z[:-1], z[1:]))(r.random(9))), AliasingError,
                     "overlap"),
}


@pytest.mark.parametrize("case", list(LAUNCH_REFUSED))
def test_a_changed_launch_is_checked_again(cold, rng, case):
    x, y = rng.random(8), rng.random(8)
    for _ in range(3):  # the call is prepared, then used
        gk.launch(saxpy, 8, 1.5, x, y)
    make, error, match = LAUNCH_REFUSED[case]
    dim, a, x2, y2 = make(rng, x, y)
    before = [b.copy() for b in (x, y, x2, y2)]
    with pytest.raises(error, match=match):
        gk.launch(saxpy, dim, a, x2, y2)
    for b, was in zip((x, y, x2, y2), before, strict=True):
        np.testing.assert_array_equal(b, was)


def test_the_backend_is_in_the_key(cold, rng):
    x, y = rng.random(8), rng.random(8)
    for _ in range(3):
        gk.launch(saxpy, 8, 1.5, x, y)
    with pytest.raises(LaunchError, match="backend must be one of"):
        gk.launch(saxpy, 8, 1.5, x, y, backend="tpu")


# after a prepared autodiff of saxpy(Active(1.5), Duplicated(x, dx), Duplicated(y, dy)): another call's
# (a, x's shadow, y's shadow), its error and message
REVERSE_REFUSED = {
    "inf": (lambda r, x, y, dx, dy: (np.inf, dx, dy), AnnotationError, "non-finite"),
    "nan": (lambda r, x, y, dx, dy: (float("nan"), dx, dy), AnnotationError, "non-finite"),
    "float32 inf": (lambda r, x, y, dx, dy: (np.float32(np.inf), dx, dy), AnnotationError, "non-finite"),
    "integer Active": (lambda r, x, y, dx, dy: (2, dx, dy), AnnotationError, "integer"),
    "read-only shadow": (lambda r, x, y, dx, dy: (1.5, _readonly(dx.copy()), dy), AnnotationError, "read-only"),
    "longer shadow": (lambda r, x, y, dx, dy: (1.5, r.random(9), dy), AnnotationError, "like its primal"),
    "one shadow for two": (lambda r, x, y, dx, dy: (1.5, dy, dy), AliasingError, "shares memory"),
    "shadow is a primal": (lambda r, x, y, dx, dy: (1.5, y, dy), AliasingError, "shares memory"),
}


@pytest.mark.parametrize("case", list(REVERSE_REFUSED))
def test_a_changed_gradient_is_checked_again(cold, rng, case):
    x, y, dx, dy = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    for _ in range(3):
        gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    make, error, match = REVERSE_REFUSED[case]
    a, sx, sy = make(rng, x, y, dx, dy)
    arrays = (x, y, dx, dy, sx, sy)
    before = [b.copy() for b in arrays]
    with pytest.raises(error, match=match):
        gk.autodiff(saxpy, gk.Active(a), gk.Duplicated(x, sx), gk.Duplicated(y, sy))
    for b, was in zip(arrays, before, strict=True):
        np.testing.assert_array_equal(b, was)


def test_a_changed_forward_call_is_checked_again(cold, rng):
    x, y, tx, ty = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    for _ in range(3):
        gk.autodiff(saxpy, gk.Duplicated(1.5, 1.0), gk.Duplicated(x, tx), gk.Duplicated(y, ty), mode=gk.Forward)
    before = [b.copy() for b in (x, y, tx, ty)]
    with pytest.raises(AliasingError, match="shares memory"):
        gk.autodiff(saxpy, gk.Duplicated(1.5, 1.0), gk.Duplicated(x, ty), gk.Duplicated(y, ty), mode=gk.Forward)
    with pytest.raises(AnnotationError, match="like its primal"):
        gk.autodiff(saxpy, gk.Duplicated(1.5, 1.0), gk.Duplicated(x, tx[:4]), gk.Duplicated(y, ty), mode=gk.Forward)
    for b, was in zip((x, y, tx, ty), before, strict=True):
        np.testing.assert_array_equal(b, was)


@pytest.mark.parametrize("mode", ["launch", "reverse", "forward"])
def test_integer_scalars_the_bounds_depend_on_are_checked_at_each_value(cold, mode):
    """shifted reads x[i + k]: each k is proved in bounds (or refused) once, its outcome kept per value."""
    x, y = np.arange(10.0), np.zeros(8)

    def call(k, y):
        if mode == "launch":
            gk.launch(shifted, 8, x, y, k)
        elif mode == "reverse":
            gk.autodiff(shifted, gk.Duplicated(x, np.zeros(10)), gk.Duplicated(y, np.ones(8)), k, dim=8)
        else:
            gk.autodiff(shifted, gk.Duplicated(x, np.ones(10)), gk.Duplicated(y, np.zeros(8)), k, dim=8,
                        mode=gk.Forward)

    for k in (0, 1, 2, 1, 0, 2):
        call(k, y)
        if mode == "launch":
            np.testing.assert_array_equal(y, 2.0 * x[k:k + 8])
    for k in (3, -1, 2**40):
        before = y.copy()
        with pytest.raises(LaunchError, match="outside 'x'"):
            call(k, y)
        np.testing.assert_array_equal(y, before)
    call(2, y)  # a value that passed still runs


def test_a_data_dependent_race_check_runs_at_every_call(cold):
    x, y = np.arange(8.0), np.zeros(8)
    perm = np.array([3, 1, 0, 2, 7, 6, 5, 4])
    for _ in range(3):
        gk.launch(scatter, 8, x, perm, y)
        gk.autodiff(scatter, gk.Duplicated(x, np.zeros(8)), perm, gk.Duplicated(y, np.ones(8)))
    np.testing.assert_array_equal(y[perm], 3.0 * x)
    twice = perm.copy()
    twice[5] = 3  # threads 0 and 5 write y[3]
    before = y.copy()
    with pytest.raises(RaceError):
        gk.launch(scatter, 8, x, twice, y)
    with pytest.raises(RaceError):
        gk.autodiff(scatter, gk.Duplicated(x, np.zeros(8)), twice, gk.Duplicated(y, np.ones(8)))
    np.testing.assert_array_equal(y, before)


def test_segments_are_checked_at_every_gradient(cold, rng):
    indptr, indices = np.array([0, 3, 3, 7, 9]), np.array([2, 0, 2, 1, 3, 0, 3, 2, 2])
    data, x, y = rng.uniform(0.5, 1.5, 9), rng.uniform(0.5, 1.5, 4), np.zeros(4)
    ddata, dx, dy = np.zeros(9), np.zeros(4), rng.uniform(0.5, 1.5, 4)
    args = (gk.Duplicated(data, ddata), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    for _ in range(3):
        gk.autodiff(csr_rows, gk.Const(indptr), gk.Const(indices), *args, dim=4)
    bad = np.array([0, 3, 2, 7, 9])
    before = [a.copy() for a in (data, x, y, ddata, dx, dy)]
    with pytest.raises(LaunchError, match=r"'indptr' decreases at this launch"):
        gk.autodiff(csr_rows, gk.Const(bad), gk.Const(indices), *args, dim=4)
    for a, b in zip((data, x, y, ddata, dx, dy), before, strict=True):
        np.testing.assert_array_equal(a, b)


def test_prepared_calls_keep_no_arrays_alive(frozen_heap, cold, rng):
    x, y, dx, dy = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    for _ in range(2):
        gk.launch(saxpy, 8, 1.5, x, y)
        gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
        gk.autodiff(saxpy, gk.Duplicated(1.5, 1.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy), mode=gk.Forward)
    refs = [weakref.ref(a) for a in (x, y, dx, dy)]
    del x, y, dx, dy
    gc.collect()
    assert all(r() is None for r in refs)


def _ping_pong(u, v, c, steps):
    n = u.shape[0]
    for _ in range(steps):
        gk.launch(saxpy, n, c, u, v)
        gk.launch(saxpy, n, c, v, u)


def test_a_programs_reverse_sweep_validates_nothing(cold, rng):
    """The launches are validated while the program records them; the sweep runs what was prepared."""
    u, v = rng.random(8), rng.random(8)
    u0, v0 = u.copy(), v.copy()
    args = (gk.Duplicated(u, np.ones(8)), gk.Duplicated(v, np.ones(8)), gk.Active(0.5), 3)
    fwd, rev = gk.autodiff_thunk(_ping_pong, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
    tape = fwd(*args)
    got: list = []
    entered = _entries(lambda: got.append(rev(*args, tape)), "runtime/call.py", "runtime/binding.py",
                       "runtime/annotate.py")
    assert not {"call.py:signature", *FULL_PATH} & set(entered), entered
    fused_args = (gk.Duplicated(u0, np.ones(8)), gk.Duplicated(v0, np.ones(8)), gk.Active(0.5), 3)
    want = gk.autodiff(_ping_pong, *fused_args)
    assert got[0][2] == want[2]
    np.testing.assert_array_equal(args[0].dval, fused_args[0].dval)
    np.testing.assert_array_equal(args[1].dval, fused_args[1].dval)


def test_records_made_without_init_have_every_field(cold, rng):
    """call.made builds Binding and Tape records without their __init__: every field is set."""
    import dataclasses

    from gradkern.runtime import reverse

    x, y, dx, dy = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    args = (gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    call.prepare(saxpy, args, None, None, "reverse")
    _, prepared = call.prepare(saxpy, args, None, None, "reverse")  # refilled
    tape = reverse.run_augmented_primal(prepared)
    for record in (prepared.b, tape):
        assert set(vars(record)) == {f.name for f in dataclasses.fields(record)}
    full = annotate.annotated_binding(saxpy, args, None, None, False)
    assert (prepared.b.dim, prepared.b.types, prepared.b.backend, prepared.b.names, prepared.b.aliases,
            prepared.b.strided) == (full[1].dim, full[1].types, full[1].backend, full[1].names, full[1].aliases,
                                    full[1].strided)
    assert all(a is b for a, b in zip(prepared.b.values[1:], full[1].values[1:], strict=True))


def test_overlap_is_decided_per_allocation(cold, rng):
    """binding.disjoint: arrays of two allocations never overlap; views of one (or a view and its base)
    are asked of np.may_share_memory, so a launch of overlapping views is still refused after a hit."""
    whole = rng.random(24)
    x, y, z = whole[:8], whole[8:16], whole[4:12]
    own = [binding.memory_owner(a, a.flags.num) for a in (whole, x, y, z)]
    assert own == [whole, whole, whole, whole]
    assert binding.disjoint([x, y], own[1:3])
    assert not binding.disjoint([x, z], [whole, whole]) and not binding.disjoint([whole, y], own[:1] + own[2:3])
    a, b = rng.random(8), rng.random(8)
    assert binding.disjoint([a, b], [a, b]) and not binding.disjoint([a, a], [a, a])
    for _ in range(3):
        gk.launch(saxpy, 8, 1.5, x, y)
    before = whole.copy()
    with pytest.raises(AliasingError, match="overlap"):
        gk.launch(saxpy, 8, 1.5, x, z)
    np.testing.assert_array_equal(whole, before)
    assert call.signature(saxpy, "launch", 8, None, (1.5, x, z)) is None
    assert call.signature(saxpy, "launch", 8, None, (1.5, x, y)) is not None
