"""Random IR blocks for the reverse sweep's peephole (transforms/peephole.py; tests/fuzz/test_peephole_fuzz.py) and the
brute-force oracle: the block run before and after the rewrite on the same memory.

A block is straight-line code with nested `if`s over float locals `a b g t`, int locals `k j` (indices), a float
array `d` and an int array `idx` (both of length 4). Its statements are the peephole's two round trips, seeded often
(`d[..] = 0` ... `d[..] = d[..] + e`, `g = d[..]` ... `d[..] = g`, the same for the local `a`), and what may lie
between them: index locals moved (`k = (k + 1) % 4`, `k = idx[j]`), `idx` stored, `d` stored, added to atomically or
read at an index that coincides with the round trip's only at run time, the round trip's value read by its own
right-hand side, and `if`s. Every index stays in 0..3 by construction (`% 4`, `idx` holds 0..3), so both runs are
defined."""

from __future__ import annotations

import numpy as np

from gradkern.ir import nodes as ir
from gradkern.ir.interp import _Frame
from gradkern.ir.ops import Op
from gradkern.ir.types import BOOL, F64, I64

FLOATS = ("a", "b", "g", "t")
INTS = ("k", "j")


def _c(v):
    return ir.Const(v, type=I64 if isinstance(v, int) else F64)


def _var(n):
    return ir.Var(n, type=I64 if n in INTS else F64)


def _index(rng) -> ir.Expr:
    r = rng.random()
    if r < 0.35:
        return _var("k")
    if r < 0.6:
        return _var("j")
    if r < 0.8:
        return ir.Load("idx", (_var(str(rng.choice(INTS))),), type=I64)
    return _c(int(rng.integers(0, 4)))


def _d(rng, at=None) -> ir.Load:
    return ir.Load("d", (at if at is not None else _index(rng),), type=F64)


def _value(rng, depth=0) -> ir.Expr:
    r = rng.random()
    if r < 0.3 or depth > 1:
        return _var(str(rng.choice(FLOATS))) if rng.random() < 0.6 else _c(float(rng.integers(-3, 4)))
    if r < 0.55:
        return _d(rng)
    op = Op.ADD if rng.random() < 0.5 else Op.MUL
    return ir.Apply(op, (_value(rng, depth + 1), _value(rng, depth + 1)), type=F64)


def _round_trip(rng, between) -> list[ir.Stmt]:
    """One of the peephole's patterns, with random statements between its two ends."""
    on_array = rng.random() < 0.6
    at = _index(rng)
    target = _d(rng, at) if on_array else _var("a")

    def write(value):
        return ir.Store("d", (at,), value) if on_array else ir.Assign("a", value)

    mid = between()
    if rng.random() < 0.5:  # zero, then accumulate (the value may read the target itself)
        e = _value(rng)
        if rng.random() < 0.3:
            e = ir.Apply(Op.ADD, (e, _d(rng) if on_array else _var("a")), type=F64)
        return [write(_c(0.0)), *mid, write(ir.Apply(Op.ADD, (target, e), type=F64))]
    return [ir.Assign("g", target), *mid, write(_var("g"))]


def _stmt(rng, depth) -> list[ir.Stmt]:
    r = rng.random()
    if r < 0.12:
        return [ir.Assign("k", ir.Apply(Op.MOD, (ir.Apply(Op.ADD, (_var("k"), _c(1)), type=I64), _c(4)), type=I64))]
    if r < 0.2:
        return [ir.Assign(str(rng.choice(INTS)), ir.Load("idx", (_index(rng),), type=I64))]
    if r < 0.27:
        return [ir.Store("idx", (_index(rng),), _var(str(rng.choice(INTS))))]
    if r < 0.42:
        return [ir.Store("d", (_index(rng),), _value(rng))]
    if r < 0.5:
        return [ir.AtomicAdd("d", (_index(rng),), _value(rng))]
    if r < 0.65:
        return [ir.Assign(str(rng.choice(FLOATS)), _value(rng))]
    if r < 0.75 and depth < 2:
        cond = ir.Apply(Op.LT, (_var(str(rng.choice(INTS))), _c(int(rng.integers(0, 4)))), type=BOOL)
        return [ir.If(cond, tuple(block(rng, depth + 1, 3)), tuple(block(rng, depth + 1, 2)))]
    return _round_trip(rng, lambda: block(rng, depth + 1, int(rng.integers(0, 3))) if depth < 2 else [])


def block(rng, depth=0, size=6) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for _ in range(size):
        out += _stmt(rng, depth)
    return out


def state(rng) -> tuple[dict, dict]:
    arrays = {"d": rng.integers(-3, 4, size=4).astype(np.float64), "idx": rng.integers(0, 4, size=4).astype(np.int64)}
    env = {n: np.float64(rng.integers(-3, 4)) for n in FLOATS}
    env |= {n: np.int64(rng.integers(0, 4)) for n in INTS}
    return arrays, env


def run(stmts, arrays: dict, env: dict) -> tuple[dict, dict]:
    """The block on copies of `arrays` and `env`, by the reference interpreter's statement runner."""
    arrays = {n: a.copy() for n, a in arrays.items()}
    frame = _Frame(None, arrays, env, (0,), (1,))
    frame.run(stmts)
    return arrays, frame.env
