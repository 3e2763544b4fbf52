"""gradkern's CuPy code paths on fakecupy, the NumPy-backed stand-in for CuPy (tests/support/fakecupy.py;
docs/hostcuda.md, "CuPy's paths on a stand-in"): CI has no CuPy, and hostcuda's arrays are NumPy's, so every
line of runtime/ and program/ that only a CuPy array takes ran only when a GPU was lent; the session-54 GPU
check found every CuPy launch broken by a NumPy-only `flags.aligned` read. Here the fake is installed as
`cupy` and a representative sample of test_gpu.py and test_gpu_programs.py runs on its arrays (launches route to
backend 'cuda', whose kernels g++ compiles and the host runs): primal, reverse with Active scalars (per-block
sums), forward, a program with host code and its host-write guard (fingerprints by the fused CUDA kernel),
checkpointed loops storing on the "device" and the host, a custom rule and the shipped rules over cupy.linalg and
cupy.fft, each against NumPy on Numba. Tolerances are test_gpu*.py's (these are their tests): float64 to 1e-12
relative for one launch, 1e-10 for programs; the fake's kernels are hostcuda's g++ build of the CUDA C (no FMA
contraction), so they round as Numba's code does but for the order of sums (atomics, per-thread partial sums),
libm's last bits, and the loops compounding them."""

from __future__ import annotations

import numpy as np
import pytest
from support.fakecupy import FAKE, installed

import gradkern as gk
from gpu import test_gpu as single
from gpu import test_gpu_programs as programs
from gradkern.runtime.arrays import is_cupy_array


@pytest.fixture(autouse=True)
def fake():
    with installed() as cupy:
        yield cupy


def test_the_fake_fails_where_cupy_fails(fake):
    """NumPy-only attributes and implicit conversions fail on the fake as they do on CuPy: what makes it catch
    the session-54 defects (binding read `flags.aligned`, replay `flags.num`)."""
    a = fake.arange(6, dtype=np.float64)
    assert not isinstance(a, np.ndarray) and is_cupy_array(a)
    assert (a.flags.c_contiguous, a.flags.f_contiguous, a.flags.owndata) == (True, True, True)
    assert not a[1:].flags.owndata and a[1:].base is a
    for name in ("aligned", "writeable", "num"):
        with pytest.raises(AttributeError):
            getattr(a.flags, name)
    with pytest.raises(AttributeError):
        a.ctypes  # noqa: B018 (the read is the test)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError):
        a + np.ones(6)
    with pytest.raises(AttributeError):
        fake.linalg.inv  # noqa: B018 (only what gradkern uses is there)
    b = fake.ndarray((2,), np.float64, a.data + 16, strides=(16,))  # MemoryPointer arithmetic, as shadows.py's
    np.testing.assert_array_equal(b.get(), [2.0, 4.0])
    b[1] = -1.0
    np.testing.assert_array_equal(a.get(), [0, 1, 2, 3, -1, 5])


def test_launches_on_fake_arrays_run_the_cuda_backend(fake):
    """The 'cuda' backend's path, NVRTC's place taken by the fake's RawModule: its kernels are the fake's."""
    from gradkern.backends import cuda
    from gradkern.kernels.blas import saxpy
    x, y = fake.arange(300, dtype=np.float64), fake.ones(300)
    gk.launch(saxpy, 300, 2.0, x, y)
    np.testing.assert_array_equal(y.get(), 2.0 * np.arange(300) + 1.0)
    assert cuda._kernels and all(type(k) is fake.RawKernel for k in cuda._kernels.values())


@pytest.mark.parametrize("name, dtype", [("matmul", "float64"), ("casts", "float32")])
def test_corpus_primal_on_fake_equals_cpu(name, dtype):
    case = single.CASES[name]
    cpu = single.corpus_args(case, dtype)
    dev = tuple(FAKE.to(a) for a in single.corpus_args(case, dtype))
    gk.launch(case.kernel, case.dim(cpu), *cpu)
    gk.launch(case.kernel, case.dim(cpu), *dev)
    for n, (g, c) in enumerate(zip(dev, cpu)):
        if isinstance(c, np.ndarray):
            single.assert_close(FAKE, g, c, f"{name}[{dtype}] argument {n}",
                                atol_scale=case.reduction or case.transcendental)


# Active scalars summed per block (saxpy's alpha, allen_cahn's c), in float64 and float32; a scatter
REVERSE = ["reverse/saxpy", "reverse/allen_cahn", "reverse/scatter_hist", "reverse/saxpy-float32"]


