"""Small vectors (frontend/vectors.py): scalarised before lowering, so every
mode, both backends and the analyses see only scalars. Values against NumPy
run in the corpus (`vectors`); here: an n-body force kernel written with vec3
through check_grad in both modes, vector mode, float32, the scalarisation's
semantics (a swap reads old components, hoisted temporaries stay inside
their branch, `while` conditions are re-evaluated), and the errors."""

import numpy as np
import pytest
from support.corpus import _ref_vectors, vectors

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def nbody(pos, mass, force, eps):
    """force_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps^2)^(3/2), written as Warp users write it."""
    i = gk.tid()
    p = gk.load_vec3(pos, i)
    f = gk.vec3(0.0)
    for j in range(pos.shape[0]):
        d = gk.load_vec3(pos, j) - p
        r2 = gk.dot(d, d) + eps * eps
        f += d * (mass[j] / (r2 * gk.sqrt(r2)))
    gk.store_vec3(force, i, f)


def _nbody_reference(pos, mass, eps):
    d = pos[None, :, :] - pos[:, None, :]
    r2 = (d * d).sum(2) + eps * eps
    return (d * (mass[None, :] / (r2 * np.sqrt(r2)))[:, :, None]).sum(1)


def test_nbody_matches_numpy(rng):
    n = 10
    pos, mass = rng.random((n, 3)), rng.uniform(0.5, 1.5, n)
    for backend in ("interp", "cpu"):
        force = np.zeros((n, 3))
        gk.launch(nbody, n, pos, mass, force, 0.1, backend=backend)
        np.testing.assert_allclose(force, _nbody_reference(pos, mass, 0.1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_nbody_gradient_matches_finite_differences(rng, mode):
    n = 8
    report = check_grad(nbody, gk.Duplicated(rng.random((n, 3)), np.zeros((n, 3))),
                        gk.Duplicated(rng.uniform(0.5, 1.5, n), np.zeros(n)),
                        gk.Duplicated(np.zeros((n, 3)), rng.uniform(-1, 1, (n, 3))),
                        gk.Active(0.3), dim=n, mode=mode)
    assert report.ok and report.checked > 3


def test_vector_algebra_gradient_and_vector_mode(rng):
    n = 6
    a, b, out = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, 4))
    report = check_grad(vectors, gk.Duplicated(a, np.zeros((n, 3))), gk.Duplicated(b, np.zeros((n, 3))),
                        gk.Duplicated(out, rng.uniform(-1, 1, (n, 4))), dim=n)
    assert report.ok and report.checked > 3
    seeds = [[rng.uniform(-1, 1, x.shape) for x in (a, b, out)] for _ in range(2)]
    batch = [[s.copy() for s in lane] for lane in seeds]
    gk.autodiff(vectors, *(gk.BatchDuplicated(x.copy(), tuple(lane[k] for lane in batch))
                           for k, x in enumerate((a, b, out))), dim=n)
    for lane, seed in enumerate(seeds):
        one = [s.copy() for s in seed]
        gk.autodiff(vectors, *(gk.Duplicated(x.copy(), d) for x, d in zip((a, b, out), one)), dim=n)
        for got, want in zip(batch[lane], one):
            np.testing.assert_array_equal(got, want)


def test_float32_vectors_stay_float32(rng):
    n = 16
    a, b = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, 3))
    want = np.zeros((n, 4))
    _ref_vectors(a, b, want)
    for backend in ("interp", "cpu"):
        out = np.zeros((n, 4), np.float32)
        gk.launch(vectors, n, a.astype(np.float32), b.astype(np.float32), out, backend=backend)
        # cross products cancel: an absolute bound, a few hundred float32 ulps of the largest value
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-4 * float(np.abs(want).max()))


@gk.kernel
def semantics(a, out, m):
    i = gk.tid()
    p = gk.load_vec3(a, i)
    p = gk.vec3(p.z, p.x, p.y)  # a rotation: every old component read first
    q = gk.vec2(p.x, p.y)
    if i < m:
        q += gk.vec2(gk.length(p + p), 1.0) * 0.5  # hoisted temporaries stay inside the branch
    steps = 0
    r = p
    while gk.length(r) > 0.25 and steps < 50:  # re-evaluated every iteration
        r = r * 0.5
        steps += 1
    out[i, 0] = q.x
    out[i, 1] = q[1]
    out[i, 2] = steps + r.z


def test_scalarisation_keeps_python_semantics(rng):
    n, m = 9, 4
    a = rng.uniform(0.5, 2.0, (n, 3))
    want = np.zeros((n, 3))
    for i in range(n):
        p = np.array([a[i, 2], a[i, 0], a[i, 1]])
        q = p[:2].copy()
        if i < m:
            q += np.array([np.linalg.norm(2 * p), 1.0]) * 0.5
        r, steps = p.copy(), 0
        while np.linalg.norm(r) > 0.25 and steps < 50:
            r, steps = r * 0.5, steps + 1
        want[i] = q[0], q[1], steps + r[2]
    for backend in ("interp", "cpu"):
        out = np.zeros((n, 3))
        gk.launch(semantics, n, a, out, m, backend=backend)
        np.testing.assert_allclose(out, want, rtol=1e-14)


