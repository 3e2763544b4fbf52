"""Small vectors as parameters and results of @gk.func (session 58; frontend/vector_calls.py,
docs/kernel-language.md "Vectors through device functions"): a call passing vectors calls the function specialised
to their widths, a returned vector comes back as its components, so the scalariser sees kernel-level vectors
only. Checked against hand-inlined twins (bit for bit), NumPy, and check_grad (central differences in float64,
the dot-product test of reverse against forward tangents) on five ported kernels; the refusals at the call."""

import numpy as np
import pytest
from support import ported_hpc10_more as B
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad


@pytest.fixture(autouse=True)
def _interp(monkeypatch):
    on_interpreter(monkeypatch)


# ---- the language: parameters, results, nesting, early returns ---------------------------------------------------
@gk.func
def add(a, b):
    return a + b


@gk.func
def scaled(a, s):
    return a * s


@gk.func
def mid(a, b):
    return scaled(add(a, b), 0.5)  # a device function calling others with vectors


@gk.func
def clipped(a, cap):
    n = gk.length(a)
    if n > cap:  # an early return, as for numbers
        return a * (cap / n)
    return a


@gk.func
def gather(x, i):  # an array and a number in, a vector out
    return gk.vec3(x[i, 0], x[i, 1], x[i, 2])


@gk.kernel
def uses_functions(x, y, out):
    i = gk.tid()
    a = gather(x, i)
    b = gk.load_vec3(y, i)
    r = mid(a, b)
    gk.store_vec3(out, i, clipped(add(r, a), 1.5) + b)
    out[i, 0] += gk.dot(add(a, b), b) + scaled(a, 2.0).y


@gk.kernel
def uses_functions_by_hand(x, y, out):
    i = gk.tid()
    a = gk.vec3(x[i, 0], x[i, 1], x[i, 2])
    b = gk.load_vec3(y, i)
    r = (a + b) * 0.5
    t = r + a
    n = gk.length(t)
    c = t
    if n > 1.5:
        c = t * (1.5 / n)
    gk.store_vec3(out, i, c + b)
    out[i, 0] += gk.dot(a + b, b) + (a * 2.0).y


def _uses_functions_numpy(x, y):
    r = (x + y) * 0.5 + x
    n = np.linalg.norm(r, axis=1, keepdims=True)
    want = np.where(n > 1.5, r * (1.5 / n), r) + y
    want[:, 0] += ((x + y) * y).sum(1) + 2.0 * x[:, 1]
    return want


def test_vector_functions_run_as_their_hand_inlined_twin(rng):
    x, y = rng.uniform(-1.0, 1.0, (6, 3)), rng.uniform(-1.0, 1.0, (6, 3))
    out, twin = np.zeros((6, 3)), np.zeros((6, 3))
    gk.launch(uses_functions, 6, x, y, out)
    gk.launch(uses_functions_by_hand, 6, x, y, twin)
    np.testing.assert_array_equal(out, twin)  # the same scalar operations in the same order
    np.testing.assert_allclose(out, _uses_functions_numpy(x, y), rtol=1e-14, atol=1e-15)
    # both branches of clipped's early return are taken
    assert (np.linalg.norm(0.5 * (x + y) + x, axis=1) > 1.5).any() and (np.linalg.norm(0.5 * (x + y) + x, axis=1)
                                                                         < 1.5).any()
    check_grad(uses_functions, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(y, np.zeros_like(y)),
               gk.Duplicated(out, np.zeros_like(out)), dim=6)


# ---- Warp's spring force (NVIDIA/warp warp/sim/integrator_euler.py: eval_springs, its body as a function) -------
@gk.func
def spring_force(xi, xj, vi, vj, rest, ke, kd):
    xij = xi - xj
    vij = vi - vj
    length = gk.length(xij)
    direction = xij * (1.0 / length)
    c = length - rest
    dcdt = gk.dot(direction, vij)
    return direction * (ke * c + kd * dcdt)


@gk.kernel
def eval_springs(x, v, spring_indices, spring_rest_lengths, spring_stiffness, spring_damping, f):
    tid = gk.tid()
    i = spring_indices[tid * 2 + 0]
    j = spring_indices[tid * 2 + 1]
    fs = spring_force(gk.load_vec3(x, i), gk.load_vec3(x, j), gk.load_vec3(v, i), gk.load_vec3(v, j),
                      spring_rest_lengths[tid], spring_stiffness[tid], spring_damping[tid])
    for c in range(3):  # wp.atomic_sub(f, i, fs); wp.atomic_add(f, j, fs)
        gk.atomic_add(f, (i, c), -fs[c])
        gk.atomic_add(f, (j, c), fs[c])


