"""Reused outputs fuzzer (program/outputs.py, docs/checkpointed-loops.md#a-taped-step-after-a-restore): random
checkpointed loops whose steps make one to four launches over ping-pong buffers (mostly a write-only output
first; then write-only outputs over the whole buffer or half of it, read-modify-writes of the output or of the
state, fills, a launch made only at some t, host writes into a plain array), with random step counts and
snapshots. The brute-force oracle is the same program with every reuse refused (each taped launch run again,
`CheckpointedLoop._reusable` False): the shadows, the Active scalar's derivative and the final primals must
agree to the bit. The batch must reuse launches in a quarter of its programs (else it tests little). Dropping
the check that the launch's last write is this launch's (or the restored state's, for the launch that last
wrote it) fails the first batch.

GRADKERN_FUZZ_REUSE sets the number of programs (CI default 40), GRADKERN_FUZZ_SEED the seed.
"""

from __future__ import annotations

import os

import numpy as np
from program.test_checkpoint import checkpointed
from program.test_programs import energy
from program.test_recompute import _gradient, _same
from program.test_reused_outputs import count_reused

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.program.checkpoint import CheckpointedLoop

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_REUSE", "40"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
N = 12
OPS = ("stencil", "blend", "blend_some_t", "rmw_out", "rmw_state", "half", "fill", "host")


@gk.kernel
def blend(a, w, out, s):
    i = gk.tid()
    out[i] = a[i] * s + gk.sin(w[i]) * a[i]


@gk.kernel
def rmw(y, s):
    i = gk.tid()
    y[i] = gk.sin(y[i]) * y[i] + s * y[i]


@gk.kernel
def scaled(a, out):
    i = gk.tid()
    out[i] = 1.5 * a[i] + a[i] * a[i]


def run_op(op: str, t: int, a, b, w, h, c) -> None:
    """One of OPS in step t, from the state `a` into the other buffer `b` (the in-place fuzzer's too)."""
    if op == "stencil":
        gk.launch(allen_cahn_step, N, a, b, c, 0.01)
    elif op == "blend":
        gk.launch(blend, N, a, w, b, 0.5 + 0.01 * (t % 5))
    elif op == "blend_some_t" and t % 3 == 0:
        gk.launch(blend, N, a, w, b, 0.7)
    elif op == "rmw_out":
        gk.launch(rmw, N, b, 0.3)
    elif op == "rmw_state":
        gk.launch(rmw, N, a, 0.2)
    elif op == "half":
        gk.launch(scaled, N // 2, a, b)
    elif op == "fill":
        gk.fill(b, 0.25)
    elif op == "host":
        h[1] = float(t)  # a host write into a plain array: every buffer forgotten


def _program(ops: list[str], loop):
    def run(u, v, w, h, E, c, k):
        def step(t):
            a, b = (u, v) if t % 2 == 0 else (v, u)
            for op in ops:
                run_op(op, t, a, b, w, h, c)
        loop(step, k)
        gk.launch(energy, N, u, E)
    return run


def _args(rng: np.random.Generator, nsteps: int) -> list:
    return [gk.Duplicated(rng.uniform(-0.5, 0.5, N), rng.uniform(-1, 1, N)),
            gk.Duplicated(rng.uniform(-0.5, 0.5, N), rng.uniform(-1, 1, N)),
            gk.Duplicated(rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)), gk.Const(np.zeros(N)),
            gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(float(rng.uniform(0.1, 0.5))), nsteps]


def test_reused_outputs_give_the_floats_of_every_launch_rerun(monkeypatch):
    reused = count_reused(monkeypatch)
    rng = np.random.default_rng(SEED)
    with_reuse = 0
    for case in range(N_PROGRAMS):
        # a write-only launch first (what can be reused), then up to three of any kind
        # (alone in half the programs: most launches after it overwrite its output, and nothing is reused)
        extra = 0 if rng.random() < 0.5 else int(rng.integers(1, 4))
        first = OPS[:2] if rng.random() < 0.75 else OPS  # sometimes a read-modify-write or a half write first
        ops = [str(rng.choice(first))] + [str(o) for o in rng.choice(OPS, size=extra)]
        nsteps, snapshots = int(rng.integers(6, 25)), int(rng.integers(2, 7))
        seed = int(rng.integers(1 << 30))
        got = _gradient(_program(ops, checkpointed(snapshots)), _args(np.random.default_rng(seed), nsteps))
        count = reused[-1]
        with monkeypatch.context() as m:
            m.setattr(CheckpointedLoop, "_reusable", lambda self: False)
            want = _gradient(_program(ops, checkpointed(snapshots)), _args(np.random.default_rng(seed), nsteps))
        assert reused[-1] == 0, (case, ops)
        _same(want, got)
        with_reuse += count > 0
    assert with_reuse >= max(1, N_PROGRAMS // 4), f"only {with_reuse} of {N_PROGRAMS} programs reused a launch"
