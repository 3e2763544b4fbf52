"""Red-team of vectors through device functions (session 58; docs/kernel-language.md "Vectors through device
functions"): many calls of one function in a kernel (vec2 and vec3), calls in loops with run-time bounds, unrolled
and `while` loops, branches, after `continue`/`break`, inside another function's loop, early returns, `for v in
(a, b)`, local arrays and tables, atomics and writes inside the function, float32; each kernel run bit for bit
against its hand-inlined twin and its gradient checked by check_grad (central differences in float64, the
dot-product test of reverse against forward tangents); the race analysis sees a write done inside the function as
inlined; a function defined after the kernel, keyword arguments."""

import importlib.util

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad


@pytest.fixture(autouse=True)
def _interp(monkeypatch):
    on_interpreter(monkeypatch)


@gk.func
def sq(a):
    t = a * a  # the same local name in every specialisation and call
    return t + a


@gk.func
def comb(a, s):
    t = a * s
    return t - a


@gk.func
def early(a, b):
    if a.x > 0.5:
        return a
    for k in range(3):  # a vector parameter reassigned in a loop, a return inside it
        a = a * 0.5 + b
        if a.y > 1.0:
            return b - a
    return a + b


@gk.func
def both(a, b):
    s = gk.vec3(0.0)
    for v in (a, b, a * 2.0):  # a loop over vectors calling a vector function
        s = s + sq(v)
    return s


W = (0.25, 0.5, 0.25)


@gk.func
def tabled(a, cnt):
    buf = gk.local((3,), gk.float64)
    for k in range(3):
        buf[k] = a[k] * W[k]
    gk.atomic_add(cnt, 0, a.x)
    return gk.vec3(buf[0], buf[1], buf[2]) + a


@gk.kernel
def calls(x, y, out, cnt, m):
    i = gk.tid()
    a = gk.load_vec3(x, i)
    b = gk.load_vec3(y, i)
    d = sq(gk.vec2(a.x, b.y))  # vec2 and vec3 specialisations in one kernel
    acc = sq(a) + sq(b) + sq(sq(a)) + gk.vec3(d.x, d.y, 3.0)
    for k in range(m):
        if k == 2:
            continue
        acc += comb(a, float(k))
        if k > 3:
            break
    for k in range(3):
        acc = acc + sq(b) * float(k)
    j = 0
    while j < 2:
        acc = acc + comb(acc, 0.5)
        j += 1
    if a.x > 0.0:
        acc = sq(acc) * 0.1
    elif comb(a, 2.0).y > 0.0:
        acc = -comb(acc, -1.0)
    acc += early(a, b) + both(a, b) + tabled(b, cnt)
    gk.store_vec3(out, i, acc)


@gk.kernel
def calls_by_hand(x, y, out, cnt, m):
    i = gk.tid()
    a = gk.load_vec3(x, i)
    b = gk.load_vec3(y, i)
    v = gk.vec2(a.x, b.y)
    d = v * v + v
    aa = a * a + a
    acc = aa + (b * b + b) + (aa * aa + aa) + gk.vec3(d.x, d.y, 3.0)
    for k in range(m):
        if k == 2:
            continue
        acc += a * float(k) - a
        if k > 3:
            break
    for k in range(3):
        acc = acc + (b * b + b) * float(k)
    j = 0
    while j < 2:
        acc = acc + (acc * 0.5 - acc)
        j += 1
    if a.x > 0.0:
        acc = (acc * acc + acc) * 0.1
    elif (a * 2.0 - a).y > 0.0:
        acc = -(acc * -1.0 - acc)
    e = a + b
    done = False
    if a.x > 0.5:
        e = a
        done = True
    u = a
    for k in range(3):
        if not done:
            u = u * 0.5 + b
            if u.y > 1.0:
                e = b - u
                done = True
    if not done:
        e = u + b
    c = a * 2.0
    s = (a * a + a) + (b * b + b) + (c * c + c)
    gk.atomic_add(cnt, 0, b.x)
    acc += e + (gk.vec3(0.0) + s) + (gk.vec3(b.x * 0.25, b.y * 0.5, b.z * 0.25) + b)
    gk.store_vec3(out, i, acc)


def test_calls_in_loops_branches_and_functions_run_as_the_hand_inlined_twin(rng):
    x, y = rng.uniform(-1.0, 1.0, (4, 3)), rng.uniform(-1.0, 1.0, (4, 3))
    x[0, 0], x[1, :2] = 0.7, (-0.3, 0.9)  # early's first return, and its return inside the loop
    outs, cnts = [np.zeros((4, 3)), np.zeros((4, 3))], [np.zeros(1), np.zeros(1)]
    for k, out, cnt in zip((calls, calls_by_hand), outs, cnts):
        gk.launch(k, 4, x, y, out, cnt, 5)  # k = 2 continues, k = 4 breaks
    np.testing.assert_array_equal(outs[0], outs[1])  # the same scalar operations in the same order
    np.testing.assert_array_equal(cnts[0], cnts[1])
    check_grad(calls, gk.Duplicated(x, 0 * x), gk.Duplicated(y, 0 * y), gk.Duplicated(outs[0], 0 * outs[0]),
               cnts[0], 5, dim=4)