def test_warp_eval_springs(rng):
    x, v = rng.uniform(-1.0, 1.0, (4, 3)), rng.uniform(-1.0, 1.0, (4, 3))
    idx = np.array([0, 1, 1, 2, 2, 3, 0, 3])
    rest, ke, kd = rng.uniform(0.5, 1.0, 4), rng.uniform(1.0, 2.0, 4), rng.uniform(0.1, 0.2, 4)
    f = np.zeros((4, 3))
    gk.launch(eval_springs, 4, x, v, idx, rest, ke, kd, f)
    want = np.zeros((4, 3))
    for s in range(4):
        i, j = idx[2 * s], idx[2 * s + 1]
        d = x[i] - x[j]
        n = np.linalg.norm(d)
        fs = d / n * (ke[s] * (n - rest[s]) + kd[s] * (d / n) @ (v[i] - v[j]))
        want[i] -= fs
        want[j] += fs
    np.testing.assert_allclose(f, want, rtol=1e-13, atol=1e-15)  # atomics may sum in another order
    D = gk.Duplicated
    check_grad(eval_springs, D(x, 0 * x), D(v, 0 * v), idx, D(rest, 0 * rest), D(ke, 0 * ke), D(kd, 0 * kd),
               D(f, 0 * f), dim=4)


# ---- Taichi's SPH (taichi-dev/taichi python/taichi/examples/simulation/pbf2d.py: spiky_gradient(r, h) takes and
# returns a vector, as there; the lambdas loop of substep); the component port of session 57 is its twin ---------
@gk.func
def spiky_gradient(r, h):
    result = gk.vec2(0.0, 0.0)
    r_len = gk.length(r)
    if 0 < r_len and r_len < h:
        x = (h - r_len) / (h * h * h)
        g_factor = B.SPIKY_GRAD_FACTOR * x * x
        result = r * g_factor / r_len
    return result


@gk.kernel
def pbf_lambdas(positions, particle_num_neighbors, particle_neighbors, lambdas):
    p_i = gk.tid()
    pos_i = gk.load_vec2(positions, p_i)
    grad_i = gk.vec2(0.0, 0.0)
    sum_gradient_sqr = 0.0
    density_constraint = 0.0
    for j in range(particle_num_neighbors[p_i]):
        p_j = particle_neighbors[p_i, j]
        if p_j < 0:
            break
        pos_ji = pos_i - gk.load_vec2(positions, p_j)
        grad_j = spiky_gradient(pos_ji, B.H_)
        grad_i += grad_j
        sum_gradient_sqr += gk.dot(grad_j, grad_j)
        density_constraint += B.poly6_value(gk.length(pos_ji), B.H_)
    density_constraint = (B.MASS * density_constraint / B.RHO0) - 1.0
    sum_gradient_sqr += gk.dot(grad_i, grad_i)
    lambdas[p_i] = (-density_constraint) / (sum_gradient_sqr + B.LAMBDA_EPSILON)


def test_taichi_pbf_lambdas_with_a_vector_spiky_gradient(rng):
    n = 5
    pos = rng.uniform(0.0, 2.0, (n, 2))
    num = np.full(n, n - 1, dtype=np.int64)
    nb = np.array([[j for j in range(n) if j != i] for i in range(n)], dtype=np.int64)
    nb[0, 2:] = -1  # the -1 padding `break` stops at
    out, twin = np.zeros(n), np.zeros(n)
    gk.launch(pbf_lambdas, n, pos, num, nb, out)
    gk.launch(B.pbf_lambdas, n, pos, num, nb, twin)
    np.testing.assert_array_equal(out, twin)
    d = np.linalg.norm(pos[:, None] - pos[None], axis=2)
    assert ((d > 0) & (d < B.H_)).any()  # the gradient's branch is taken
    check_grad(pbf_lambdas, gk.Duplicated(pos, 0 * pos), num, nb, gk.Duplicated(out, 0 * out), dim=n)


