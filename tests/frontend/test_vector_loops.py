"""Loops over a small vector's components (session 57; docs/kernel-language.md, "Loops over a vector's
components"): `v[k]` read or assigned (`=`, `+=`) with `k` the variable of a `for` loop over range(<constant>), a
module constant, len() of a table or a literal tuple. frontend/unroll.py unrolls such a loop before
frontend/vectors.py scalarises the vectors (frontend/rewrites.py), so the loop form must generate the code of its
statement-per-component twin: their IR, which every later stage is a function of, is compared, temporaries'
numbers aside. Gradients (gradkern.testing.check_grad: central differences in float64, the dot-product test and
forward-mode tangents, on the interpreter; a reverse on Numba and one on hostcuda, where g++ is, against the
interpreter's) of an n-body force, an anisotropic 3-D stencil over a table of offsets, a quaternion rotation
applied by a mat-vec loop nest, a D3Q7 lattice step, Warp's springs (the cloth port's), a loop that `break`s
and `continue`s, and a loop over a tuple of vectors; loop variables read after unrolled loops; a small fuzzer
drawing component loops, each checked against its hand-unrolled twin and against Python. Refusals (a run-time
range, a thread index, a component past the end, ...) name the line and what works, before any buffer is
touched."""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest
from support.ported_harness import on_interpreter
from support.ported_hpc5 import warp_springs
from support.ported_loops9_apps import cloth_springs

import gradkern as gk
from gradkern.backends.hostcuda import compiler
from gradkern.ir.printer import format_kernel
from gradkern.testing import check_grad

NDIM = 3  # a module constant as a loop bound
OFF = ((1, 0, 0), (0, 1, 0), (0, 0, 1))  # the stencil's direction offsets
E7 = ((0, 0, 0), (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))  # D3Q7 velocities
W7 = (0.25, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125)


# -- an n-body force: r by a component loop through a local array, accumulated by component ----------------------
@gk.kernel
def nbody_loops(x, m, f, eps2):
    i = gk.tid()
    acc = gk.vec3(0.0)
    for j in range(x.shape[0]):
        d = gk.local((3,), gk.float64)
        for k in range(3):
            d[k] = x[j, k] - x[i, k]
        r = gk.vec3(d[0], d[1], d[2])
        d2 = gk.dot(r, r) + eps2
        s = m[j] / (d2 * math.sqrt(d2))
        for k in range(NDIM):
            acc[k] += s * r[k]
    for c in range(3):
        f[i, c] = acc[c]


@gk.kernel
def nbody_hand(x, m, f, eps2):
    i = gk.tid()
    acc = gk.vec3(0.0)
    for j in range(x.shape[0]):
        d = gk.local((3,), gk.float64)
        d[0] = x[j, 0] - x[i, 0]
        d[1] = x[j, 1] - x[i, 1]
        d[2] = x[j, 2] - x[i, 2]
        r = gk.vec3(d[0], d[1], d[2])
        d2 = gk.dot(r, r) + eps2
        s = m[j] / (d2 * math.sqrt(d2))
        acc[0] += s * r[0]
        acc[1] += s * r[1]
        acc[2] += s * r[2]
    f[i, 0] = acc[0]
    f[i, 1] = acc[1]
    f[i, 2] = acc[2]


# -- an anisotropic 3-D stencil: the gradient by a direction loop over a table of offsets, the energy over a tuple --
@gk.kernel
def aniso_loops(u, out, kx, ky, kz, h):
    i, j, k = gk.tid()
    n0, n1, n2 = u.shape
    if 0 < i < n0 - 1 and 0 < j < n1 - 1 and 0 < k < n2 - 1:
        kappa = gk.vec3(kx, ky, kz)
        g = gk.vec3(0.0)
        for d in range(len(OFF)):
            g[d] = (u[i + OFF[d][0], j + OFF[d][1], k + OFF[d][2]]
                    - u[i - OFF[d][0], j - OFF[d][1], k - OFF[d][2]]) / (2.0 * h)
        e = 0.0
        for d in (0, 1, 2):
            e += kappa[d] * g[d] * g[d]
        out[i, j, k] = e


