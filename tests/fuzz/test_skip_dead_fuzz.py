"""Snapshots that leave out dead buffers, fuzzed against a keep-everything twin (program/snapshots.py `skipped`,
program/checkpoint.py `_may_skip`; docs/checkpointed-loops.md): a restart point may leave out a state buffer the
steps after it overwrite whole before reading it. Random checkpointed loops over ping-pong buffers (the reuse and
in-place fuzzers' operations: stencils, blends, read-modify-writes, half writes, fills, host writes into a plain
array) plus what makes a whole overwrite not dead: host code reading the buffer first (its value flowing into the
overwriting launch's scalar, or only into a list the program keeps), a launch reading part of it through a view
first, a half write first, and whole overwrites by two half launches; with random step counts and snapshots.

The brute-force oracle is the same program with every snapshot keeping every buffer (`_may_skip` False): the
shadows, the Active scalar's derivative, the final primals and every value host code read must agree to the bit.
A quarter of the programs must leave some buffer out (else the batch tests little).

GRADKERN_FUZZ_SKIP_DEAD sets the number of programs (CI default 12), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_SKIP_DEAD=600 pytest -s -n0 tests/fuzz/test_skip_dead_fuzz.py
"""

from __future__ import annotations

import os

import numpy as np
from program.test_checkpoint import checkpointed
from program.test_programs import energy
from program.test_recompute import _gradient, _same

import gradkern as gk
from fuzz.test_reuse_fuzz import N, _args, blend, run_op, scaled
from gradkern.program.checkpoint import CheckpointedLoop

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_SKIP_DEAD", "12"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
FIRST = ("blend", "stencil", "fill", "host_then_blend", "peek_then_blend", "view_then_fill", "halves")
OPS = ("stencil", "blend", "rmw_out", "rmw_state", "half", "fill", "host", "host_then_blend", "peek_then_blend",
       "view_then_fill", "halves", "half_then_fill")


def _program(ops: list[str], loop, sink: list):
    def run(u, v, w, h, E, c, k):
        def step(t):
            a, b = (u, v) if t % 2 == 0 else (v, u)
            for op in ops:
                if op == "host_then_blend":  # host code reads b, and its value steers the launch overwriting b
                    s = float(np.sum(b))
                    sink.append(s)
                    gk.launch(blend, N, a, w, b, 0.5 + 1e-3 * s)
                elif op == "peek_then_blend":  # host code reads b into a list only, then b is overwritten whole
                    sink.append(float(b[3]))
                    gk.launch(blend, N, a, w, b, 0.6)
                elif op == "view_then_fill":  # a launch reads half of b through a view, then b is overwritten
                    gk.launch(blend, N // 2, b[N // 2:], w[:N // 2], a[:N // 2], 0.3)
                    gk.fill(b, 0.25)
                elif op == "halves":  # b overwritten whole by two launches, each on half of it
                    gk.launch(scaled, N // 2, a[:N // 2], b[:N // 2])
                    gk.launch(scaled, N // 2, a[N // 2:], b[N // 2:])
                elif op == "half_then_fill":  # half of b written (reading a), then b overwritten whole
                    gk.launch(scaled, N // 2, a, b)
                    gk.fill(b, 0.5)
                else:
                    run_op(op, t, a, b, w, h, c)
        loop(step, k)
        gk.launch(energy, N, u, E)
    return run


def test_snapshots_leaving_dead_buffers_out_give_the_floats_of_snapshots_keeping_all(monkeypatch):
    may_skip = CheckpointedLoop._may_skip
    skipped: list[int] = []

    def counted(self, snap, key):
        ok = may_skip(self, snap, key)
        skipped[-1] += ok
        return ok

    monkeypatch.setattr(CheckpointedLoop, "_may_skip", counted)
    rng = np.random.default_rng(SEED)
    with_skips = 0
    for case in range(N_PROGRAMS):
        extra = int(rng.integers(0, 4))
        ops = [str(rng.choice(FIRST))] + [str(o) for o in rng.choice(OPS, size=extra)]
        nsteps, snapshots = int(rng.integers(5, 20)), int(rng.integers(2, 6))
        seed = int(rng.integers(1 << 30))
        seen_got, seen_want = [], []
        skipped.append(0)
        got = _gradient(_program(ops, checkpointed(snapshots), seen_got), _args(np.random.default_rng(seed), nsteps))
        count = skipped[-1]
        with monkeypatch.context() as m:
            m.setattr(CheckpointedLoop, "_may_skip", lambda self, snap, key: False)
            want = _gradient(_program(ops, checkpointed(snapshots), seen_want),
                             _args(np.random.default_rng(seed), nsteps))
        _same(want, got)
        # host code read the same values (NaN where a program's values blew up: equal as NaN)
        np.testing.assert_array_equal(seen_got, seen_want, err_msg=f"{case} {ops}")
        with_skips += count > 0
    assert with_skips >= max(1, N_PROGRAMS // 4), f"only {with_skips} of {N_PROGRAMS} programs left a buffer out"


def test_host_code_reading_a_buffer_before_a_launch_overwrites_it_whole_keeps_it():
    # found by this fuzzer (session 52): each step's host code sums v, then a launch overwrites v whole with a
    # scalar taken from that sum; the snapshots left v out (dead to the launches), the recomputed steps' host code
    # read stale contents and the gradient was wrong (by 5e-3 here); the plain loop is the reference
    def plain_loop(step, k):
        for t in range(k):
            step(t)

    got, plain = (_gradient(_program(["host_then_blend"], loop, []), _args(np.random.default_rng(1), 6))
                  for loop in (checkpointed(2), plain_loop))
    # the same launches on the same values as the plain loop, so equal but for the order of the reverse's float64
    # sums (a few ulps of O(1) values); 1e-12 relative leaves room for nothing more
    for x, y in zip(got[:2], plain[:2]):
        for a, b in zip(x, y):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