# ---- the CUDA samples' particles (NVIDIA/cuda-samples Samples/2_Concepts_and_Techniques/particles/
# particles_kernel_impl.cuh: collideSpheres(posA, posB, velA, velB, radiusA, radiusB, attraction) -> float3),
# all pairs instead of collideD's grid; an early return where the spheres do not touch -------------------------
@gk.func
def collide_spheres(pos_a, pos_b, vel_a, vel_b, radius_a, radius_b, attraction, params):
    rel_pos = pos_b - pos_a
    dist = gk.length(rel_pos)
    collide_dist = radius_a + radius_b
    if dist >= collide_dist:
        return gk.vec3(0.0)
    norm = rel_pos / dist
    rel_vel = vel_b - vel_a
    tan_vel = rel_vel - (gk.dot(rel_vel, norm) * norm)
    force = -params[B.SPRING] * (collide_dist - dist) * norm
    force += params[B.DAMPING] * rel_vel
    force += params[B.SHEAR] * tan_vel
    force += attraction * rel_pos
    return force


@gk.kernel
def collide_all(new_vel, pos, vel, params, n):
    i = gk.tid()
    p = gk.load_vec3(pos, i)
    v = gk.load_vec3(vel, i)
    force = gk.vec3(0.0, 0.0, 0.0)
    for j in range(n):
        if j != i:
            r = params[B.PARTICLE_RADIUS]
            force += collide_spheres(p, gk.load_vec3(pos, j), v, gk.load_vec3(vel, j), r, r, params[B.ATTRACTION],
                                     params)
    gk.store_vec3(new_vel, i, v + force)


@gk.kernel
def collide_all_components(new_vel, pos, vel, params, n):
    i = gk.tid()
    p = gk.load_vec3(pos, i)
    v = gk.load_vec3(vel, i)
    force = gk.vec3(0.0, 0.0, 0.0)
    for j in range(n):
        if j != i:
            r = params[B.PARTICLE_RADIUS]
            q = gk.load_vec3(pos, j)
            w = gk.load_vec3(vel, j)
            fx, fy, fz = B.collide_spheres(p.x, p.y, p.z, q.x, q.y, q.z, v.x, v.y, v.z, w.x, w.y, w.z, r, r,
                                           params[B.ATTRACTION], params)
            force += gk.vec3(fx, fy, fz)
    gk.store_vec3(new_vel, i, v + force)


def test_cuda_particles_collide_spheres(rng):
    n = 4
    pos, vel = rng.uniform(0.0, 0.1, (n, 3)), rng.uniform(-0.1, 0.1, (n, 3))
    params = np.zeros(20)
    params[[B.SPRING, B.DAMPING, B.SHEAR, B.ATTRACTION, B.PARTICLE_RADIUS]] = (0.5, 0.02, 0.1, 0.01, 0.03)
    d = np.linalg.norm(pos[:, None] - pos[None], axis=2)[np.triu_indices(n, 1)]
    assert (d < 0.06).any() and (d > 0.06).any()  # pairs that touch and pairs that do not
    assert np.abs(d - 0.06).min() > 1e-4  # none within the finite differences' reach of the contact
    out, twin = np.zeros((n, 3)), np.zeros((n, 3))
    gk.launch(collide_all, n, out, pos, vel, params, n)
    gk.launch(collide_all_components, n, twin, pos, vel, params, n)
    np.testing.assert_array_equal(out, twin)
    D = gk.Duplicated
    check_grad(collide_all, D(out, 0 * out), D(pos, 0 * pos), D(vel, 0 * vel), D(params, 0 * params), n, dim=n)


# ---- quaternions (NVIDIA/warp warp/native/quat.h: mul(quat, quat), quat_rotate; (x, y, z, w), w the real part) --
@gk.func
def qmul(a, b):
    u = gk.vec3(a.x, a.y, a.z)
    v = gk.vec3(b.x, b.y, b.z)
    xyz = a.w * v + b.w * u + gk.cross(u, v)
    return gk.vec4(xyz.x, xyz.y, xyz.z, a.w * b.w - gk.dot(u, v))


@gk.func
def rotate(q, v):
    r = qmul(qmul(q, gk.vec4(v.x, v.y, v.z, 0.0)), gk.vec4(-q.x, -q.y, -q.z, q.w))
    return gk.vec3(r.x, r.y, r.z)


@gk.kernel
def rotate_points(qs, vs, out):
    i = gk.tid()
    gk.store_vec3(out, i, rotate(gk.normalize(gk.load_vec4(qs, i)), gk.load_vec3(vs, i)))


