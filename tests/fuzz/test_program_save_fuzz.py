"""The program layer's save analysis fuzzed against a store-everything oracle (program/record.py, program/versions.py,
docs/programs.md "What is recorded and saved"; docs/testing.md "The program save fuzzer and the cross-mode
fuzzer").

tests/support/progfuzz.py draws random host programs of 2-6 launches (besides copies, fills, slot swaps, temporaries
and host reads) on views of three buffers (whole, halves, even/odd elements, reversed, 2-D reshaped or transposed)
that alias exactly or are disjoint, some launched over half their extent: in-place and read-modify-write updates,
loop-carried overwrites, scatters through a run-time permutation, write-only outputs; Duplicated, DuplicatedNoNeed
and Const arguments, a buffer passed twice, an Active scalar flowing into launches directly and through host
arithmetic, and sometimes a stretch of them as a `gk.checkpointed_loop` (random snapshots or `memory=` budget). The
oracle differentiates the same operations without the program layer: every buffer copied before every operation,
then each launch's own `gk.autodiff` on the restored state, backwards (and forward mode launch by launch).
Per program:

1. the primals after `gk.autodiff(fn, ...)` equal a plain call's bit for bit;
2. reverse: every Duplicated shadow, E's shadow and the Active scalar's derivative equal the oracle's;
3. split mode (`gk.autodiff_thunk`: tape = forward(*args), reverse(*args, tape)) equals `gk.autodiff` to RTOL;
4. forward mode (`mode=gk.Forward`, the scalar `gk.Duplicated(c, dc)`) equals the oracle's forward chain, and the
   dot-product test <seed, J t> = <J^T seed, t> holds between the program's own forward and reverse;
5. vector mode: `gk.BatchDuplicated` with two lanes equals two Duplicated calls, lane by lane, in both modes.

Tolerance of 2 and 4 (RTOL): the program's reverse runs the same kernels' derivative expressions as the oracle's
per-launch autodiff, but from the kernel's split form (values from the tape or recomputed from intact memory,
exact) where the oracle fuses; the only differences are the orders of float64 sums of a shadow read by several
threads (E[0] in the loss, at most N = 8 terms of like size) and the Active scalar's per-thread sum: a few ulps
of the largest term, far below 1e-12 of the norm of the compared vector. Lanes (5) run the same expressions per lane
in the same order: equal bit for bit... except the scalar sums, hence the same RTOL.

GRADKERN_FUZZ_PROGRAM_SAVES sets the number of programs (CI default 30), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_PROGRAM_SAVES=3000 pytest -s -n0 tests/fuzz/test_program_save_fuzz.py
"""

from __future__ import annotations

import collections
import os
import warnings

import numpy as np
import pytest
from support import progfuzz
from support.progfuzz import N

import gradkern as gk
from gradkern.backends import set_default

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_PROGRAM_SAVES", "30"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
BACKEND = os.environ.get("GRADKERN_FUZZ_PROGRAM_SAVES_BACKEND", "interp")
RTOL = 1e-12  # module doc: reordered float64 sums of at most N terms


def _close(what: str, got, want, context: str):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 0.0)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= RTOL * scale, f"{what}: max error {err:.3e} (scale {scale:.3e})\n{context}\ngot {got}\nwant {want}"


def _inputs(rng):
    buffers = [rng.uniform(0.2, 1.2, N) for _ in range(3)]
    E = np.array([rng.uniform(-0.5, 0.5)])
    return buffers, E, float(rng.uniform(0.3, 0.9))


def _annotated(program, buffers, E, c, shadows, dE, scalar, batch=False):
    """The program's arguments: "alias" passes a0 (and its shadow) again; "noneed" is DuplicatedNoNeed."""
    args = []
    for k, (a, b, s) in enumerate(zip(program.annotations, buffers, shadows)):
        if a == "alias":
            b, s, a = buffers[0], shadows[0], program.annotations[0]
        if a == "const":
            args.append(gk.Const(b))
        elif batch:
            args.append(gk.BatchDuplicated(b, tuple(s)))
        else:
            args.append((gk.DuplicatedNoNeed if a == "noneed" else gk.Duplicated)(b, s))
    E = gk.BatchDuplicated(E, tuple(dE)) if batch else gk.Duplicated(E, dE)
    return args + [E, scalar if program.active_c else gk.Const(c)]


def _aliased(program, arrays: list) -> list:
    """`arrays` (one per argument buffer) with a1 replaced by a0 where the program is called with a0 twice."""
    arrays = list(arrays)
    if program.annotations[1] == "alias":
        arrays[1] = arrays[0]
    return arrays


