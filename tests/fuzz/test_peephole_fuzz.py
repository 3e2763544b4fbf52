"""The reverse sweep's peephole fuzzed against a brute-force oracle (transforms/peephole.py, docs/compile-time.md
finding 12): random IR blocks (tests/support/peepholefuzz.py) full of the two round trips the pass removes
(`d = 0; ...; d = d + e` and `g = d; ...; d = g`, on a local and on an array element), with index locals moved,
index arrays stored, the target array stored, added to or read at an index that coincides only at run time, and the
accumulated value reading its own target, between or inside them, under nested `if`s.

The oracle runs each block and its rewrite with the reference interpreter's statement runner on the same random
memory (four draws per block): every array and every local must come out equal. Properties: no block changes what
it computes, and the pass still removes round trips in most blocks (else it would be sound by doing nothing).

GRADKERN_FUZZ_PEEPHOLE sets the number of blocks (CI default 400), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_PEEPHOLE=50000 pytest -s -n0 tests/fuzz/test_peephole_fuzz.py
"""

from __future__ import annotations

import os

import numpy as np
from support import peepholefuzz as pf

from gradkern.ir import nodes as ir
from gradkern.ir.ops import Op
from gradkern.ir.types import F64, I64
from gradkern.transforms.peephole import peephole

N_BLOCKS = int(os.environ.get("GRADKERN_FUZZ_PEEPHOLE", "400"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))


def _same(stmts, new, arrays, env) -> bool:
    a1, e1 = pf.run(stmts, arrays, env)
    a2, e2 = pf.run(new, arrays, env)
    return all(np.array_equal(a1[n], a2[n]) for n in a1) and e1 == e2


def test_peephole_keeps_what_random_blocks_compute():
    rng = np.random.default_rng(SEED)
    changed = 0
    for case in range(N_BLOCKS):
        stmts = pf.block(rng)
        new = peephole(list(stmts))
        changed += len(new) < len(stmts)
        for _ in range(4):
            arrays, env = pf.state(rng)
            assert _same(stmts, new, arrays, env), (f"block {case}:\n" + "\n".join(map(str, stmts)) + "\nbecame\n"
                                                    + "\n".join(map(str, new)) + f"\non {arrays} {env}")
    assert changed > N_BLOCKS // 2, changed  # the pass still does its work


# The minimal blocks the fuzzer found (session 52), each wrong before the fix: the rewrite kept its look-back
# to statements that touch the target, but not to what the target's index expressions or accumulated value read.
K, J = ir.Var("k", type=I64), ir.Var("j", type=I64)
A = ir.Var("a", type=F64)


def _d(i):
    return ir.Load("d", (i,), type=F64)


def _add(x, y):
    return ir.Apply(Op.ADD, (x, y), type=F64)


def _check(stmts, arrays, env):
    new = peephole(list(stmts))
    assert _same(stmts, new, arrays, env), "\n".join(map(str, new))


def test_accumulated_value_reading_its_own_target_keeps_the_zero():
    # `a = 0; a = a + (d[k] + a)` is `a = d[k]`, not `a = d[k] + a`
    _check([ir.Assign("a", ir.Const(0.0, type=F64)), ir.Assign("a", _add(A, _add(_d(K), A)))],
           {"d": np.array([1.0, 2.0]), "idx": np.zeros(2, np.int64)}, {"a": np.float64(5.0), "k": np.int64(1)})


def test_accumulated_value_reading_the_zeroed_element_elsewhere_keeps_the_zero():
    # `d[0] = 0; d[0] = d[0] + d[k]` with k == 0 at run time: the sum reads the zero
    zero = ir.Const(0, type=I64)
    _check([ir.Store("d", (zero,), ir.Const(0.0, type=F64)), ir.Store("d", (zero,), _add(_d(zero), _d(K)))],
           {"d": np.array([3.0, 2.0]), "idx": np.zeros(2, np.int64)}, {"k": np.int64(0)})


def test_index_moved_between_zero_and_accumulation_keeps_both():
    # `d[k] = 0; k = k + 1; d[k] = d[k] + a`: two elements, not one
    step = ir.Assign("k", ir.Apply(Op.ADD, (K, ir.Const(1, type=I64)), type=I64))
    _check([ir.Store("d", (K,), ir.Const(0.0, type=F64)), step, ir.Store("d", (K,), _add(_d(K), A))],
           {"d": np.array([3.0, 2.0]), "idx": np.zeros(2, np.int64)}, {"a": np.float64(1.0), "k": np.int64(0)})


def test_index_reassigned_by_the_read_keeps_the_write_back():
    # `j = idx[j]; idx[j] = j` writes idx at the new j: no round trip
    _check([ir.Assign("j", ir.Load("idx", (J,), type=I64)), ir.Store("idx", (J,), J)],
           {"d": np.zeros(4), "idx": np.array([2, 0, 3, 1], np.int64)}, {"j": np.int64(0)})