def test_quaternion_rotation(rng):
    qs, vs = rng.uniform(-1.0, 1.0, (5, 4)), rng.uniform(-1.0, 1.0, (5, 3))
    out = np.zeros((5, 3))
    gk.launch(rotate_points, 5, qs, vs, out)
    q = qs / np.linalg.norm(qs, axis=1, keepdims=True)
    u, w = q[:, :3], q[:, 3:]
    t = 2.0 * np.cross(u, vs)
    np.testing.assert_allclose(out, vs + w * t + np.cross(u, t), rtol=1e-13, atol=1e-14)  # another formula's rounding
    check_grad(rotate_points, gk.Duplicated(qs, 0 * qs), gk.Duplicated(vs, 0 * vs), gk.Duplicated(out, 0 * out), dim=5)


# ---- Lennard-Jones (Mantevo miniMD ref/force_lj.cpp: ForceLJ::compute_fullneigh's pair force, sr6 = sr2^3,
# force = 48 sr6 (sr6 - 0.5) sr2, as a function of the separation returning the vector) ---------------------------
@gk.func
def lj_force(delta, epsilon, sigma, cutforcesq):
    rsq = gk.dot(delta, delta)
    if rsq >= cutforcesq:
        return gk.vec3(0.0, 0.0, 0.0)
    sr2 = sigma * sigma / rsq
    sr6 = sr2 * sr2 * sr2
    return delta * (48.0 * epsilon * sr6 * (sr6 - 0.5) * sr2 / (sigma * sigma))


@gk.kernel
def lj_forces(x, f, n, epsilon, sigma, cutforcesq):
    i = gk.tid()
    xi = gk.load_vec3(x, i)
    fi = gk.vec3(0.0)
    for j in range(n):
        if j != i:
            fi += lj_force(xi - gk.load_vec3(x, j), epsilon, sigma, cutforcesq)
    gk.store_vec3(f, i, fi)


def test_lennard_jones_pair_force(rng):
    n = 4
    x = np.array([[0.0, 0.0, 0.0], [1.1, 0.1, 0.0], [0.2, 1.2, 0.1], [3.0, 3.0, 3.0]]) + rng.uniform(-0.05, 0.05,
                                                                                                     (n, 3))
    f = np.zeros((n, 3))
    gk.launch(lj_forces, n, x, f, n, 1.0, 1.0, 6.25)
    want = np.zeros((n, 3))
    for i in range(n):
        for j in range(n):
            d = x[i] - x[j]
            rsq = d @ d
            if i != j and rsq < 6.25:
                sr6 = rsq ** -3
                want[i] += d * 48.0 * sr6 * (sr6 - 0.5) / rsq
    np.testing.assert_allclose(f, want, rtol=1e-13)
    assert (f[3] == 0.0).all() and (f[:3] != 0.0).all()  # outside the cutoff, and inside
    check_grad(lj_forces, gk.Duplicated(x, 0 * x), gk.Duplicated(f, 0 * f), n, gk.Active(1.0), gk.Active(1.0),
               6.25, dim=n)


# ---- backends: Numba, and the CUDA C source under g++ (hostcuda) -----------------------------------------------
def test_numba_runs_the_quaternion_rotation_as_the_interpreter(rng):
    qs, vs = rng.uniform(-1.0, 1.0, (3, 4)), rng.uniform(-1.0, 1.0, (3, 3))
    out, want = np.zeros((3, 3)), np.zeros((3, 3))
    gk.launch(rotate_points, 3, qs, vs, out, backend="cpu")
    gk.launch(rotate_points, 3, qs, vs, want, backend="interp")
    np.testing.assert_allclose(out, want, rtol=1e-15, atol=1e-16)  # one compiler may fuse a multiply-add


