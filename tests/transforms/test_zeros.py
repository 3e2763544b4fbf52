"""Adjoint locals known to be zero (transforms/zeros.py, docs/adjoint-forms.md section 12): `d = d + e` becomes
`d = e` where d is zero on every path there, through branches and loops; a fuzz run of random blocks against a
brute-force run of the block as written; the y of a statement's partials read once before its adds."""

import random

import numpy as np

import gradkern as gk
from gradkern.ir import build as b
from gradkern.ir import nodes as ir
from gradkern.ir.ops import Op
from gradkern.ir.types import F64, I64
from gradkern.kernels import nbody_forces
from gradkern.transforms.zeros import drop_zero_adds

D, E = frozenset({"d"}), b.var("e", F64)


def v(name):
    return b.var(name, F64)


def zero(name="d"):
    return ir.Assign(name, b.const(0.0, F64))


def acc(name="d", value=E):
    return ir.Assign(name, b.apply(Op.ADD, v(name), value))


def loop(*body):
    return ir.For("k", b.const(0, I64), b.var("n", I64), b.const(1, I64), tuple(body))


def first_adds(block):
    """The accumulations into d the pass made assignments, in walk order (True: made `d = e`)."""
    return [s.value == E for s in ir.walk_stmts(tuple(block)) if isinstance(s, ir.Assign) and s.name == "d"
            and not isinstance(s.value, ir.Const)]


def test_straight_line_and_after_another_write():
    out = drop_zero_adds([zero(), acc(), acc()], D)
    assert first_adds(out) == [True, False]
    assert first_adds(drop_zero_adds([acc()], D)) == [False]  # nothing known before the block


def test_only_followed_names_and_not_reading_itself():
    assert first_adds(drop_zero_adds([zero(), acc()], frozenset({"x"}))) == [False]
    out = drop_zero_adds([zero(), acc(value=b.apply(Op.MUL, v("d"), E))], D)
    assert out[1].value.op is Op.ADD


def test_branches_meet_on_both_arms():
    one_arm = [zero(), ir.If(v("c"), (acc(),), ()), acc()]
    assert first_adds(drop_zero_adds(one_arm, D)) == [True, False]
    both = [zero(), ir.If(v("c"), (acc(), zero()), ()), acc()]
    assert first_adds(drop_zero_adds(both, D)) == [True, True]


def test_loop_zeroed_at_the_end_of_its_body():
    """The reverse loop's pattern: zero before the loop, added into, read, zeroed at the body's end."""
    body = (acc(), ir.Assign("g", v("d")), zero())
    assert first_adds(drop_zero_adds([zero(), loop(*body)], D)) == [True]
    # not zero before the loop: the first iteration adds into what it holds
    assert first_adds(drop_zero_adds([zero(), acc(), loop(*body)], D)) == [True, False]
    # not zeroed at the body's end: the second iteration adds into the first's value
    assert first_adds(drop_zero_adds([zero(), loop(acc(), ir.Assign("g", v("d")))], D)) == [False]
    # after a loop that zeroes it, d is zero (no iteration, or one that ended with d = 0)
    assert first_adds(drop_zero_adds([zero(), loop(*body), acc()], D)) == [True, True]
    assert first_adds(drop_zero_adds([zero(), loop(acc()), acc()], D)) == [False, False]


# -- fuzz: random blocks of zeroes, adds, copies, branches and loops over three locals, run as written and
# rewritten by a brute-force interpreter of this small language

NAMES = ("d", "f", "h")


def _random_block(rng, depth):
    out = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        x = rng.choice(NAMES)
        if r < 0.25:
            out.append(zero(x))
        elif r < 0.55:
            y = rng.choice(NAMES + ("e", "c1"))
            out.append(acc(x, v(y)))
        elif r < 0.7:
            out.append(ir.Assign(x, v(rng.choice(NAMES + ("e",)))))
        elif r < 0.85 and depth < 3:
            out.append(ir.If(v(rng.choice(("c1", "c2"))), tuple(_random_block(rng, depth + 1)),
                             tuple(_random_block(rng, depth + 1)) if rng.random() < 0.5 else ()))
        elif depth < 3:
            out.append(ir.For("k", b.const(0, I64), b.const(rng.randint(0, 3), I64), b.const(1, I64),
                              tuple(_random_block(rng, depth + 1))))
    return out


def _run(block, env):
    for s in block:
        if isinstance(s, ir.Assign):
            env[s.name] = _eval(s.value, env)
        elif isinstance(s, ir.If):
            _run(s.then if env[s.cond.name] else s.orelse, env)
        else:
            for _ in range(s.stop.value):
                _run(s.body, env)
                env["e"] += 1.5  # the added values change from one iteration to the next
    return env


def _eval(e, env):
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Var):
        return env[e.name]
    return _eval(e.args[0], env) + _eval(e.args[1], env)


def test_fuzz_against_the_block_as_written():
    rng = random.Random(12)
    rewritten = 0
    for case in range(400):
        block = _random_block(rng, 0)
        followed = frozenset(rng.sample(NAMES, rng.randint(1, 3)))
        out = drop_zero_adds(block, followed)
        rewritten += out != block
        for _ in range(3):
            env = {n: rng.choice((0.0, -0.0, 1.0, rng.uniform(-2, 2))) for n in NAMES}
            env.update(e=rng.choice((0.0, -0.0, 0.25, rng.uniform(-2, 2))), c1=rng.random() < 0.5,
                       c2=rng.random() < 0.5)
            assert _run(out, dict(env)) == _run(block, dict(env)), case  # == : -0.0 equals 0.0
    assert rewritten >= 100, rewritten


def test_nbody_partials_read_the_quotient_once():
    """mass[j] / den in a local before the reverse's first add into a shadow: the backend, which cannot prove
    the shadow apart from mass, would reload mass[j] after the add and divide again."""
    rng = np.random.default_rng(0)
    pos, mass = rng.uniform(0, 1, (16, 3)), rng.uniform(0.5, 1.5, 16)
    out = gk.inspect(nbody_forces, gk.Duplicated(pos, np.zeros_like(pos)), gk.Duplicated(mass, np.zeros_like(mass)),
                     gk.Duplicated(np.zeros((16, 3)), np.ones((16, 3))), gk.Const(1e-2), dim=16, mode=gk.Reverse)
    lines = out.ir.splitlines()
    y = next(n for n, line in enumerate(lines) if line.strip().startswith("_gk_y") and "mass[j] /" in line)
    name = lines[y].split("=")[0].strip()
    assert any(f"-({name} /" in line for line in lines[y:])  # d(a/b)/db = -(y/b) reads it
    assert not any("(-((mass[j] /" in line for line in lines)