@gk.kernel
def aniso_hand(u, out, kx, ky, kz, h):
    i, j, k = gk.tid()
    n0, n1, n2 = u.shape
    if 0 < i < n0 - 1 and 0 < j < n1 - 1 and 0 < k < n2 - 1:
        kappa = gk.vec3(kx, ky, kz)
        g = gk.vec3(0.0)
        g[0] = (u[i + 1, j + 0, k + 0] - u[i - 1, j - 0, k - 0]) / (2.0 * h)
        g[1] = (u[i + 0, j + 1, k + 0] - u[i - 0, j - 1, k - 0]) / (2.0 * h)
        g[2] = (u[i + 0, j + 0, k + 1] - u[i - 0, j - 0, k - 1]) / (2.0 * h)
        e = 0.0
        e += kappa[0] * g[0] * g[0]
        e += kappa[1] * g[1] * g[1]
        e += kappa[2] * g[2] * g[2]
        out[i, j, k] = e


# -- a rotation by a unit quaternion: the matrix in a local array, applied by a mat-vec loop nest -------------------
@gk.kernel
def rotate_loops(quat, p, y):
    i = gk.tid()
    q = gk.normalize(gk.load_vec4(quat, i))
    w, a, b, c = q.x, q.y, q.z, q.w
    R = gk.local((3, 3), gk.float64)
    R[0, 0], R[0, 1], R[0, 2] = 1.0 - 2.0 * (b * b + c * c), 2.0 * (a * b - c * w), 2.0 * (a * c + b * w)
    R[1, 0], R[1, 1], R[1, 2] = 2.0 * (a * b + c * w), 1.0 - 2.0 * (a * a + c * c), 2.0 * (b * c - a * w)
    R[2, 0], R[2, 1], R[2, 2] = 2.0 * (a * c - b * w), 2.0 * (b * c + a * w), 1.0 - 2.0 * (a * a + b * b)
    v = gk.load_vec3(p, i)
    r = gk.vec3(0.0)
    for row in range(3):
        for col in range(3):
            r[row] += R[row, col] * v[col]
    gk.store_vec3(y, i, r)


@gk.kernel
def rotate_hand(quat, p, y):
    i = gk.tid()
    q = gk.normalize(gk.load_vec4(quat, i))
    w, a, b, c = q.x, q.y, q.z, q.w
    R = gk.local((3, 3), gk.float64)
    R[0, 0], R[0, 1], R[0, 2] = 1.0 - 2.0 * (b * b + c * c), 2.0 * (a * b - c * w), 2.0 * (a * c + b * w)
    R[1, 0], R[1, 1], R[1, 2] = 2.0 * (a * b + c * w), 1.0 - 2.0 * (a * a + c * c), 2.0 * (b * c - a * w)
    R[2, 0], R[2, 1], R[2, 2] = 2.0 * (a * c - b * w), 2.0 * (b * c + a * w), 1.0 - 2.0 * (a * a + b * b)
    v = gk.load_vec3(p, i)
    r = gk.vec3(0.0)
    r[0] += R[0, 0] * v[0]
    r[0] += R[0, 1] * v[1]
    r[0] += R[0, 2] * v[2]
    r[1] += R[1, 0] * v[0]
    r[1] += R[1, 1] * v[1]
    r[1] += R[1, 2] * v[2]
    r[2] += R[2, 0] * v[0]
    r[2] += R[2, 1] * v[1]
    r[2] += R[2, 2] * v[2]
    gk.store_vec3(y, i, r)


# -- a D3Q7 lattice step on a periodic grid: the momentum a vec3 summed over the table's directions by component ---
@gk.kernel
def d3q7_loops(f, fn, omega):
    i, j, k = gk.tid()
    nq, n0, n1, n2 = f.shape
    g = gk.local((7,), gk.float64)
    rho = 0.0
    mom = gk.vec3(0.0)
    for q in range(7):
        g[q] = f[q, (i - E7[q][0] + n0) % n0, (j - E7[q][1] + n1) % n1, (k - E7[q][2] + n2) % n2]
        rho += g[q]
        for d in range(3):
            mom[d] += E7[q][d] * g[q]
    u = mom / rho
    usq = 1.5 * gk.dot(u, u)
    for q in range(len(W7)):
        e = gk.vec3(1.0 * E7[q][0], 1.0 * E7[q][1], 1.0 * E7[q][2])
        cu = 3.0 * gk.dot(e, u)
        feq = W7[q] * rho * (1.0 + cu + 0.5 * cu * cu - usq)
        fn[q, i, j, k] = g[q] + omega * (feq - g[q])