def check_program(program, rng, stats):
    fn = progfuzz.make_function(program)
    buffers, E, c = _inputs(rng)
    buffers = _aliased(program, buffers)
    context = str(program)
    plain = progfuzz.copies(buffers) + [E.copy()]
    fn(*plain, c)
    dup = [k for k, a in enumerate(program.annotations) if a in ("dup", "noneed")]
    need = [k for k, a in enumerate(program.annotations) if a != "noneed"] + [3]  # primals compared after a call

    # reverse against the store-everything oracle
    seeds = _aliased(program, [np.zeros(N) if a == "const" else rng.standard_normal(N) for a in program.annotations])
    seedE = rng.standard_normal(1)
    want_d, want_dE, want_dc, want_final = progfuzz.oracle_reverse(program, buffers, E, c, seeds, seedE)
    for got, want in zip(want_final, plain):
        assert np.array_equal(got, want), f"the oracle's primals differ from a plain call\n{context}"
    work = progfuzz.copies(buffers) + [E.copy()]
    shadows = progfuzz.copies(seeds) + [seedE.copy()]
    grads = gk.autodiff(fn, *_annotated(program, work[:3], work[3], c, shadows, shadows[3], gk.Active(c)))
    for k in need:
        assert np.array_equal(work[k], plain[k]), f"primal {k} after gk.autodiff differs from a plain call\n{context}"
    for k in dup:
        _close(f"reverse shadow of a{k}", shadows[k], want_d[k], context)
    _close("reverse shadow of E", shadows[3], want_dE, context)
    if program.active_c:
        _close("reverse d/dc", grads[4], want_dc, context)

    # split mode against fused
    split = progfuzz.copies(buffers) + [E.copy()]
    sshadows = progfuzz.copies(seeds) + [seedE.copy()]
    activities = [type(x) for x in _annotated(program, buffers, E, c, seeds, seedE, gk.Active(c))[:3]]
    forward, reverse = gk.autodiff_thunk(fn, *activities, gk.Duplicated, gk.Active if program.active_c else gk.Const)
    sargs = _annotated(program, split[:3], split[3], c, sshadows, sshadows[3], gk.Active(c))
    tape = forward(*sargs)
    for k in need:
        assert np.array_equal(split[k], plain[k]), f"primal {k} after the split forward differs\n{context}"
    sgrads = reverse(*sargs, tape)
    for k in dup + [3]:
        _close(f"split shadow of argument {k}", sshadows[k], shadows[k], context)
    if program.active_c:
        _close("split d/dc", sgrads[4], grads[4], context)

    # forward mode against the oracle's forward chain, and the dot-product test between the program's modes
    tangents = _aliased(program, [np.zeros(N) if a == "const" else rng.standard_normal(N)
                                  for a in program.annotations])
    tangentE, tc = rng.standard_normal(1), float(rng.standard_normal()) if program.active_c else 0.0
    want_t, want_tE, _ = progfuzz.oracle_forward(program, buffers, E, c, tangents, tangentE, tc)
    fwork = progfuzz.copies(buffers) + [E.copy()]
    ftan = progfuzz.copies(tangents) + [tangentE.copy()]
    gk.autodiff(fn, *_annotated(program, fwork[:3], fwork[3], c, ftan, ftan[3], gk.Duplicated(c, tc)),
                mode=gk.Forward)
    for k in need:
        assert np.array_equal(fwork[k], plain[k]), f"primal {k} after forward mode differs from a plain call\n{context}"
    for k in dup:
        _close(f"forward tangent of a{k}", ftan[k], want_t[k], context)
    _close("forward tangent of E", ftan[3], want_tE, context)
    once = [k for k in dup if program.annotations[k] != "alias"]  # an aliased buffer counts once
    lhs = sum(float(seeds[k] @ ftan[k]) for k in once) + float(seedE @ ftan[3])
    rhs = sum(float(shadows[k] @ tangents[k]) for k in once) + float(shadows[3] @ tangentE)
    rhs += (grads[4] * tc) if program.active_c else 0.0
    _close("<seed, J t> against <J^T seed, t>", lhs, rhs, context)

    # vector mode: two lanes against two Duplicated calls (reverse; forward)
    lanes = [_aliased(program, [rng.standard_normal(N) for _ in range(3)]) + [rng.standard_normal(1)]
             for _ in range(2)]
    vwork = progfuzz.copies(buffers) + [E.copy()]
    vsh = [[lane[k] for lane in lanes] for k in range(4)]
    vsh = [list(t) for t in zip(*[progfuzz.copies([vsh[k][lane] for k in range(4)]) for lane in range(2)])]
    vgrads = gk.autodiff(fn, *_annotated(program, vwork[:3], vwork[3], c, vsh, vsh[3], gk.Active(c), batch=True))
    for lane in range(2):
        one = progfuzz.copies(buffers) + [E.copy()]
        osh = progfuzz.copies(lanes[lane])
        ograds = gk.autodiff(fn, *_annotated(program, one[:3], one[3], c, osh, osh[3], gk.Active(c)))
        for k in dup + [3]:
            _close(f"vector lane {lane} of argument {k}", vsh[k][lane], osh[k], context)
        if program.active_c:
            _close(f"vector lane {lane} d/dc", vgrads[4][lane], ograds[4], context)
    stats["programs"] += 1
    stats["launches"] += sum(op.kind == "launch" for op in program.ops)
    loops = [op for op in program.ops if op.kind == "loop"]
    stats["half launches"] += any(op.part for op in program.ops + [b for loop in loops for b in loop.body])
    stats["checkpointed loops, snapshots"] += any(op.extra[1] == "snapshots" for op in loops)
    stats["checkpointed loops, memory budget"] += any(op.extra[1] == "memory" for op in loops)
    stats["aliased"] += any(op.kind == "launch" and len(set(op.views)) < len(op.views) for op in program.ops)
    stats["temporaries"] += any(op.kind == "alloc" for op in program.ops)
    stats["swaps"] += any(op.kind == "swap" for op in program.ops)
    stats["const buffers"] += "const" in program.annotations
    stats["aliased arguments"] += "alias" in program.annotations
    stats["DuplicatedNoNeed"] += "noneed" in program.annotations
    stats["2-D views"] += any(v in ("m24", "m42T") for op in program.ops for _, v in op.views)