@pytest.mark.parametrize("label", REVERSE)
def test_reverse_on_fake_equals_cpu(label, monkeypatch):
    monkeypatch.setattr(single, "CUPY", FAKE)
    single.test_reverse_on_gpu_equals_cpu(label)


@pytest.mark.parametrize("label", ["reverse/allen_cahn"])  # (scatters: reverse/scatter_hist above)
def test_forward_mode_on_fake_equals_cpu(label, monkeypatch):
    monkeypatch.setattr(single, "CUPY", FAKE)
    single.test_forward_mode_on_gpu_equals_cpu(label)


def test_mixing_numpy_and_fake_cupy_is_refused(monkeypatch):
    monkeypatch.setattr(single, "CUPY", FAKE)
    single.test_mixing_numpy_and_cupy_is_refused()


@pytest.mark.parametrize("test", ["test_partial_overlap_of_device_views_is_refused", "test_jacobian_on_gpu",
                                  "test_split_reverse_on_gpu_equals_fused", "test_racy_reverse_is_refused_on_gpu",
                                  "test_launches_past_their_arrays_are_refused_on_gpu_with_buffers_unchanged"])
def test_launches_on_fake(test):
    getattr(single, test)(FAKE)


def test_program_on_fake_equals_cpu():
    programs.test_program_on_gpu_equals_cpu(FAKE)


@pytest.mark.parametrize("storage", ["device", "host"])
def test_checkpointed_loop_on_fake_equals_cpu(storage, monkeypatch):
    programs.test_checkpointed_loop_on_gpu_equals_cpu(storage, FAKE, monkeypatch)


def test_host_write_to_a_fake_device_array_is_refused():
    programs.test_host_write_to_a_device_array_is_refused(FAKE)


def test_host_write_between_launches_on_fake_is_refused():
    programs.test_host_write_between_launches_is_refused_whichever_launch_took_it("read only", FAKE)


def test_rule_writing_outside_its_writes_on_fake_is_refused():
    programs.test_rule_writing_outside_its_writes_on_a_device_is_refused(FAKE)


def test_custom_rule_in_a_program_on_fake_equals_cpu():
    """A custom rule's primal and reverse on device arrays (its array expressions are the fake module's), between
    kernel launches: the gradients of NumPy on Numba."""
    from program.test_rules import scale

    def prog(x, y, E, c):
        scale(x, y, c)
        gk.launch(gk.kernels.sum_squares, y.shape[0], y, E)
    r = np.random.default_rng(7)
    programs._same(FAKE, prog, [r.random(32), r.random(32), np.zeros(1)], (gk.Active(1.5),),
                   [np.zeros(32), np.zeros(32), np.ones(1)])


@pytest.mark.parametrize("rule", ["dense_solve", "spectral_derivative"])
def test_shipped_rules_over_fake_linalg_and_fft_equal_cpu(rule):
    """The shipped rules' CuPy branches (cupy.linalg.solve, cupy.fft), primal and reverse."""
    programs.test_shipped_rules_on_gpu_equal_cpu(rule, FAKE)


@pytest.mark.full  # ~4 s of CPU cold (the Thomas kernels on Numba and g++): the custom rule above runs in CI
def test_implicit_diffusion_with_rules_on_fake_equals_cpu():
    programs.test_implicit_diffusion_with_rules_on_gpu_equals_cpu("plain", FAKE)


@pytest.mark.parametrize("dtype, size", [("float64", 1001), ("int8", 7), ("bool", 3)])
def test_device_fingerprint_is_numpys(dtype, size, fake):
    """program/fingerprint.py's fused kernel (its host branch here) gives NumPy's value and sees a one-bit change."""
    from gradkern.program.fingerprint import device_print, fingerprint, settle_all
    a = (np.random.default_rng(size).standard_normal(size) * 10).astype(dtype)
    d = fake.asarray(a)
    assert fingerprint(d) == fingerprint(a)
    assert settle_all([device_print(d), device_print(d[: size // 2 + 1])]) == \
        [fingerprint(a), fingerprint(a[: size // 2 + 1])]
    raw = d.view(fake.uint8)
    for pos in {0, raw.size // 3, raw.size - 1}:
        raw[pos] ^= 4
        assert fingerprint(d) != fingerprint(a), pos
        raw[pos] ^= 4