@gk.kernel
def d3q7_hand(f, fn, omega):
    i, j, k = gk.tid()
    nq, n0, n1, n2 = f.shape
    g = gk.local((7,), gk.float64)
    rho = 0.0
    mom = gk.vec3(0.0)
    for q in range(7):
        g[q] = f[q, (i - E7[q][0] + n0) % n0, (j - E7[q][1] + n1) % n1, (k - E7[q][2] + n2) % n2]
        rho += g[q]
        mom[0] += E7[q][0] * g[q]
        mom[1] += E7[q][1] * g[q]
        mom[2] += E7[q][2] * g[q]
    u = mom / rho
    usq = 1.5 * gk.dot(u, u)
    for q in range(len(W7)):
        e = gk.vec3(1.0 * E7[q][0], 1.0 * E7[q][1], 1.0 * E7[q][2])
        cu = 3.0 * gk.dot(e, u)
        feq = W7[q] * rho * (1.0 + cu + 0.5 * cu * cu - usq)
        fn[q, i, j, k] = g[q] + omega * (feq - g[q])


# -- break and continue inside a component loop -----------------------------------------------------------------
@gk.kernel
def capped_norm(x, y, cap):
    """The squares of v's non-negative components, summed until the sum passes cap."""
    i = gk.tid()
    v = gk.load_vec3(x, i)
    s = 0.0
    for k in range(3):
        if v[k] < 0.0:
            continue
        s += v[k] * v[k]
        if s > cap:
            break
    y[i] = s


@gk.kernel
def loop_variables_after(x, out, cap):
    """Each unrolled loop's variable read after it: its last value, or its value at the break (until session 57 a
    loop over a local array left it as it was before the loop: 7 here)."""
    i = gk.tid()
    v = gk.load_vec3(x, i)
    k = 7
    for k in range(3):
        if v[k] > cap:
            break
    out[i, 0] = k
    t = gk.local((3,))
    m = 7
    for m in range(2, -1, -1):
        t[m] = v[m] * 2.0
    out[i, 1] = m + t[0]
    for d in (2, 0, 1):
        out[i, 2] += v[d]
    out[i, 2] += d


@gk.kernel
def tuple_of_vectors(x, y, out):
    """A loop over a literal tuple of vectors (refused until session 57: vectors were scalarised before such loops
    were rewritten, and the tuple's elements were vectors where numbers were needed)."""
    i = gk.tid()
    a = gk.load_vec3(x, i)
    b = gk.load_vec3(y, i)
    acc = gk.vec3(0.0)
    for e in (a, b, gk.cross(a, b)):
        acc += e * gk.dot(e, a)
    gk.store_vec3(out, i, acc)


def _capped_norm(x, cap):
    """capped_norm in Python, and the least distance of a branch's operands from their tie."""
    out, margin = np.zeros(len(x)), math.inf
    for i, v in enumerate(x):
        for c in v:
            margin = min(margin, abs(c))
            if c < 0.0:
                continue
            out[i] += c * c
            margin = min(margin, abs(out[i] - cap))
            if out[i] > cap:
                break
    return out, margin


def _normalise(text: str) -> str:
    """`text` with the numbered temporaries (`_gk3_tup`) renumbered by first appearance: a loop over a tuple draws
    a number its hand-unrolled twin does not."""
    seen: dict[str, str] = {}
    return re.sub(r"_gk\d+_", lambda m: seen.setdefault(m.group(0), f"_gkT{len(seen)}_"), text)


def _ir(kernel, dead: str | None = None) -> str:
    """The kernel's IR as the frontend makes it (every later stage is a function of it and of the signature, so
    the same IR generates the same code in every mode and backend), its name and numbered temporaries aside; with
    `dead`, that local's bindings to constants are dropped (asserted to exist)."""
    text = format_kernel(kernel.ir).replace(kernel.name, "K", 1)
    if dead is not None:
        lines = text.splitlines()
        kept = [ln for ln in lines if not re.fullmatch(rf"\s*{dead} = \d+", ln)]
        assert len(kept) < len(lines), f"no binding of {dead} to drop"
        text = "\n".join(kept)
    return _normalise(text.rstrip("\n"))


