"""Host code writing an array out of the process inside a program (docs/host-code.md, "Files and restarts";
program/hostfiles.py). Before session 51, `np.save(f, u)` of a state a launch wrote, then `u = np.load(f)` (a
restart), ran without an error and the array read back was a constant: the gradient lost every launch before the
save. Now each way of writing an array that depends on an active one to a file is refused at the user's line,
before anything is written; a plain view (`u.view(np.ndarray)`) says that no derivative through the file is
wanted, and arrays that depend on no active one are written as before."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

import gradkern as gk


@gk.kernel
def _smooth(a, b, w):
    i = gk.tid() + 1
    b[i] = w * (a[i - 1] + a[i] + a[i + 1])


def _write(how, a, f):
    if how == "save":
        np.save(f, a)
    elif how == "savez":
        np.savez(f, state=a)
    elif how == "savez_compressed":
        np.savez_compressed(f, a)
    elif how == "savetxt":
        np.savetxt(f, a)
    elif how == "tofile":
        a.tofile(f)
    else:
        pickle.dump(a, f)


WAYS = ["save", "savez", "savez_compressed", "savetxt", "tofile", "pickle"]
_OP = {"save": "np.save", "savez": "np.savez", "savez_compressed": "np.savez_compressed", "savetxt": "np.savetxt",
       "tofile": "ndarray.tofile", "pickle": "pickling"}


def _args(rng):
    return [gk.Duplicated(rng.uniform(0.5, 1.5, 8), rng.standard_normal(8)),
            gk.Duplicated(rng.uniform(0.5, 1.5, 8), rng.standard_normal(8)), gk.Active(0.3)]


@pytest.mark.parametrize("how", WAYS)
@pytest.mark.parametrize("what", ["launched", "argument", "derived"])
def test_writing_an_array_that_depends_on_an_active_one_is_refused_before_writing(how, what, tmp_path):
    """The state a launch wrote, an annotated argument before any launch, and an array host code computed from
    an active one (`2.0 * b`): each refused naming the operation and the line; the file stays empty and no shadow
    changed."""
    path = tmp_path / "restart.bin"

    def program(a, b, w):
        gk.launch(_smooth, 6, a, b, w)
        target = {"launched": b, "argument": a, "derived": 2.0 * b}[what]
        with open(path, "wb") as f:
            _write(how, target, f)

    args = _args(np.random.default_rng(1))
    shadows = [a.dval.copy() for a in args[:2]]
    op = _OP[how].replace(".", r"\.")
    with pytest.raises(gk.ProgramError, match=rf"`{op}` of .* at .*test_host_files\.py:\d+ \(`.*`\) writes an array "
                                              r"that depends on an active one") as info:
        gk.autodiff(program, *args)
    assert "gk.copy(u, saved)" in str(info.value) and "u.view(np.ndarray)" in str(info.value)
    assert path.stat().st_size == 0
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)


def _restart(a, b, w):
    """Two sweeps with a restart between them, read back from memory (`saved`) or a file of a plain view."""
    gk.launch(_smooth, 6, a, b, w)
    saved = b.copy()
    gk.fill(b, 0.0)
    gk.copy(b, saved)
    gk.launch(_smooth, 6, b, a, w)


def test_a_restart_kept_in_memory_is_the_gradient_of_the_run_without_it():
    """The spelling the refusal names: the restart's copy and read back are launches, differentiated; the gradient
    is that of the two sweeps alone (central differences: h = 1e-6 on values of order 1, truncation ~1e-12,
    rounding ~1e-10, so 1e-7 bounds both)."""
    rng = np.random.default_rng(2)
    a0, b0, wa, wb = (rng.uniform(0.5, 1.5, 8) for _ in range(4))

    def loss(a, b, w):
        a, b = a.copy(), b.copy()
        gk.launch(_smooth, 6, a, b, w)
        gk.launch(_smooth, 6, b, a, w)
        return float(wa @ a + wb @ b)
    args = [gk.Duplicated(a0.copy(), wa.copy()), gk.Duplicated(b0.copy(), wb.copy()), gk.Active(0.3)]
    dw = gk.autodiff(_restart, *args)[2]
    fd = (loss(a0, b0, 0.3 + 1e-6) - loss(a0, b0, 0.3 - 1e-6)) / 2e-6
    assert abs(dw - fd) <= 1e-7 * max(1.0, abs(fd)), (dw, fd)
    for k in range(8):
        e = np.zeros(8)
        e[k] = 1e-6
        fd = (loss(a0 + e, b0, 0.3) - loss(a0 - e, b0, 0.3)) / 2e-6
        assert abs(args[0].dval[k] - fd) <= 1e-7 * max(1.0, abs(fd)), (k, args[0].dval[k], fd)


@pytest.mark.parametrize("how", WAYS)
def test_a_plain_view_and_arrays_no_active_one_reached_are_written(how, tmp_path):
    """`b.view(np.ndarray)` (no derivative through the file, by the user's word), a temporary nothing active
    reached and a Const argument are written as NumPy writes them, inside a program; the gradient is unchanged."""
    out = []

    def program(a, b, w, c):
        gk.launch(_smooth, 6, a, b, w)
        for k, target in enumerate((b.view(np.ndarray), np.linspace(0.0, 1.0, 8), c)):
            with open(tmp_path / f"out{k}", "wb") as f:
                _write(how, target, f)
            out.append((tmp_path / f"out{k}").read_bytes())
        gk.launch(_smooth, 6, b, a, w)

    rng = np.random.default_rng(3)
    args = _args(rng) + [gk.Const(rng.uniform(0.5, 1.5, 8))]
    want = _args(np.random.default_rng(3))
    got = gk.autodiff(program, *args)[2]

    def plain_program(a, b, w):
        gk.launch(_smooth, 6, a, b, w)
        gk.launch(_smooth, 6, b, a, w)
    assert got == gk.autodiff(plain_program, *want)[2]
    for a, b in zip(args[:2], want[:2]):
        np.testing.assert_array_equal(a.dval, b.dval)
    assert len(out) == 3 and all(out)


def test_outside_a_program_writes_are_untouched():
    a = np.arange(4.0)
    f = io.BytesIO()
    np.save(f, a)
    f.seek(0)
    np.testing.assert_array_equal(np.load(f), a)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)), a)


def test_forward_mode_refuses_the_same_writes():
    """A tangent is lost the same way: np.save of an array carrying one is refused in forward mode too."""
    def program(a, b, w):
        gk.launch(_smooth, 6, a, b, w)
        f = io.BytesIO()
        np.save(f, b)
        f.seek(0)
        gk.copy(b, np.load(f))

    rng = np.random.default_rng(4)
    args = [gk.Duplicated(rng.uniform(0.5, 1.5, 8), rng.standard_normal(8)),
            gk.Duplicated(rng.uniform(0.5, 1.5, 8), rng.standard_normal(8)), gk.Duplicated(0.3, 1.0)]
    with pytest.raises(gk.ProgramError, match=r"`np\.save` of 'b' at .*test_host_files\.py:\d+ \(`np\.save\(f, b\)`"):
        gk.autodiff(program, *args, mode=gk.Forward)