@gk.func
def spring(xi, xj, k):
    d = xi - xj
    n = gk.length(d)
    return d * (k * (n - 1.0) / n)


@gk.kernel
def springs(x, y, out, k):
    i = gk.tid()
    a = gk.load_vec3(x, i)
    b = gk.load_vec3(y, i)
    gk.store_vec3(out, i, spring(a, b, k) + spring(b, a * 0.5, 2.0))


@gk.kernel
def springs_by_hand(x, y, out, k):
    i = gk.tid()
    a = gk.load_vec3(x, i)
    b = gk.load_vec3(y, i)
    d = a - b
    n = gk.length(d)
    f = d * (k * (n - 1.0) / n)
    e = a * 0.5
    d2 = b - e
    n2 = gk.length(d2)
    gk.store_vec3(out, i, f + d2 * (2.0 * (n2 - 1.0) / n2))


def test_float32_locals_follow_the_arguments_and_every_mode_matches_the_twin(rng):
    x, y = rng.uniform(-1.0, 1.0, (5, 3)), rng.uniform(-1.0, 1.0, (5, 3))
    got = [np.zeros((5, 3), np.float32) for _ in range(2)]
    for k, out in zip((springs, springs_by_hand), got):
        gk.launch(k, 5, x.astype(np.float32), y.astype(np.float32), out, np.float32(1.5))
    np.testing.assert_array_equal(got[0], got[1])  # float32 throughout: a float64 local would round otherwise
    tangents, batches = [], []
    dx, dy = rng.uniform(-1.0, 1.0, (5, 3)), rng.uniform(-1.0, 1.0, (5, 3))
    for k in (springs, springs_by_hand):
        dout = np.zeros((5, 3))
        gk.autodiff(k, gk.Duplicated(x.copy(), dx.copy()), gk.Duplicated(y.copy(), dy.copy()),
                    gk.Duplicated(np.zeros((5, 3)), dout), 1.5, mode=gk.Forward, dim=5)
        dxs, dys = (np.zeros((5, 3)), np.zeros((5, 3))), (np.zeros((5, 3)), np.zeros((5, 3)))
        gk.autodiff(k, gk.BatchDuplicated(x.copy(), dxs), gk.BatchDuplicated(y.copy(), dys),
                    gk.BatchDuplicated(np.zeros((5, 3)), (np.ones((5, 3)), dx.copy())), 1.5, dim=5)
        tangents.append(dout)
        batches.append(np.concatenate(dxs + dys))
    np.testing.assert_array_equal(*tangents)
    np.testing.assert_array_equal(*batches)
    check_grad(springs, gk.Duplicated(x, 0 * x), gk.Duplicated(y, 0 * y), gk.Duplicated(0 * x, 0 * x),
               gk.Active(1.5), dim=5)


@gk.func
def put(out, i, v):
    out[i, 0] = v.x * v.y
    return v * 2.0


@gk.kernel
def writes_own(x, out):
    i = gk.tid()
    out[i, 2] = put(out, i, gk.load_vec3(x, i)).z


@gk.kernel
def writes_shared(x, out):
    i = gk.tid()
    out[i, 2] = put(out, 0, gk.load_vec3(x, i)).z  # every thread writes out[0, 0] inside put


def test_writes_inside_a_vector_function_are_analysed_as_inlined(rng):
    x = rng.uniform(-1.0, 1.0, (4, 3))
    out, dx = np.zeros((4, 3)), np.zeros((4, 3))
    gk.autodiff(writes_own, gk.Duplicated(x, dx), gk.Duplicated(out, np.ones((4, 3))), dim=4)  # thread-own
    np.testing.assert_array_equal(out[:, 0], x[:, 0] * x[:, 1])
    np.testing.assert_array_equal(dx, np.c_[x[:, 1], x[:, 0], np.full(4, 2.0)])  # d(x0 x1) = (x1, x0), d(2 x2)
    out, dx, dout = np.zeros((4, 3)), np.zeros((4, 3)), np.ones((4, 3))
    with pytest.raises(gk.RaceError, match=r"writes out\[_gk\w*put_i, 0\]"):
        gk.autodiff(writes_shared, gk.Duplicated(x, dx), gk.Duplicated(out, dout), dim=4)
    for got, want in ((out, 0.0), (dx, 0.0), (dout, 1.0)):
        np.testing.assert_array_equal(got, want)


LATER = """import gradkern as gk


@gk.kernel
def uses_later(a, out):
    i = gk.tid()
    gk.store_vec3(out, i, later(gk.load_vec3(a, i)))


@gk.kernel
def by_keyword(a, out):
    i = gk.tid()
    gk.store_vec3(out, i, later(v=gk.load_vec3(a, i)))


@gk.func
def later(v):
    return v * 2.0
"""