def _dup(a):
    return gk.Duplicated(a, np.zeros_like(a))


def _cases(rng):
    """name -> (loop kernel, hand twin, reverse-mode arguments, dim)."""
    x = rng.uniform(-1.0, 1.0, (5, 3))
    u = rng.uniform(0.5, 1.5, (4, 4, 3))
    quat = rng.uniform(0.5, 1.5, (4, 4)) * rng.choice([-1.0, 1.0], (4, 4))
    f = rng.uniform(0.08, 0.12, (7, 2, 2, 2))
    springs = np.array([0, 1, 1, 2, 0, 3, 3, 4, 1, 4], np.int64)
    return {
        "nbody": (nbody_loops, nbody_hand, [_dup(x), _dup(rng.uniform(0.5, 1.5, 5)), _dup(np.zeros((5, 3))),
                                            gk.Active(0.1)], 5),
        "aniso": (aniso_loops, aniso_hand, [_dup(u), _dup(np.zeros_like(u)), gk.Active(1.5), gk.Active(0.7),
                                            gk.Active(1.1), 0.5], u.shape),
        "rotate": (rotate_loops, rotate_hand, [_dup(quat), _dup(rng.uniform(-1.0, 1.0, (4, 3))),
                                               _dup(np.zeros((4, 3)))], 4),
        "d3q7": (d3q7_loops, d3q7_hand, [_dup(f), _dup(np.zeros_like(f)), gk.Active(1.2)], (2, 2, 2)),
        "cloth_springs": (cloth_springs, warp_springs, [
            _dup(rng.uniform(0.0, 2.0, (5, 3))), _dup(rng.uniform(-1.0, 1.0, (5, 3))), springs,
            rng.uniform(0.5, 1.0, 5), _dup(rng.uniform(0.5, 1.5, 5)), _dup(rng.uniform(0.01, 0.1, 5)),
            _dup(rng.uniform(-1.0, 1.0, (5, 3)))], 5),
    }


CASES = list(_cases(np.random.default_rng(0)))


@pytest.mark.parametrize("name", CASES)
def test_the_loop_form_generates_the_hand_unrolled_code(name):
    """The same IR as the twin's; the stencil's but for `d = 0`, `d = 1`, `d = 2`: its `for d in (0, 1, 2)` binds
    `d`, which its first loop binds too, so each unrolled copy keeps the binding (Python's loop variable holds its
    last value after the loop; frontend/unroll.py drops a tuple loop's binding only where nothing else reads the
    name), and dead-code elimination removes it before any source is printed."""
    loop, hand, _, _ = _cases(np.random.default_rng(0))[name]
    assert _ir(loop, "d" if name == "aniso" else None) == _ir(hand)


@pytest.mark.parametrize("name", CASES)
def test_gradients_of_the_loop_forms(name, monkeypatch):
    """check_grad's three checks in float64 on the interpreter, at its default tolerances (central differences
    with h = 1e-6: rtol 1e-5, atol 1e-7)."""
    on_interpreter(monkeypatch)
    loop, hand, args, dim = _cases(np.random.default_rng(1))[name]
    report = check_grad(loop, *args, dim=dim, max_coords=24)
    assert report.ok and report.checked > 8, report
    print(report)


def test_the_loop_form_on_numba():
    """capped_norm's reverse (a component loop with `continue` and `break`, unrolled with its flags) on the Numba
    backend against the interpreter's, whose gradient check_grad checks below: within 1e-14 of each array's
    largest value (both run the same IR's float64 operations, a handful per element; the bound leaves room for
    the compiler's freedom to fuse a multiply-add)."""
    x = np.random.default_rng(6).uniform(-1.0, 1.0, (12, 3))
    runs = []
    for backend in ("cpu", "interp"):
        dx, y, dy = np.zeros_like(x), np.zeros(12), np.random.default_rng(7).uniform(-1.0, 1.0, 12)
        gk.autodiff(capped_norm, gk.Duplicated(x.copy(), dx), gk.Duplicated(y, dy), 0.5, dim=12, backend=backend)
        runs.append((dx, y, dy))
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-14 * np.max(np.abs(b)))
    assert np.count_nonzero(runs[0][0]) > 12


@pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH: backend hostcuda is unavailable")
def test_the_loop_form_on_hostcuda():
    """The rotation's reverse on hostcuda (the CUDA backend's source under g++) against the interpreter's: within
    1e-13 of each array's largest value (two compilers' libm and operation order: each element a few roundings)."""
    runs = []
    for backend in ("hostcuda", "interp"):
        _, _, args, dim = _cases(np.random.default_rng(4))["rotate"]
        args[2].dval[:] = np.random.default_rng(5).uniform(-1.0, 1.0, (4, 3))
        gk.autodiff(rotate_loops, *args, dim=dim, backend=backend)
        runs.append([args[0].dval, args[1].dval, args[2].val])
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-13 * np.max(np.abs(b)))


def test_break_and_continue_in_a_component_loop(monkeypatch):
    """`continue` on a negative component, `break` once the sum passes the cap (frontend/jumps.py's flags, then the
    loop unrolled): values against Python, and the gradient, away from the branches' ties."""
    on_interpreter(monkeypatch)
    x = np.random.default_rng(6).uniform(-1.0, 1.0, (12, 3))
    want, margin = _capped_norm(x, 0.5)
    assert margin > 1e-3, margin  # central differences (h = 1e-6) cross no branch
    y = np.zeros(12)
    gk.launch(capped_norm, 12, x, y, 0.5)
    np.testing.assert_array_equal(y, want)  # the same operations in the same order
    report = check_grad(capped_norm, _dup(x), _dup(np.zeros(12)), 0.5, dim=12)
    assert report.ok and report.checked > 8, report


def test_loop_variables_after_unrolled_loops(monkeypatch):
    on_interpreter(monkeypatch)
    x = np.array([[0.1, 0.9, 0.2], [0.1, 0.2, 0.3], [0.8, 0.1, 0.1]])
    out = np.zeros((3, 3))
    gk.launch(loop_variables_after, 3, x, out, 0.5)
    np.testing.assert_array_equal(out[:, 0], [1.0, 2.0, 0.0])  # the break's k, or the last
    np.testing.assert_array_equal(out[:, 1], x[:, 0] * 2.0)  # m = 0 after range(2, -1, -1)
    np.testing.assert_array_equal(out[:, 2], (x[:, 2] + x[:, 0]) + x[:, 1] + 1.0)  # d = 1 after (2, 0, 1)