@gk.func
def spring(x, y, z, k):
    d = gk.vec3(x, y, z)
    return k * gk.dot(d, d)


@gk.kernel
def uses_spring(a, out):
    i = gk.tid()
    out[i] = spring(a[i, 0], a[i, 1], a[i, 2], 0.5)


def test_vectors_inside_device_functions(rng):
    a = rng.random((5, 3))
    out = np.zeros(5)
    gk.launch(uses_spring, 5, a, out)
    np.testing.assert_allclose(out, 0.5 * (a * a).sum(1), rtol=1e-15)


def test_host_side_functions():
    u, v = gk.vec3(1.0, 2.0, 3.0), gk.vec3(0.0, 1.0, 0.0)
    assert gk.dot(u, v) == 2.0 and gk.length(gk.vec2(3.0, 4.0)) == 5.0
    np.testing.assert_array_equal(gk.cross(gk.vec3(1.0, 0.0, 0.0), v), [0.0, 0.0, 1.0])
    a = np.zeros((2, 3))
    gk.store_vec3(a, 1, u)
    np.testing.assert_array_equal(gk.load_vec3(a, 1), u)


def _kernel_from(tmp_path, body: str, params: str = "a, out"):
    """A kernel defined in a file (kernels need their source)."""
    import importlib.util
    path = tmp_path / "bad_vectors.py"
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    path.write_text(f"import gradkern as gk\n\n\n@gk.func\ndef helper(x):\n    return x\n\n\n"
                    f"@gk.kernel\ndef bad({params}):\n    i = gk.tid()\n{lines}\n")
    spec = importlib.util.spec_from_file_location("bad_vectors", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.bad


ERRORS = {
    "vector as a number": ("v = gk.load_vec3(a, i)\nif v > 0.0:\n    out[i, 0] = 1.0",
                           "is a vec3 where a number is needed"),
    "vector stored": ("v = gk.load_vec3(a, i)\nout[i, 0] = v", "a vec3 cannot be stored here"),
    "widths differ": ("v = gk.vec3(1.0, 2.0, 3.0)\nw = gk.vec2(1.0, 2.0)\nu = v + w", "vec3 and vec2 operands"),
    "one local, two widths": ("v = gk.vec3(1.0, 2.0, 3.0)\nv = gk.vec2(1.0, 2.0)", "holds a vec3 and a vec2"),
    "parameter assigned": ("out = gk.vec3(1.0, 2.0, 3.0)", "parameter 'out' is assigned a vec3"),
    "no such component": ("v = gk.vec2(1.0, 2.0)\nout[i, 0] = v.z", "has no component z"),
    "store width": ("gk.store_vec3(out, i, gk.vec2(1.0, 2.0))", "stores a vec3"),
    # a @gk.func takes vectors since session 58 (helper(v) is then a vec3, tests/frontend/test_vector_functions.py):
    # the refusal stays for the functions that are not device functions
    "vector to a function": ("v = gk.vec3(1.0, 2.0, 3.0)\nout[i, 0] = abs(v)", "functions take numbers"),
    "device function's vector stored": ("v = gk.vec3(1.0, 2.0, 3.0)\nout[i, 0] = helper(v)",
                                        "a vec3 cannot be stored here"),
    "constructor arity": ("v = gk.vec3(1.0, 2.0)", r"vec3\(\) takes 3 components"),
    "vector power": ("v = gk.vec3(1.0, 2.0, 3.0)\nw = v ** 2.0", "vectors take \\+ - \\* / elementwise"),
    "number assigned to a vector": ("v = gk.vec3(1.0, 2.0, 3.0)\nv = 2.0", "is a vec3 but is assigned a number"),
    # Taichi's pbf2d spiky_gradient(r, h) takes a vector (session 57): a parameter is a number or an array, and the
    # hint spells the components (the kernel's own parameter here stands for a device function's)
    "parameter used as a vector": ("out[i, 0] = gk.length(a)",
                                   r"takes vectors; got a(.|\n)*'a' is a parameter(.|\n)*v = gk.vec2\(ax, ay\)"),
    # a loop over the components (`for c in range(3): out[i, c] = v[c]`) is unrolled since session 57
    # (tests/frontend/test_vector_loops.py); over a run-time range it cannot be, and the message says what can
    "vector indexed in a run-time loop": ("v = gk.load_vec3(a, i)\nfor c in range(a.shape[1]):\n    out[i, c] = v[c]",
                                          r"indexes vector 'v' by 'c', so it is unrolled, which needs constant "
                                          r"bounds: range\(a.shape\[1\]\) is not(.|\n)*range\(<constant>\)"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_construct(tmp_path, case):
    body, message = ERRORS[case]
    a, out = np.ones((3, 3)), np.zeros((3, 3))
    with pytest.raises(gk.KernelSyntaxError, match=message):
        gk.launch(_kernel_from(tmp_path, body), 3, a, out)
    np.testing.assert_array_equal(out, 0.0)
    np.testing.assert_array_equal(a, 1.0)
