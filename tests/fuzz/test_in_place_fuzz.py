"""Restores read in place fuzzer (program/snapshots.py `Deferred`, docs/checkpointed-loops.md#a-restore-read-in-place):
random checkpointed loops whose steps make one to four launches over ping-pong buffers (mostly a stencil or a blend
first, reading the state and overwriting the other buffer whole; then any of: more of them, a launch writing the
state whole back from the other buffer, read-modify-writes of either buffer, a half-domain launch, launches on a
view of the state or on a plain ndarray view of it, host reads of the state before and between the launches, fills),
with random step counts and snapshots, blocked passes or not (`blocked.MIN_BYTES`). The brute-force oracle is the
same program with every restore written back at once (`checkpoint.IN_PLACE` False): the shadows, the Active scalar's
derivative and the final primals must agree to the bit. A quarter of the programs must read a snapshot in place
(else the batch tests little). Dropping the settle before a launch that writes a deferred buffer without overwriting
it whole, before host code reads one, or of a buffer live after the advance, fails the first batch.

GRADKERN_FUZZ_IN_PLACE sets the number of programs (CI default 40), GRADKERN_FUZZ_SEED the seed.
"""

from __future__ import annotations

import os

import numpy as np
from program.test_checkpoint import checkpointed
from program.test_programs import energy
from program.test_recompute import _gradient, _same
from program.test_reused_outputs import count_at_close

import gradkern as gk
from fuzz.test_reuse_fuzz import N, _args, blend, run_op, scaled
from gradkern.program import checkpoint
from gradkern.runtime import blocked

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_IN_PLACE", "40"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
FIRST = ("stencil", "blend")
OPS = ("stencil", "blend", "back", "rmw_out", "rmw_state", "half", "view", "plain", "read", "fill")


def _program(ops: list[str], loop, sink: list):
    def run(u, v, w, h, E, c, k):
        def step(t):
            a, b = (u, v) if t % 2 == 0 else (v, u)
            for op in ops:
                if op == "back":  # the state overwritten whole from the other buffer: a deferred buffer dropped
                    gk.launch(scaled, N, b, a)
                elif op == "view":  # a view of part of the state: not read in place
                    gk.launch(scaled, N // 2, a[N // 2:], b[:N // 2])
                elif op == "plain":  # a plain ndarray view: its host reads are not seen, so not read in place
                    gk.launch(blend, N, a.view(np.ndarray), w, b, 0.4)
                elif op == "read":  # host code reads the state: it sees what the restore wrote
                    sink.append(float(a[3]) + float(np.sum(a)))
                else:  # the reuse fuzzer's: stencil, blend, read-modify-writes, half, fill
                    run_op(op, t, a, b, w, h, c)
        loop(step, k)
        gk.launch(energy, N, u, E)
    return run


def test_restores_read_in_place_give_the_floats_of_restores_written_back(monkeypatch):
    counts = count_at_close(monkeypatch, lambda loop: loop.stats.read_in_place)  # launches reading in place
    monkeypatch.setattr(blocked, "TILE", 7)
    rng = np.random.default_rng(SEED)
    with_in_place = 0
    for case in range(N_PROGRAMS):
        extra = 0 if rng.random() < 0.3 else int(rng.integers(1, 4))
        first = FIRST if rng.random() < 0.7 else OPS  # sometimes a launch that leaves the restored state live
        ops = [str(rng.choice(first))] + [str(o) for o in rng.choice(OPS, size=extra)]
        if rng.random() < 0.2:
            ops.insert(0, "read")  # host code reads the restored state before any launch
        nsteps, snapshots = int(rng.integers(6, 25)), int(rng.integers(2, 7))
        seed = int(rng.integers(1 << 30))
        monkeypatch.setattr(blocked, "MIN_BYTES", 0 if rng.random() < 0.5 else 1 << 30)
        seen_got, seen_want = [], []
        got = _gradient(_program(ops, checkpointed(snapshots), seen_got), _args(np.random.default_rng(seed), nsteps))
        count = counts[-1]
        with monkeypatch.context() as m:
            m.setattr(checkpoint, "IN_PLACE", False)
            want = _gradient(_program(ops, checkpointed(snapshots), seen_want),
                             _args(np.random.default_rng(seed), nsteps))
        assert counts[-1] == 0, (case, ops)
        _same(want, got)
        assert seen_got == seen_want, (case, ops)  # host code read the same values
        with_in_place += count > 0
    assert with_in_place >= max(1, N_PROGRAMS // 4), f"only {with_in_place} of {N_PROGRAMS} programs read in place"