def test_a_loop_over_a_tuple_of_vectors(monkeypatch):
    """Values against NumPy (the same operations in the same order: equal), and the gradient."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(8)
    x, y = rng.uniform(-1.0, 1.0, (4, 3)), rng.uniform(-1.0, 1.0, (4, 3))
    out, want = np.zeros((4, 3)), np.zeros((4, 3))
    gk.launch(tuple_of_vectors, 4, x, y, out)
    for i in range(4):
        for e in (x[i], y[i], np.cross(x[i], y[i])):
            want[i] += e * (e[0] * x[i, 0] + e[1] * x[i, 1] + e[2] * x[i, 2])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-15)  # np.cross may order its products otherwise
    report = check_grad(tuple_of_vectors, _dup(x), _dup(y), _dup(np.zeros((4, 3))), dim=4)
    assert report.ok and report.checked > 8, report


# -- refusals: before anything runs, naming the line -------------------------------------------------------------
def _module(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text("import gradkern as gk\n\n\n" + text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFUSED = {
    "run-time range": ("for k in range(n):\n        out[i, k] = v[k]", 8,
                       r"indexes vector 'v' by 'k', so it is unrolled, which needs constant bounds: range\(n\) is not"
                       r"(.|\n)*range\(<constant>\)(.|\n)*gk.store_vec3"),
    "thread index": ("out[i, 0] = v[i]", 8, r"'v\[i\]': a vector is indexed by a constant 0-3 \(or .x .y .z .w\), "
                                            r"not by i(.|\n)*for k in range\(3\)"),
    "while variable": ("k = 0\n    while k < 3:\n        out[i, k] = v[k]\n        k += 1", 10,
                       r"not by k(.|\n)*range\(<constant>\)"),
    "past the end": ("for k in range(4):\n        out[i, 0] += v[k]", 9, "a vec3 has no component w"),
    "before the start": ("for k in range(3):\n        out[i, k] = v[k - 1]", 9, "a vec3 has no component -1"),
    "assigned past the end": ("for k in range(1, 4):\n        v[k] = 0.0", 9, "'v' is a vec3: it has no component 3"),
    "too many iterations": ("for k in range(300):\n        out[i, 0] += v[k % 3]", 8,
                            "vector 'v' by 'k', so it is unrolled; 300 iterations is too many"),
    "vector into a local array": ("t = gk.local((2,))\n    t[0] = v", 9, "a vec3 cannot be stored here"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_name_the_line_and_what_works(tmp_path, case):
    body, line, message = REFUSED[case]
    name = "refused_" + re.sub(r"\W", "_", case)
    a, out = np.ones((3, 3)), np.zeros((3, 3))
    with pytest.raises(gk.KernelSyntaxError, match=message) as info:  # at the decoration or at the launch
        module = _module(tmp_path, f"@gk.kernel\ndef bad(a, out, n):\n    i = gk.tid()\n    v = gk.load_vec3(a, i)\n"
                                   f"    {body}\n", name)
        gk.launch(module.bad, 3, a, out, 3, backend="interp")
    assert f"{name}.py:{line}" in str(info.value), str(info.value)
    np.testing.assert_array_equal(out, 0.0)
    np.testing.assert_array_equal(a, 1.0)


def test_returned_vectors_among_values_are_refused_as_before(tmp_path):
    """A device function returning vectors among several values (`return v, w`) is refused on the user's spelling,
    not on the result locals frontend/multi_returns.py makes of it (vectors are scalarised after that rewrite
    since session 57). One returned vector is a result since session 58 (frontend/vector_calls.py), so the message
    says what is refused: a vector among several values."""
    a, out = np.ones((3, 3)), np.zeros((3, 3))
    with pytest.raises(gk.KernelSyntaxError, match="returns one vector or numbers, not a vector among several") \
            as info:
        module = _module(tmp_path, "@gk.func\ndef pair(a, i):\n    v = gk.load_vec3(a, i)\n    return v, 2.0 * v\n"
                                   "\n\n@gk.kernel\ndef bad(a, out):\n    i = gk.tid()\n    p, q = pair(a, i)\n"
                                   "    out[i, 0] = p\n", "returns_vectors")
        gk.launch(module.bad, 3, a, out, backend="interp")
    assert "returns_vectors.py:7" in str(info.value), str(info.value)
    np.testing.assert_array_equal(out, 0.0)


# -- a small fuzzer: random component loops against their hand-unrolled twins and Python ------------------------
T3 = (0.5, -1.25, 2.0)  # a table the drawn kernels read
M3 = ((1.0, 0.5, -0.25), (0.0, 2.0, 1.5), (-1.0, 0.25, 0.75))
N_FUZZ = 10


def _draw(rng, n_statements: int) -> tuple[str, str]:
    """A kernel's body with component loops, and its twin with every loop unrolled by hand: the same statements in
    the same order, the loop variable a literal and the component indices folded."""
    iters = [("range(3)", (0, 1, 2)), ("range(NDIM)", (0, 1, 2)), ("range(1, 3)", (1, 2)),
             ("range(2, -1, -1)", (2, 1, 0)), ("(2, 0)", (2, 0)), ("range(len(T3))", (0, 1, 2))]
    atoms = [("a[k]", lambda k: f"a[{k}]"), ("b[(k + 1) % 3]", lambda k: f"b[{(k + 1) % 3}]"),
             ("x[i, k]", lambda k: f"x[i, {k}]"), ("T3[k]", lambda k: f"T3[{k}]"), ("c.y", lambda k: "c.y"),
             ("(a - b)[k]", lambda k: f"(a - b)[{k}]"), ("k * 0.5", lambda k: f"{k} * 0.5")]
    loop, hand = [], []
    for n in range(n_statements):
        spelled, values = iters[rng.integers(len(iters))]
        ops = rng.choice(["+", "-", "*"], 2)
        picks = [atoms[j] for j in rng.integers(len(atoms), size=3)]
        expr = f"{picks[0][0]} {ops[0]} {picks[1][0]} {ops[1]} {picks[2][0]}".replace("k", f"k{n}")
        twin = [f"{picks[0][1](v)} {ops[0]} {picks[1][1](v)} {ops[1]} {picks[2][1](v)}" for v in values]
        target = ["a", "b", "c"][rng.integers(3)]
        kind = rng.integers(4)
        if kind == 0:
            loop += [f"for k{n} in {spelled}:", f"    {target}[k{n}] = {expr}"]
            hand += [f"{target}[{v}] = {t}" for v, t in zip(values, twin)]
        elif kind == 1:
            loop += [f"for k{n} in {spelled}:", f"    {target}[k{n}] += {expr}"]
            hand += [f"{target}[{v}] += {t}" for v, t in zip(values, twin)]
        elif kind == 2:
            loop += [f"for k{n} in {spelled}:", f"    out[i, k{n}] += {expr}"]
            hand += [f"out[i, {v}] += {t}" for v, t in zip(values, twin)]
        else:  # a mat-vec loop nest over a table
            loop += [f"for k{n} in {spelled}:", "    for m in range(3):",
                     f"        {target}[k{n}] += M3[k{n}][m] * a[m]"]
            hand += [f"{target}[{v}] += M3[{v}][{m}] * a[{m}]" for v in values for m in range(3)]
    return "\n".join(loop), "\n".join(hand)


def _fuzz_source(body: str, name: str) -> str:
    lines = "\n".join("    " + line for line in body.splitlines())
    return (f"@gk.kernel\ndef {name}(x, out):\n    i = gk.tid()\n    a = gk.load_vec3(x, i)\n"
            f"    b = gk.vec3(x[i, 2], x[i, 0], 0.5)\n    c = a * b\n{lines}\n"
            "    gk.store_vec3(out, i, a + b - c)\n\n\n")


class _V(np.ndarray):
    """A vector in Python: a NumPy array with Warp's and gradkern's component names."""
    x = property(lambda v: v[0])
    y = property(lambda v: v[1])
    z = property(lambda v: v[2])


class _PythonGk:
    """`gk` for running a drawn kernel's text in Python, one thread at a time."""

    def __init__(self):
        self.thread = 0

    def kernel(self, fn):
        return fn

    def tid(self):
        return self.thread

    @staticmethod
    def vec3(*c):
        return np.array(c if len(c) == 3 else c * 3, np.float64).view(_V)

    @staticmethod
    def load_vec3(a, i):
        return gk.load_vec3(a, i).view(_V)

    store_vec3 = staticmethod(gk.store_vec3)