def test_hostcuda_runs_vector_functions_as_the_interpreter(rng):
    """The CUDA backend's printing of specialised vector device functions (their components as parameters and
    results), compiled by g++ and run on host threads (docs/hostcuda.md): the quaternion rotation's primal and
    the springs' reverse against the interpreter's."""
    from gradkern.backends.hostcuda import compiler
    if compiler() is None:
        pytest.skip("g++ is not on the PATH: backend hostcuda is unavailable")
    qs, vs = rng.uniform(-1.0, 1.0, (5, 4)), rng.uniform(-1.0, 1.0, (5, 3))
    out, want = np.zeros((5, 3)), np.zeros((5, 3))
    gk.launch(rotate_points, 5, qs, vs, out, backend="hostcuda")
    gk.launch(rotate_points, 5, qs, vs, want, backend="interp")
    # hostcuda compiles with contraction off (docs/hostcuda.md): the same operations in the same order
    np.testing.assert_array_equal(out, want)
    x, v = rng.uniform(-1.0, 1.0, (4, 3)), rng.uniform(-1.0, 1.0, (4, 3))
    idx = np.array([0, 1, 1, 2, 2, 3, 0, 3])
    rest, ke, kd = rng.uniform(0.5, 1.0, 4), rng.uniform(1.0, 2.0, 4), rng.uniform(0.1, 0.2, 4)
    df = rng.standard_normal((4, 3))
    results = []
    for backend in ("hostcuda", "interp"):
        shadows = [np.zeros_like(a) for a in (x, v, rest, ke, kd)]
        D = gk.Duplicated
        gk.autodiff(eval_springs, D(x.copy(), shadows[0]), D(v.copy(), shadows[1]), idx, D(rest, shadows[2]),
                    D(ke, shadows[3]), D(kd, shadows[4]), D(np.zeros((4, 3)), df.copy()), dim=4, backend=backend)
        results.append(shadows)
    for got, want in zip(*results):
        # each shadow element sums at most 4 springs' terms through atomics, whose order is the schedule's:
        # two orders of n terms differ by at most 2 (n - 1) u sum|t| (u = 2^-53), far below 1e-13 max|shadow|
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * float(np.max(np.abs(want))))


# ---- refused at the call, naming its line and the function, before any buffer is touched ------------------------
FUNCTIONS = ("@gk.func\ndef wcomp(q):\n    return q.w * 2.0\n\n\n@gk.func\ndef half(v):\n    return v * 0.5\n\n\n"
             "@gk.func\ndef nrm(v):\n    return gk.length(v)\n\n\n@gk.func\ndef rec(v):\n    return rec(v * 0.5)\n\n\n"
             "@gk.func\ndef either(v, s):\n    if s > 0.0:\n        return v\n    return gk.vec2(1.0, 2.0)\n\n\n"
             "@gk.func\ndef add2(u, v):\n    return u + v\n\n\n")  # 27 lines: the kernel's `def` is line 30
REFUSED = {
    "a vec3 where the body reads .w": ("out[i, 0] = wcomp(v)", r"in 'wcomp\(vec3\)', called here: a vec3 has no "
                                                          r"component w \(at [^)]*calls_\w+.py:6:12\)"),
    "a vec2 returned where a vec3 is stored": ("gk.store_vec3(out, i, half(gk.vec2(v.x, v.y)))",
                                               r"stores a vec3; got half\(gk.vec2\(v.x, v.y\)\)"),
    "a number where the body calls gk.length": ("out[i, 0] = nrm(v.x)", r"in 'nrm\(numbers\)', called here: "
                                                r"gk.length\(\) takes vectors; got v(.|\n)*a @gk.func's parameter is "
                                                r"a vector where its call passes one"),
    "recursion": ("u = rec(v)", r"in 'rec\(vec3\)', called here: recursive call to 'rec' is not supported"),
    "two widths on two paths": ("u = either(v, 1.0)",
                                r"in 'either\(vec3, number\)', called here: 'either' returns vec2 and vec3 on "
                                r"different paths"),
    "a vector result as a number": ("if half(v) > 0.0:\n        out[i, 0] = 1.0",
                                    r"'half\(v\)' gives a vec3 where a number is needed"),
    "in a conditional expression": ("u = half(v) if v.x > 0.0 else v", r"call to device function 'half' inside a "
                                                                      r"condition(.|\n)*assign its result to a local"),
    "argument count": ("u = add2(v)", r"'add2' takes 2 arguments, got 1"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refusals_at_the_call(tmp_path, case):
    import importlib.util
    body, message = REFUSED[case]
    name = "calls_" + "".join(c if c.isalnum() else "_" for c in case)
    path = tmp_path / f"{name}.py"
    path.write_text("import gradkern as gk\n\n\n" + FUNCTIONS + "@gk.kernel\ndef bad(a, out):\n    i = gk.tid()\n"
                    f"    v = gk.load_vec3(a, i)\n    {body}\n")
    a, out, da, dout = np.ones((3, 3)), np.zeros((3, 3)), np.zeros((3, 3)), np.ones((3, 3))
    with pytest.raises(gk.KernelSyntaxError, match=message) as info:  # at the decoration or at the launch
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        gk.autodiff(module.bad, gk.Duplicated(a, da), gk.Duplicated(out, dout), dim=3)
    assert f"{name}.py:40" in str(info.value).splitlines()[0], str(info.value)  # the call's line
    for got, want in ((a, 1.0), (out, 0.0), (da, 0.0), (dout, 1.0)):
        np.testing.assert_array_equal(got, want)
