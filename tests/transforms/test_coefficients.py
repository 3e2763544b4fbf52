"""A gather's interior evaluated by its coefficients (transforms/coefficients.py, docs/adjoint-forms.md
section 11): where it applies and where it refuses, the gradient against the replayed interior within a
derived bound, and a fuzz of random linear bodies against the body as written (the IR interpreter)."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
import gradkern.pipeline as pipeline
from gradkern.ir import build as b
from gradkern.ir import nodes as ir
from gradkern.ir.ops import Op
from gradkern.ir.types import F64, I64, Array
from gradkern.kernels import burgers_rusanov_1d, upwind_2d
from gradkern.transforms.coefficients import by_coefficients

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


U = 2.0**-53


def _gamma(k: int) -> float:
    return k * U / (1 - k * U)


def _fresh(f):
    return gk.kernel(f.py_func) if hasattr(f, "py_func") else f


def _burgers(on: bool, monkeypatch, n: int, seed: int):
    monkeypatch.setattr(pipeline, "COEFFICIENTS", on)
    burgers_rusanov_1d._specs.clear()
    rng = np.random.default_rng(seed)
    u = rng.uniform(0.3, 1.2, n) * rng.choice([-1.0, 1.0], n)
    dun = rng.standard_normal(n)
    du = np.zeros(n)
    gk.autodiff(burgers_rusanov_1d, gk.Duplicated(u, du), gk.Duplicated(np.zeros(n), dun.copy()), gk.Const(0.3))
    return u, dun, du


@pytest.mark.numba
@pytest.mark.parametrize("n", [7, 300])
def test_burgers_gradient_within_the_reassociation_bound(monkeypatch, n):
    """The same sums of products, associated from the output side: du_i is, exactly,
    dun_i + c (dun_i - dun_{i-1}) F_b(u_{i-1}, u_i) - c (dun_{i+1} - dun_i) F_a(u_i, u_{i+1}), the partials of the
    Rusanov flux F(a, b) sums of paths of magnitude ¼|b| twice (the flux's b²/4), ½|b - a| (the kink of
    α = max(|a|, |b|)) and ½ α (F_a: |a| for |b|; `paths` bounds both halves). Every path carries at most 8
    roundings and every du_i sums at most 16 path terms, so both evaluations are within γ_24 S of the exact value
    (Higham, (3.4) and (4.4)), S the sum of the paths' magnitudes, and within 2 γ_24 S of each other."""
    u, dun, old = _burgers(False, monkeypatch, n, 3)
    _, _, new = _burgers(True, monkeypatch, n, 3)
    c = 0.3
    um, up = np.roll(u, 1), np.roll(u, -1)
    dm, dp = np.roll(dun, 1), np.roll(dun, -1)

    def paths(a, b_):  # either half's path magnitudes: ½ (|a| + |b|), ½ |b - a| (the kink), ½ α
        return 0.5 * np.abs(b_) + 0.5 * np.abs(b_ - a) + 0.5 * np.maximum(np.abs(a), np.abs(b_)) + 0.5 * np.abs(a)
    s = np.abs(dun) + c * (np.abs(dun) + np.abs(dm)) * paths(um, u) + c * (np.abs(dp) + np.abs(dun)) * paths(u, up)
    assert not np.array_equal(old, new) or n < 8  # the form applied (the interior runs from n >= 3)
    assert np.all(np.abs(new - old) <= 2 * _gamma(24) * s)


@pytest.mark.numba
def test_applies_to_the_periodic_gathers_and_refuses_a_division():
    x = np.ones((6, 6))
    src = gk.inspect(upwind_2d, *(gk.Duplicated(x.copy(), x.copy()) for _ in range(4)), gk.Const(0.2),
                     mode=gk.Reverse).sources["gather"]
    assert "_gk_kc" in src  # coefficients built backward
    src = gk.inspect(burgers_rusanov_1d, *(gk.Duplicated(np.ones(8), np.ones(8)) for _ in range(2)),
                     gk.Const(0.3), mode=gk.Reverse).sources["gather"]
    assert "_gk_kc" in src

    # a linear value divided by a primal one is refused: the body stays as written
    body = _body([("load", "a", 0), ("div", "v", "a")])
    k = _kernel(body)
    assert by_coefficients(k, {"d"}) is k


# ---- a fuzz: random straight-line linear bodies, against the body as written --------------------------------


def _kernel(body):
    params = (ir.Param("x", Array(F64, 1), True), ir.Param("d", Array(F64, 1), True),
              ir.Param("out", Array(F64, 1), True))
    names = sorted({s.name for s in body if isinstance(s, ir.Assign)})
    return ir.Kernel("fuzz", params, (), 1, locals=tuple((n, F64) for n in names),
                     interior=ir.Interior((), tuple(body)))