def test_fuzzed_component_loops_match_their_twins(tmp_path):
    """N_FUZZ drawn kernels: each generates its twin's IR, and runs (interpreter) as Python runs its text, to 1e-12
    of the largest value (the same float64 operations, in the same order). Each loop has a variable of its own
    (`k0`, `k1`, ...): a variable that several loops bind keeps dead bindings in the IR after a loop over a tuple
    (test_the_loop_form_generates_the_hand_unrolled_code)."""
    rng = np.random.default_rng(57)
    for n in range(N_FUZZ):
        loop, hand = _draw(rng, 4)
        text = _fuzz_source(loop, "fzloop") + _fuzz_source(hand, "fzhand")
        module = _module(tmp_path, f"NDIM = 3\nT3 = {T3!r}\nM3 = {M3!r}\n\n\n" + text, f"fuzz_{n}")
        x = rng.uniform(-1.0, 1.0, (4, 3))
        assert _ir(module.fzloop) == _ir(module.fzhand), f"{loop}\n---\n{hand}"
        out = rng.uniform(-1.0, 1.0, (4, 3))
        want, fake = out.copy(), _PythonGk()
        ns = {"gk": fake, "NDIM": 3, "T3": T3, "M3": M3}
        exec(text, ns)
        for fake.thread in range(4):
            ns["fzloop"](x, want)
        gk.launch(module.fzloop, 4, x, out, backend="interp")
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-12 * np.max(np.abs(want)), err_msg=loop)


def test_the_fuzzer_draws_every_form():
    """The draws above cover each loop spelling and each statement kind."""
    rng = np.random.default_rng(57)
    text = "\n".join(_draw(rng, 4)[0] for _ in range(N_FUZZ))
    for spelled in ("range(3)", "range(NDIM)", "range(1, 3)", "range(2, -1, -1)", "(2, 0)", "range(len(T3))",
                    "] = ", "] += ", "out[i, k", "][m] * a[m]", "b[(k", "(a - b)[k", "c.y"):
        assert spelled in text, spelled
