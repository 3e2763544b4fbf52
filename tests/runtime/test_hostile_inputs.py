"""Hostile input that test_bad_input.py's tables do not reach (docs/errors.md): a split reverse given another
call's tape, a hand-made tape, keywords where a verb takes none, activities that are no annotation. Each is refused
with a `gk.GradkernError` subclass naming the argument, every buffer bitwise as it was."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import gradkern as gk

N = 8


@gk.kernel
def square_in_place(y):
    i = gk.tid()
    y[i] = y[i] * y[i]  # the reverse needs the old y[i]: taped


@gk.kernel
def scaled_square(a, y):
    i = gk.tid()
    y[i] = a * y[i] * y[i]


@gk.kernel
def saxpy(alpha, x, y):
    i = gk.tid()
    y[i] = alpha * x[i] + y[i]


def rand(rng, n=N):
    return rng.uniform(0.5, 2.0, n)


def unchanged(*arrays):
    before = [(a, a.tobytes()) for a in arrays]
    return lambda: all(a.tobytes() == raw for a, raw in before)


def test_a_split_reverse_refuses_another_calls_tape(rng):
    """The tape of forward(y2) reversed with y3 (the same signature) gave y3 a gradient made of y2's taped
    values, without a word; it is refused, naming the argument."""
    forward, reverse = gk.autodiff_thunk(square_in_place, gk.Duplicated)
    y2, y3 = rand(rng), rand(rng)
    tape2 = forward(gk.Duplicated(y2, np.zeros(N)))
    forward(gk.Duplicated(y3, np.zeros(N)))
    dy3 = np.ones(N)
    same = unchanged(y2, y3, dy3)
    with pytest.raises(gk.AnnotationError, match="argument 'y' is not the one this tape's forward was given"):
        reverse(gk.Duplicated(y3, dy3), tape2)
    assert same()


def test_a_split_reverse_refuses_other_scalars_and_hand_made_tapes(rng):
    forward, reverse = gk.autodiff_thunk(scaled_square, gk.Const, gk.Duplicated)
    y, dy = rand(rng), np.ones(N)
    tape = forward(gk.Const(2.0), gk.Duplicated(y, np.zeros(N)))
    same = unchanged(y, dy)
    with pytest.raises(gk.AnnotationError, match="argument 'a' is not the one"):
        reverse(gk.Const(3.0), gk.Duplicated(y, dy), tape)
    fake = gk.Tape(tape.kernel, tape.key, tape.dim, np.zeros((3, 1)), tape.ints, tape.counts)  # too short a tape
    with pytest.raises(gk.AnnotationError, match="was not made by autodiff_thunk's forward"):
        reverse(gk.Const(2.0), gk.Duplicated(y, dy), fake)
    assert same()


def test_a_tape_takes_views_of_its_memory_is_reused_alike_and_keeps_nothing_alive(frozen_heap, rng):
    forward, reverse = gk.autodiff_thunk(square_in_place, gk.Duplicated)
    y = rand(rng)
    old = y.copy()
    tape = forward(gk.Duplicated(y, np.zeros(N)))
    first, again = np.ones(N), np.ones(N)
    reverse(gk.Duplicated(y[:], first), tape)  # a fresh view of the same memory
    reverse(gk.Duplicated(y, again), tape)  # a tape is not consumed
    np.testing.assert_array_equal(first, 2 * old)
    np.testing.assert_array_equal(again, first)
    z = rand(rng)
    held = weakref.ref(z)
    kept = forward(gk.Duplicated(z, np.zeros(N)))
    del z
    gc.collect()
    assert held() is None and kept.made_from is not None  # the tape holds its primal weakly
    with pytest.raises(gk.AnnotationError, match="argument 'y' is not the one"):  # whatever now lies at its address
        reverse(gk.Duplicated(rand(rng), np.ones(N)), kept)


def test_untaped_calls_share_a_tape_any_call_may_reverse(rng):
    """A signature that tapes nothing leaves one shared tape: a reverse reads only the post-forward arrays."""
    forward, reverse = gk.autodiff_thunk(saxpy, gk.Active, gk.Duplicated, gk.Duplicated)
    x, y = rand(rng), rand(rng)
    forward(gk.Active(2.0), gk.Duplicated(x, np.zeros(N)), gk.Duplicated(y, np.ones(N)))
    x2, y2, dx2 = rand(rng), rand(rng), np.zeros(N)
    tape = forward(gk.Active(2.0), gk.Duplicated(x2, dx2), gk.Duplicated(y2, np.ones(N)))
    g = reverse(gk.Active(2.0), gk.Duplicated(x, np.zeros(N)), gk.Duplicated(y, np.ones(N)), tape)
    assert g[0] == pytest.approx(x.sum(), rel=1e-14)


@pytest.mark.parametrize("verb", ["launch", "autodiff", "autodiff_thunk", "inspect"])
def test_keywords_a_verb_does_not_take_are_refused(verb, rng):
    """Kernel arguments by keyword (and unknown keywords) raised Python's TypeError from the verb's signature."""
    x, y = rand(rng), rand(rng)
    same = unchanged(x, y)
    call = {"launch": lambda **k: gk.launch(saxpy, N, 2.0, **k),
            "autodiff": lambda **k: gk.autodiff(saxpy, gk.Active(2.0), **k),
            "autodiff_thunk": lambda **k: gk.autodiff_thunk(saxpy, gk.Active, **k),
            "inspect": lambda **k: gk.inspect(saxpy, 2.0, **k)}[verb]
    with pytest.raises(gk.LaunchError, match=f"gk.{verb} got 'x' as a keyword; a kernel's arguments are passed by "
                                             "position") as info:
        call(x=x, y=y)
    assert "alpha, x, y" in info.value.hint
    with pytest.raises(gk.LaunchError, match=f"gk.{verb} takes no keyword 'stream'; its keywords are"):
        call(stream=0)
    assert same()


@pytest.mark.parametrize("activity", [1, int, "Duplicated", None])
def test_autodiff_thunk_refuses_activities_that_are_no_annotation(activity):
    with pytest.raises(gk.AnnotationError, match="the activity of 'alpha' must be an annotation class"):
        gk.autodiff_thunk(saxpy, activity, gk.Duplicated, gk.Duplicated)