def _body(spec):
    """spec: ("load", v, k) v = d[k]; ("zero", v); ("add"/"sub", v, a, b); ("neg", v, a); ("mul", v, a, k)
    v = a * x[k]; ("div", v, a); ("primal", v, k) v = x[k] * x[k]; ("store", k, v) out[k] = out[k] + v."""
    out = []

    def var(n):
        return b.var(n, F64)
    for s in spec:
        op = s[0]
        if op == "load":
            out.append(ir.Assign(s[1], ir.Load("d", (b.const(s[2], I64),), type=F64)))
        elif op == "zero":
            out.append(ir.Assign(s[1], b.const(0.0, F64)))
        elif op in ("add", "sub"):
            out.append(ir.Assign(s[1], b.apply(Op.ADD if op == "add" else Op.SUB, var(s[2]), var(s[3]))))
        elif op == "neg":
            out.append(ir.Assign(s[1], b.apply(Op.NEG, var(s[2]))))
        elif op == "mul":
            out.append(ir.Assign(s[1], b.apply(Op.MUL, var(s[2]), ir.Load("x", (b.const(s[3], I64),), type=F64))))
        elif op == "div":
            out.append(ir.Assign(s[1], b.apply(Op.DIV, var(s[2]), b.const(3.0, F64))))
        elif op == "primal":
            x = ir.Load("x", (b.const(s[2], I64),), type=F64)
            out.append(ir.Assign(s[1], b.apply(Op.MUL, x, x)))
        elif op == "store":
            idx = (b.const(s[1], I64),)
            out.append(ir.Store("out", idx, b.apply(Op.ADD, ir.Load("out", idx, type=F64), var(s[2]))))
    return out


def _run(body, x, d):
    """The straight-line body evaluated in Python floats (the oracle: statement by statement)."""
    env, out = {}, np.zeros(4)

    def ev(e):
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.Var):
            return env[e.name]
        if isinstance(e, ir.Load):
            arr = {"x": x, "d": d, "out": out}[e.array]
            return float(arr[ev(e.indices[0])])
        if isinstance(e, ir.Apply):
            a = [ev(y) for y in e.args]
            return {Op.ADD: lambda: a[0] + a[1], Op.SUB: lambda: a[0] - a[1], Op.MUL: lambda: a[0] * a[1],
                    Op.DIV: lambda: a[0] / a[1], Op.NEG: lambda: -a[0]}[e.op]()
        raise AssertionError(e)
    for s in body:
        if isinstance(s, ir.Assign):
            env[s.name] = ev(s.value)
        else:
            out[ev(s.indices[0])] = ev(s.value)
    return out


def _random_spec(rng):
    spec, linear, primal = [], [], []
    for i in range(int(rng.integers(4, 25))):
        v = f"v{int(rng.integers(0, 8))}"  # locals reassigned: versions
        r = rng.random()
        if r < 0.2 or not linear:
            spec.append(("load", v, int(rng.integers(0, 4))))
        elif r < 0.3:
            spec.append(("zero", v))
        elif r < 0.5:
            spec.append((str(rng.choice(["add", "sub"])), v, str(rng.choice(linear)), str(rng.choice(linear))))
        elif r < 0.6:
            spec.append(("neg", v, str(rng.choice(linear))))
        elif r < 0.8:
            spec.append(("mul", v, str(rng.choice(linear)), int(rng.integers(0, 4))))
        elif r < 0.9:
            spec.append(("primal", v, int(rng.integers(0, 4))))
        else:
            spec.append(("store", int(rng.integers(0, 4)), str(rng.choice(linear))))
        if spec[-1][0] == "store":
            continue
        if spec[-1][0] == "primal":
            linear = [n for n in linear if n != v]
            primal.append(v)
        elif v not in linear:
            linear.append(v)
    if linear:
        spec.append(("store", 0, str(rng.choice(linear))))
    return spec


def test_fuzz_random_linear_bodies_against_the_body_as_written():
    """Reassigned locals (versions), zeroed adjoints, sums, negations, products with primal loads, and locals
    that turn primal again: the rewritten body stores what the body as written stores, within the bound of
    two evaluations of the same sums of products (each value a sum of at most 2^24 paths is more than these
    bodies reach; the test uses γ of the body's statement count times 2 as K, every path at most that long)."""
    rng = np.random.default_rng(2026)
    applied = 0
    for _ in range(300):
        spec = _random_spec(rng)
        body = _body(spec)
        k = _kernel(body)
        out = by_coefficients(k, {"d"})
        x, d = rng.uniform(-2, 2, 4), rng.uniform(-2, 2, 4)
        want = _run(body, x, d)
        got = _run(out.interior.body, x, d)
        if out is not k:
            applied += 1
        # magnitudes: the same bodies on |x|, |d| bound the sum of the paths' magnitudes (no cancellation)
        absx = _run(_body([s if s[0] not in ("sub", "neg") else
                           (("add", *s[1:]) if s[0] == "sub" else ("add", s[1], s[2], s[2]))
                           for s in spec]), np.abs(x), np.abs(d))
        bound = 2 * _gamma(2 * len(spec) + 2) * np.abs(absx)
        np.testing.assert_array_less(np.abs(got - want), bound + 1e-300)
    assert applied > 100