def test_a_vector_function_defined_after_the_kernel_and_keyword_arguments(tmp_path):
    path = tmp_path / "vec_later.py"
    path.write_text(LATER)
    spec = importlib.util.spec_from_file_location("vec_later", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # was: "gk.store_vec3 stores a vec3; got later(...)" at the decoration
    a, out = np.arange(6.0).reshape(2, 3), np.zeros((2, 3))
    gk.launch(module.uses_later, 2, a, out)
    np.testing.assert_array_equal(out, 2.0 * a)
    out, da, dout = np.zeros((2, 3)), np.zeros((2, 3)), np.ones((2, 3))
    with pytest.raises(gk.KernelSyntaxError, match=r"vec_later.py:13:\d+ \(in by_keyword\): keyword arguments are "
                                                   r"not supported in calls of device functions(.|\n)*pass 'later' "
                                                   r"its 1 arguments by position"):
        gk.autodiff(module.by_keyword, gk.Duplicated(a, da), gk.Duplicated(out, dout), dim=2)
    for got, want in ((a, np.arange(6.0).reshape(2, 3)), (out, 0.0), (da, 0.0), (dout, 1.0)):
        np.testing.assert_array_equal(got, want)


VX = """import gradkern as gk


@gk.func
def vx(v):
    return v * v.x


@gk.kernel
"""
MISLEADING = {  # each in a file of its own: a kernel may be refused at its decoration
    "mixed_loop": "def mixed_loop(a, out):\n    i = gk.tid()\n    v = gk.load_vec3(a, i)\n    for u in (v, 1.0):\n"
                  "        out[i, 0] += u.x\n",
    "array_as_vector": "def array_as_vector(a, out):\n    i = gk.tid()\n    gk.store_vec3(out, i, vx(a))\n"}


@pytest.mark.parametrize("kernel, line, message", [
    ("mixed_loop", 14, r"'1.0.x': a number has no component x(.|\n)*hint: a loop over a tuple binds its variable to "
                       r"each element in turn"),  # was "'Constant' is not supported in gradkern kernels"
    ("array_as_vector", 12, r"stores a vec3; got vx\(a\), a number(.|\n)*hint: 'vx' returns numbers where its call "
                            r"passes no vector"),
])
def test_refusals_that_misled_now_say_what_came(tmp_path, kernel, line, message):
    path = tmp_path / f"vec_{kernel}.py"
    path.write_text(VX + MISLEADING[kernel])
    a, out, da, dout = np.ones((2, 3)), np.zeros((2, 3)), np.zeros((2, 3)), np.ones((2, 3))
    with pytest.raises(gk.KernelSyntaxError, match=message) as info:  # at the decoration or at the launch
        spec = importlib.util.spec_from_file_location(f"vec_{kernel}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        gk.autodiff(getattr(module, kernel), gk.Duplicated(a, da), gk.Duplicated(out, dout), dim=2)
    assert f"vec_{kernel}.py:{line}:" in str(info.value).splitlines()[0], str(info.value)
    for got, want in ((a, 1.0), (out, 0.0), (da, 0.0), (dout, 1.0)):
        np.testing.assert_array_equal(got, want)


ORDER = """import gradkern as gk


@gk.func
def put(out, i, v):
    out[i, 0] = 10.0
    return v * 2.0


@gk.func
def nput(out, i, s):
    out[i, 0] = 10.0
    return s * 2.0


@gk.func
def rd(out, i):
    return out[i, 0]


@gk.kernel
"""
READ_AND_WRITTEN = {  # Python reads out[i, 0] before the call; the inlined call ran first: 12.0, not 2.0
    "vector": "def order(x, out):\n    i = gk.tid()\n    v = gk.load_vec3(x, i)\n"
              "    out[i, 1] = out[i, 0] + put(out, i, v).x\n",
    "number": "def order(x, out):\n    i = gk.tid()\n    out[i, 1] = out[i, 0] + nput(out, i, x[i, 0])\n",
    "augmented": "def order(x, out):\n    i = gk.tid()\n    out[i, 0] += put(out, i, gk.load_vec3(x, i)).y\n",
    "read in a call": "def order(x, out):\n    i = gk.tid()\n"
                      "    out[i, 1] = rd(out, i) + put(out, i, gk.load_vec3(x, i)).x\n"}  # put is hoisted before rd


@pytest.mark.parametrize("case", list(READ_AND_WRITTEN))
def test_a_call_writing_an_array_its_statement_reads_is_refused(tmp_path, case):
    path = tmp_path / f"order_{case.replace(' ', '_')}.py"
    path.write_text(ORDER + READ_AND_WRITTEN[case])
    x, out, dx, dout = np.ones((2, 3)), np.zeros((2, 3)), np.zeros((2, 3)), np.ones((2, 3))
    message = r"'n?put' writes 'out', which its statement also reads \('(out\[i, 0\]|rd\(out, i\))'\)(.|\n)*call it in"
    with pytest.raises(gk.KernelSyntaxError, match=message):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        gk.autodiff(module.order, gk.Duplicated(x, dx), gk.Duplicated(out, dout), dim=2)
    for got, want in ((x, 1.0), (out, 0.0), (dx, 0.0), (dout, 1.0)):
        np.testing.assert_array_equal(got, want)
