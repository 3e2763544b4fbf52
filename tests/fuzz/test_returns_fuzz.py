"""The returned-derivative check fuzzed against a brute-force oracle (program/returns.py, docs/programs.md "What a
program returns"): random programs (tests/support/returnsfuzz.py) that launch into temporaries from active and
inactive inputs, copy and fill them, and return host code on them or on the Active scalar, inside tuples, lists,
dicts and lists longer than the 64 items looked at.

The oracle perturbs the active inputs (u and c) of a plain call, which returns every leaf, and sees which leaves
change: a leaf that depends on them carries a derivative.

Properties, per program under `gk.autodiff` (reverse; every fourth also forward):
* soundness: where a leaf among the first 64 items depends on u or c, and is not taken by design (`float(...)`,
  `.item()`, `.tolist()`, `.view(np.ndarray)`, `c.value`, an argument, host code on a plain `np.zeros(N)`
  temporary, which is not seen: docs/host-code.md), the call raises gk.ProgramError naming what the program
  returned, and no shadow has changed (reverse);
* no refusal without cause: where every leaf looked at is taken by design or reads only temporaries no launch wrote
  an active value into, and not c, the call runs.
(A leaf on a temporary that some launch made active but that no longer depends on the inputs, overwritten since or
an element the launch did not write, may go either way: the check follows shadows, not values.)

GRADKERN_FUZZ_RETURNS sets the number of programs (CI default 60), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_RETURNS=3000 pytest -s -n0 tests/fuzz/test_returns_fuzz.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from support import returnsfuzz as rf

import gradkern as gk

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_RETURNS", "60"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
NAMES = {"gk": gk, "np": np, "N": rf.N, "square": rf.square, "scale": rf.scale, "total": rf.total}


def _function(text: str):
    space = dict(NAMES)
    exec(compile(text, "<returnsfuzz>", "exec"), space)  # noqa: S102 (generated test programs)
    return space["prog"]


def _values(lines, leaves, u, v, c):
    """Every leaf's value from a plain call (no verb: a program is a Python function), None for the exempt."""
    texts = [x.text if not x.exempt else "None" for x in leaves]  # taken by design: no need to know
    out = _function(rf.source("prog", lines, "[" + ", ".join(texts) + "]"))(u.copy(), v, np.zeros(1), c)
    return [np.array(x, dtype=float) if x is not None else None for x in out]


def _depends(lines, leaves, u, v, c, rng) -> list[bool]:
    base = _values(lines, leaves, u, v, c)
    moved = _values(lines, leaves, u + 1e-3 * (rng.random(rf.N) + 0.5), v, c + 1e-3)
    return [a is not None and not np.array_equal(a, b) for a, b in zip(base, moved)]


def _seen(x: rf.Leaf, plain: set[int]) -> bool:
    """Whether the check can see the leaf: host code on a plain `np.zeros(N)` temporary is not seen (docs/host-code.md
    "What is not seen"), the temporary itself is (its shadow)."""
    return not set(x.temps) & plain or x.text in {f"t[{k}]" for k in plain}


def test_returns_against_perturbation():
    rng = np.random.default_rng(SEED)
    counts = {"refused": 0, "taken": 0, "free": 0, "beyond 64": 0}
    for case in range(N_PROGRAMS):
        lines, ops, plain = rf.program(rng)
        ret, items = rf.returned(rng)
        looked = items[:rf.LOOKED_INTO]
        leaves = [x for x in looked if x is not None]
        u, v, c = rng.random(rf.N) + 0.5, rng.random(rf.N) + 0.5, 0.7
        dep = dict(zip(map(id, leaves), _depends(lines, leaves, u, v, c, rng))) if leaves else {}
        active = rf.active_temps(ops)
        must_refuse = any(dep[id(x)] and not x.exempt and _seen(x, plain) for x in leaves)
        must_take = all(x.exempt or not (set(x.temps) & active or x.uses_c) for x in leaves)
        text = rf.source("prog", lines, ret)
        prog = _function(text)
        forward = case % 4 == 3
        du, dE = np.zeros(rf.N), np.ones(1)
        if forward:
            du[:] = rng.random(rf.N)
        du0, dE0 = du.copy(), dE.copy()
        try:
            if forward:
                gk.autodiff(prog, gk.Duplicated(u, du), gk.Const(v), gk.Duplicated(np.zeros(1), dE),
                            gk.Duplicated(c, 1.0), mode=gk.Forward)
            else:
                gk.autodiff(prog, gk.Duplicated(u, du), gk.Const(v), gk.Duplicated(np.zeros(1), dE), gk.Active(c))
            refused = None
        except gk.ProgramError as e:
            refused = e
            assert "program 'prog' returned" in str(e), str(e)
        where = f"case {case} ({'forward' if forward else 'reverse'}):\n{text}"
        assert not (must_refuse and refused is None), f"{where}\na leaf that depends on u or c was taken"
        assert not (must_take and refused is not None), f"{where}\nrefused without cause: {refused}"
        if refused is not None and not forward:  # the reverse never started
            np.testing.assert_array_equal(du, du0)
            np.testing.assert_array_equal(dE, dE0)
        counts["refused" if refused is not None else "taken"] += 1
        counts["free"] += not must_refuse and not must_take
        counts["beyond 64"] += len(items) > rf.LOOKED_INTO
    assert counts["refused"] and counts["taken"], counts


def test_a_plain_temporary_an_active_launch_wrote_is_refused():
    # found by this fuzzer (session 52): a temporary allocated without an argument (`np.zeros(n)`) is a plain
    # ndarray, not tracked host code; returned whole after a launch wrote an active value into it, it was taken
    # and its derivative dropped silently
    def prog(u, v, E, c):
        t = np.zeros(rf.N)
        gk.fill(t, c)
        return t

    du, dE = np.zeros(rf.N), np.ones(1)
    with pytest.raises(gk.ProgramError, match=r"program 'prog' returned a temporary array \(shape \(6,\)\)"):
        gk.autodiff(prog, gk.Duplicated(np.ones(rf.N), du), gk.Const(np.ones(rf.N)), gk.Duplicated(np.zeros(1), dE),
                    gk.Active(0.7))
    np.testing.assert_array_equal(du, 0.0)
    np.testing.assert_array_equal(dE, 1.0)