def test_program_save_fuzz():
    rng = np.random.default_rng(SEED)
    stats = collections.Counter()
    before = set_default(BACKEND)
    try:
        with warnings.catch_warnings():
            # a memory= budget below two snapshots keeps two, with this warning (docs/checkpointed-loops.md)
            warnings.filterwarnings("ignore", message=r"memory=\d+ bytes holds fewer than two",
                                    category=RuntimeWarning)
            for index in range(N_PROGRAMS):
                program = progfuzz.draw(rng)
                try:
                    check_program(program, rng, stats)
                except gk.GradkernError as e:
                    raise AssertionError(f"program {index} (GRADKERN_FUZZ_SEED={SEED}) refused: "
                                         f"{type(e).__name__}: {e}\n{program}") from e
    finally:
        set_default(before)
    print(dict(stats))
    assert stats["programs"] == N_PROGRAMS
    for what in ("aliased", "temporaries", "swaps", "const buffers", "aliased arguments", "DuplicatedNoNeed",
                 "2-D views", "checkpointed loops, snapshots", "checkpointed loops, memory budget", "half launches"):
        assert stats[what], f"no program with {what}: the batch tests too little"


@pytest.mark.parametrize("nsteps, snapshots", [(2, 1), (4, 2)])
def test_released_temporary_shadow_is_not_found_by_a_loop_recomputed_before_it(nsteps, snapshots):
    """Found by this fuzzer (session 51): a Const buffer `a` read by a checkpointed loop and written after it got
    an internal shadow at that write; the write's reverse gave the shadow back to the save pool, the pool lent the
    memory again for the final contents of `a`, and the loop's recomputed launches, which still found the
    released shadow by `a`'s memory (shadows.find), accumulated into it: `a` ended as its final contents plus
    that adjoint instead of its final contents. A released entry is no shadow now (program/shadows.py)."""
    n = 8

    def fn(a, b, E, c):
        def step(t):
            gk.launch(progfuzz.pf_write, n, b, a, 0.5)
            gk.launch(progfuzz.pf_loss, n, b, E)
        gk.checkpointed_loop(step, nsteps, snapshots=snapshots)
        gk.launch(progfuzz.pf_write, n, a, b, c)

    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.2, 1.2, n), rng.uniform(0.2, 1.2, n)
    plain = [a.copy(), b.copy(), np.zeros(1)]
    before = set_default("interp")
    try:
        fn(*plain, 0.6)
        E, db, dE = np.zeros(1), rng.standard_normal(n), rng.standard_normal(1)
        db0, dE0 = db.copy(), dE.copy()
        grads = gk.autodiff(fn, gk.Const(a), gk.Duplicated(b, db), gk.Duplicated(E, dE), gk.Active(0.6))
    finally:
        set_default(before)
    for got, want in zip((a, b, E), plain):
        assert np.array_equal(got, want)
    # L = <db0, b_final> + <dE0, E_final>: b_final = 0.5 exp(0.5 sin(a0)) and E = nsteps * sum(b_final**2) / 2 do
    # not depend on c (it only reaches a, which no shadow seeds); b is overwritten whole: its shadow ends 0
    assert grads[3] == 0.0 and np.array_equal(db, np.zeros(n)) and np.array_equal(dE, dE0)
    assert db0.any()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-s"])
