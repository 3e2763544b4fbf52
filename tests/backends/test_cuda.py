"""The CUDA backend (backends/cuda.py) without a GPU: every kernel the test
suite runs, in every mode, generates CUDA C that nvcc compiles to PTX for sm_90
(one unit to cubins for sm_80 and sm_90); the helpers keep Python's semantics (checked on the host through nvcc);
the runtime refuses GPU requests clearly when CuPy is missing."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from frontend.test_bitwise import python_shift
from support.signatures import all_signatures

import gradkern as gk
from gradkern.backends.cuda import PRELUDE

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH")


@functools.cache
def generated() -> dict[str, str]:
    """label/role -> CUDA translation unit, for every signature of the suite."""
    out = {}
    for s in all_signatures():
        ins = gk.inspect(s.kernel, *s.args, dim=s.dim, mode=s.mode, backend="cuda")
        assert ins.sources, s.label
        for role, src in ins.sources.items():
            out[f"{s.label}/{role}"] = src
    return out


def bundle(sources: dict[str, str]) -> str:
    """All translation units as one: the prelude once, each entry renamed apart
    (nvcc's start-up dominates one compile per kernel)."""
    parts = [PRELUDE]
    for n, (label, src) in enumerate(sorted(sources.items())):
        assert src.count(PRELUDE) == 1, label
        body = src.replace(PRELUDE, "")
        entry = re.search(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', body).group(1)
        parts.append(f"// ---- {label}\n" + body.replace(f" {entry}(", f" {entry}_{n}("))
    return "\n".join(parts)


def nvcc(tmp_path, source: str, *flags: str) -> subprocess.CompletedProcess:
    path = tmp_path / "kernels.cu"
    path.write_text(source)
    return subprocess.run([NVCC, *flags, str(path)], capture_output=True, text=True, cwd=tmp_path)


def test_every_signature_and_mode_generates_cuda():
    src = generated()
    roles = {label.rsplit("/", 1)[1] for label in src}
    assert {"primal", "race_check", "fused", "augmented_primal", "reverse", "count", "gather", "forward_mode"} <= roles
    assert any("_x2_" in text for text in src.values())  # vector-mode kernels are among them
    assert len(src) > 250
    for label, text in src.items():
        assert 'extern "C" __global__' in text, label


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("half", [0, 1])
def test_generated_cuda_compiles_with_nvcc(tmp_path, half):
    """Every generated kernel through nvcc's front end and NVVM to PTX for sm_90 (the H100/H200 the project
    runs on), in two halves that CI's two workers compile side by side. PTX, not a cubin: everything the
    generated C can get wrong (syntax, types, overloads, intrinsics, atomics for the architecture) fails in
    this step, and ptxas's register allocation of the bundle was two thirds of its time (38 s of 58 per
    half, session 39); ptxas assembles a single unit for sm_80 and sm_90 below. The generated C uses
    nothing architecture-specific (double atomicAdd needs sm_60)."""
    sources = dict(sorted(generated().items())[half::2])
    result = nvcc(tmp_path, bundle(sources), "-arch=sm_90", "--ptx", "-o", "kernels.ptx")
    assert result.returncode == 0, result.stderr[-6000:]
    assert ".entry" in (tmp_path / "kernels.ptx").read_text()


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_single_translation_unit_compiles_as_generated(tmp_path, arch):
    """What NVRTC gets at run time: one self-contained unit, no bundling."""
    src = generated()["reverse/allen_cahn/gather"]
    result = nvcc(tmp_path, src, f"-arch={arch}", "-cubin", "-o", "k.cubin")
    assert result.returncode == 0, result.stderr[-4000:]


HOST_CHECK = r"""
#include <cstdio>
int main() {
    long long ia[] = {7, -7, 7, -7, 0, 5};
    long long ib[] = {2, 2, -2, -2, 3, 5};
    for (int k = 0; k < 6; ++k)
        printf("i %lld %lld %lld %lld\n", ia[k], ib[k], _gkb_floordiv(ia[k], ib[k]), _gkb_mod(ia[k], ib[k]));
    double fa[] = {7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1e-300, 3.0};
    double fb[] = {2.0, 2.0, -2.0, -2.0, 3.0, 3.0, -1.0, 0.1};
    for (int k = 0; k < 8; ++k)
        printf("f %.17g %.17g %.17g %.17g\n", fa[k], fb[k], _gkb_floordiv(fa[k], fb[k]), _gkb_mod(fa[k], fb[k]));
    float ga[] = {7.5f, -7.5f, 2.5f};
    float gb[] = {2.0f, 2.0f, -0.75f};
    for (int k = 0; k < 3; ++k)
        printf("g %.9g %.9g %.9g %.9g\n", ga[k], gb[k], _gkb_floordiv(ga[k], gb[k]), _gkb_mod(ga[k], gb[k]));
    printf("p %.17g %.17g %lld\n", _gkb_powi(1.5, 3LL), _gkb_powi(2.0, -2LL), _gkb_powi(3LL, 4LL));
    printf("m %g %g\n", _gkb_min(2.0, 2.0), _gkb_max(-1.0, 3.0));
    long long sa[] = {1, -1, 5, -5, 4611686018427387904LL, 3, -3, 7, 7, 123456789};
    long long sb[] = {0, 1, 63, 63, 1, 64, 64, -1, 70, 17};
    for (int k = 0; k < 10; ++k)
        printf("s %lld %lld %lld %lld\n", sa[k], sb[k], _gkb_shl(sa[k], sb[k]), _gkb_shr(sa[k], sb[k]));
    return 0;
}
"""


@needs_nvcc
def test_helpers_keep_python_semantics(tmp_path):
    """Floor division, modulo, integer powers and shifts behave as Python's (as gradkern defines shifts by
    amounts outside [0, 64)) when run on the host."""
    result = nvcc(tmp_path, PRELUDE + HOST_CHECK, "-o", "check")
    assert result.returncode == 0, result.stderr[-4000:]
    out = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    seen = 0
    for kind, *vals in rows:
        if kind == "i":
            a, b, q, r = map(int, vals)
            assert (q, r) == (a // b, a % b)
            seen += 1
        elif kind in ("f", "g"):
            a, b, q, r = map(float, vals)
            t = np.float32 if kind == "g" else float
            assert q == t(a) // t(b) and r == t(a) % t(b), (a, b, q, r)
            assert np.copysign(1, r) == np.copysign(1, t(a) % t(b))
            seen += 1
        elif kind == "s":  # shifts as tests/frontend/test_bitwise.py documents them
            a, b, left, right = map(int, vals)
            assert left == python_shift(a, b, True) and right == python_shift(a, b, False), (a, b)
            seen += 1
        elif kind == "p":
            assert float(vals[0]) == 1.5 ** 3 and float(vals[1]) == 2.0 ** -2 and int(vals[2]) == 81
    assert seen == 27


def test_names_that_are_c_keywords_are_renamed():
    @gk.kernel
    def keywords(double, int_, new):
        i = gk.tid()
        auto = double[i] * 2.0
        int_[i] = auto + new

    src = gk.inspect(keywords, np.ones(4), np.ones(4), 1.5, backend="cuda").source
    assert "_gku_double[" in src and "_gku_auto" in src and "_gku_new" in src
    assert re.search(r"\bdouble\[", src) is None


def test_strided_arrays_take_strides_and_contiguous_ones_do_not():
    @gk.kernel
    def copy2(a, b):
        i, j = gk.tid()
        b[i, j] = a[i, j]

    a = np.ones((4, 6))
    contiguous = gk.inspect(copy2, a, np.ones((4, 6)), backend="cuda").source
    strided = gk.inspect(copy2, a[:, ::2], np.ones((4, 3)), backend="cuda").source
    assert "_gkb_a_s0" not in contiguous and "_gkb_a_n1 + " in contiguous
    assert "_gkb_a_s0" in strided and "_gkb_b_s0" not in strided
    assert "const double* __restrict__ a" in contiguous and "double* __restrict__ b" in contiguous


def test_shared_adjoints_use_atomics_and_own_ones_plain_adds():
    from gradkern.kernels.blas import matvec, saxpy
    A, x, y = np.ones((4, 3)), np.ones(3), np.ones(4)
    src = gk.inspect(matvec, gk.Duplicated(A, A.copy()), gk.Duplicated(x, x.copy()), gk.Duplicated(y, y.copy()),
                     dim=4, mode=gk.Reverse, backend="cuda").source
    assert re.search(r"_gkb_atomic_add\(&_gk_d_x\[", src)  # x[j] is read by every thread
    assert not re.search(r"_gkb_atomic_add\(&_gk_d_A\[", src)  # row i of A is thread i's own
    src = gk.inspect(saxpy, gk.Active(2.0), gk.Duplicated(x, x.copy()), gk.Duplicated(x + 1, x.copy()),
                     mode=gk.Reverse, backend="cuda").source
    # only the Active scalar's sum, in a register per thread and once per block
    assert src.count("_gkb_atomic_add(&") == 0 and src.count("_gkb_block_add(&") == 1


@gk.kernel
def _summed_mix(x, y, out, hist, counts):
    i = gk.tid()
    gk.atomic_add(out, 0, x[i] * y[i])  # summed: a constant index, `out` only added into
    gk.atomic_add(out, 1, x[i])
    gk.atomic_add(hist, i % 3, x[i])  # not summed: the index varies
    gk.atomic_add(counts, 0, 1)  # not summed: an integer target keeps its exact atomics


@gk.kernel
def _summed_read(x, out):
    i = gk.tid()
    gk.atomic_add(out, 0, x[i])
    x[i] = out[1]  # `out` is read: its adds stay atomic (a thread may read what others added)


def test_block_summed_elements():
    """backends/cuda.py block_summed: float elements at constant indices of arrays a parallel kernel only adds
    into are summed per thread and once per block; the rest keep their atomics; the serial form is untouched."""
    from gradkern.backends import cuda
    x, y = np.random.default_rng(0).random(8), np.random.default_rng(1).random(8)
    src = gk.inspect(_summed_mix, x, y, np.zeros(2), np.zeros(3), np.zeros(1, np.int64), backend="cuda").source
    assert src.count("_gkb_block_add(&") == 2 and "_gkb_block_add(&out[(0LL)]" in src
    assert "_gkb_atomic_add(&hist[" in src and "_gkb_atomic_add(&counts[" in src
    src = gk.inspect(_summed_read, x.copy(), np.zeros(2), backend="cuda").source
    assert "_gkb_block_add" not in src.split("_summed_read_1d(")[1]
    from gradkern.ir.types import F64, I64, Array
    from gradkern.pipeline import specialize
    types = {"x": Array(F64, 1), "y": Array(F64, 1), "out": Array(F64, 1), "hist": Array(F64, 1),
             "counts": Array(I64, 1)}
    typed = specialize(_summed_mix.ir, types, 1, "cuda").typed
    assert [a for a, _ in cuda.block_summed(typed)] == ["out", "out"]
    serial = cuda.generate(typed, 1, cuda.CudaOptions(parallel=False))[0]
    assert "_gkb_block_add(&" not in serial.split("_summed_mix_1d(")[1]


def test_gpu_requests_without_cupy_say_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy now fails
    from gradkern.kernels.blas import saxpy
    x, y = np.ones(4), np.ones(4)
    with pytest.raises(gk.BackendUnavailableError, match=r"gradkern\[cuda12\]"):
        gk.launch(saxpy, 4, 2.0, x, y, backend="cuda")

    class FakeDeviceArray:  # any array in GPU memory, e.g. a PyTorch CUDA tensor
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (0, False), "version": 3}
        shape, dtype, ndim = (4,), np.dtype("float64"), 1

    with pytest.raises(gk.BackendUnavailableError, match=r"cuda13"):
        gk.launch(saxpy, 4, 2.0, FakeDeviceArray(), FakeDeviceArray())
    np.testing.assert_array_equal(y, 1.0)


def test_mixed_host_and_device_arrays_are_refused_before_anything_runs():
    class FakeDeviceArray:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f8", "data": (0, False), "version": 3}

    from gradkern.kernels.blas import saxpy
    y = np.ones(4)
    with pytest.raises(gk.LaunchError, match=r"mix GPU arrays \(x\) and NumPy arrays \(y\)"):
        gk.launch(saxpy, 4, 2.0, FakeDeviceArray(), y)
    np.testing.assert_array_equal(y, 1.0)


def test_cuda_launch_passes_what_the_abi_lists(monkeypatch):
    """The CUDA backend's run marshals exactly the kernel's `abi` (launch extents,
    values, the extents and strides it reads), checked without a GPU by a
    stand-in for the compiled kernel."""
    from gradkern.backends import backend
    from gradkern.backends.cuda import BLOCK
    from gradkern.ir.types import F32, F64, Array
    from gradkern.kernels.stencils import heat_step_2d
    from gradkern.pipeline import specialize

    cuda = backend("cuda")
    monkeypatch.setattr(cuda, "_multiprocessors", lambda: 2)
    types = {"u": Array(F64, 2), "un": Array(F64, 2), "c": F32}
    u = np.arange(35.0).reshape(5, 7)
    un = np.zeros((10, 7))[::2]  # strided: passed with its strides
    for strided in (frozenset(), frozenset({"un"})):
        spec = specialize(heat_step_2d.ir, types, 2, "cuda", strided)
        calls = []

        def entry(grid, block, args, calls=calls):
            calls.append((grid, block, args))

        values = [u, un, np.float32(0.1)]
        cuda.run(spec.typed, spec.code, entry, True, (5, 7), values)
        (grid,), (block,), args = calls[0]
        assert block == BLOCK and grid == 1  # 35 threads: one block
        expected = []
        for item in spec.code.info.layout:
            kind, i = item[0], item[1]
            if kind == "dim":
                expected.append((5, 7)[i])
            elif kind == "value":
                expected.append(values[i])
            elif kind == "extent":
                expected.append(values[i].shape[item[2]])
            else:
                expected.append(values[i].strides[item[2]] // values[i].itemsize)
        assert len(args) == len(expected)
        for got, want in zip(args, expected):
            assert got is want if isinstance(want, np.ndarray) else got == want
        assert any(item[0] == "stride" for item in spec.code.info.layout) == bool(strided)
        assert type(args[spec.code.info.layout.index(("value", 2))]) is np.float32  # the scalar in the kernel's type
