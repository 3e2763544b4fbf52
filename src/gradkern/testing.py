"""`check_grad`: test a kernel's (or a program's, docs/programs.md) derivatives against
finite differences. A program is any Python function that launches kernels;
its arguments are annotated as for `gk.autodiff(fn, ...)`.

Two checks, both in float64 whatever the kernel's dtype (float32 kernels are
compared against a float64 run of the same kernel):

1. per coordinate: for each Duplicated input element and Active scalar (a
   random sample of at most `max_coords`), the reverse-mode derivative of
   L = Σ ⟨w_a, a_after⟩ against the central difference (L(x+h) - L(x-h)) / 2h;
2. the dot-product test: ⟨w, J v⟩ (central difference in a random direction v)
   against ⟨Jᵀ w, v⟩ (reverse mode), for random w and v;
3. forward mode: the tangents J v of every Duplicated array (a sample of at
   most `max_coords` elements) against the central difference along v, and
   ⟨w, J v⟩ from forward mode against ⟨Jᵀ w, v⟩ from reverse mode.

mode=gk.Forward runs only the forward-mode checks (3) and the finite-difference
dot product; the default runs all three.

A check passes when |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
The default tolerances are those of central differences with h ~ 1e-6 in
float64 (rtol 1e-5), or of float32 arithmetic (rtol 2e-3).

The step: by default coordinate c moves by h = eps·max(1, |x_c|) and the
random directions are O(1) per element. `relative=True` scales both by each
element's own magnitude (h = eps·|x_c|, eps where x_c = 0): for inputs far
below 1 (or of very different magnitudes), where an absolute step is too
coarse. docs/testing.md says how to choose, and why a long polynomial whose
terms cancel needs a larger eps, not a smaller one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .annotations import Active, Annotation, Const, Duplicated, Forward, Reverse
from .api import autodiff, launch
from .errors import AnnotationError
from .kernel import KernelFunction
from .program.signature import check_count
from .program.signature import names as program_names


@dataclass
class GradCheckReport:
    """What check_grad compared: one line per failure, and the worst errors."""

    kernel: str
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    dot_analytic: float = 0.0
    dot_numeric: float = 0.0
    dot_forward: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def __str__(self) -> str:
        head = (f"check_grad({self.kernel}): {self.checked} derivatives and the dot-product test; "
                f"max abs error {self.max_abs_error:.3e}, max rel error {self.max_rel_error:.3e}; "
                f"<w, Jv> = {self.dot_numeric:.12g} (finite differences), {self.dot_forward:.12g} (forward mode); "
                f"<J^T w, v> = {self.dot_analytic:.12g}")
        return head + ("" if self.ok else "\n  " + "\n  ".join(self.failures[:20]))


def _float64(x):
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return x.astype(np.float64)
    if isinstance(x, (float, np.floating)):
        return float(x)
    return x.copy() if isinstance(x, np.ndarray) else x


def check_grad(kernel: KernelFunction, *args: Any, dim: Any = None, mode: Any = Reverse, seed: int = 0,
               rtol: float | None = None, atol: float | None = None, eps: float = 1e-6, max_coords: int = 64,
               raise_on_failure: bool = True, relative: bool = False) -> GradCheckReport:
    """Check the reverse- and forward-mode derivatives of `kernel` at `args`
    (annotated as for reverse-mode autodiff; shadow contents are ignored and the
    arguments are not modified). `relative`: steps relative to each input
    element's magnitude (module docstring). Raises AssertionError with the
    report on failure unless raise_on_failure is False."""
    if mode is not Reverse and mode is not Forward:
        raise AnnotationError(f"check_grad: mode must be gk.Reverse or gk.Forward, got {mode!r}")
    program = not isinstance(kernel, KernelFunction)
    if program and not callable(kernel):
        raise AnnotationError(f"check_grad: kernel must be a @gk.kernel or a program (a function that launches "
                              f"kernels); got {type(kernel).__name__}")
    # a program's arguments are checked against its signature before its first (primal) call and named by its
    # parameters, as gk.autodiff does (program/signature.py)
    if program:
        check_count(kernel, len(args), "check_grad")
    params = program_names(kernel, len(args)) if program else [p.name for p in kernel.ir.params]
    problem = input_problem(args, [f"'{n}'" for n in params], eps, max_coords, rtol, atol, seed)
    if problem is not None:  # before anything runs (an infinite Active value ran both finite differences first)
        raise AnnotationError(f"check_grad: {problem}")
    rng = np.random.default_rng(seed)

    def execute(run: list) -> None:
        if program:
            kernel(*run)
        else:
            launch(kernel, dim if dim is not None else _dim(run), *run)
    primals = [a.val if isinstance(a, Annotation) else a for a in args]
    dup = [n for n, a in zip(params, args) if isinstance(a, Duplicated)]
    act = [n for n, a in zip(params, args) if isinstance(a, Active)]
    for n, a in zip(params, args):
        if isinstance(a, Duplicated) and not (isinstance(a.val, np.ndarray) and a.val.dtype.kind == "f"):
            raise AnnotationError(f"check_grad: Duplicated argument '{n}' must be a float array",
                                  hint="pass a scalar as gk.Active: check_grad gives it a tangent in forward mode")
    single = any(isinstance(p, np.ndarray) and p.dtype == np.float32 for p in primals)
    rtol = rtol if rtol is not None else (2e-3 if single else 1e-5)
    atol = atol if atol is not None else (1e-3 if single else 1e-7)
    index = {n: k for k, n in enumerate(params)}
    weights = {n: rng.standard_normal(primals[index[n]].shape) for n in dup}

    def loss(values: list) -> tuple[float, float]:
        """Σ ⟨w_a, a_after⟩ of a float64 primal launch on copies, and Σ |w_a a_after| (what its rounding
        error scales with)."""
        run = [_float64(v) for v in values]
        execute(run)
        terms = [weights[n] * run[index[n]] for n in dup]
        return float(sum(np.sum(t) for t in terms)), float(sum(np.sum(np.abs(t)) for t in terms))

    report = GradCheckReport(getattr(kernel, "name", getattr(kernel, "__name__", "program")))
    base = [_float64(p) for p in primals]
    v = {n: rng.standard_normal(np.shape(primals[index[n]])) for n in dup + act}
    if relative:  # each element's direction in proportion to its magnitude
        v = {n: d * _magnitude(base[index[n]]) for n, d in v.items()}
    plus = [b.copy() if isinstance(b, np.ndarray) else b for b in base]
    minus = [b.copy() if isinstance(b, np.ndarray) else b for b in base]
    for n in dup + act:
        plus[index[n]] = base[index[n]] + eps * v[n]
        minus[index[n]] = base[index[n]] - eps * v[n]

    def outputs(values: list) -> list:
        run = [_float64(x) for x in values]
        execute(run)
        return run

    out_plus, out_minus = outputs(plus), outputs(minus)
    report.dot_numeric = float(sum(np.sum(weights[n] * (out_plus[index[n]] - out_minus[index[n]]))
                                   for n in dup)) / (2 * eps)

    # forward mode at the user's dtypes: tangents v
    call = []
    for n, p in zip(params, primals):
        pc = p.copy() if isinstance(p, np.ndarray) else p
        if n in dup:
            call.append(Duplicated(pc, v[n].astype(primals[index[n]].dtype)))
        elif n in act:
            call.append(Duplicated(p, float(v[n])))
        else:
            call.append(Const(pc))
    if program:
        autodiff(kernel, *call, mode=Forward)
    else:
        autodiff(kernel, *call, dim=dim, mode=Forward)
    tangents = {n: call[index[n]].dval.astype(np.float64) for n in dup}
    report.dot_forward = float(sum(np.sum(weights[n] * tangents[n]) for n in dup))
    elements = [(n, c) for n in dup for c in np.ndindex(tangents[n].shape)]
    if len(elements) > max_coords:
        elements = [elements[k] for k in rng.choice(len(elements), max_coords, replace=False)]
    for n, c in elements:
        hi, lo = out_plus[index[n]][c], out_minus[index[n]][c]
        numeric = (hi - lo) / (2 * eps)
        _compare(report, f"tangent of {n}{list(c)} along v", float(tangents[n][c]), float(numeric), rtol,
                 atol + _roundoff(max(abs(hi), abs(lo)), eps))
    _compare(report, "dot-product test <w, Jv>: forward mode vs finite differences", report.dot_forward,
             report.dot_numeric, rtol, atol)
    if mode is Forward:
        if raise_on_failure and not report.ok:
            raise AssertionError(str(report))
        return report

    # reverse mode at the user's dtypes: shadows seeded with w
    shadows = {n: weights[n].astype(primals[index[n]].dtype) for n in dup}
    call = []
    for n, p in zip(params, primals):
        pc = p.copy() if isinstance(p, np.ndarray) else p
        call.append(Duplicated(pc, shadows[n]) if n in shadows else Active(p) if n in act else Const(pc))
    grads = autodiff(kernel, *call) if program else autodiff(kernel, *call, dim=dim)
    analytic = {n: shadows[n].astype(np.float64) for n in dup}
    analytic.update({n: np.array(grads[index[n]], np.float64) for n in act})

    coords = [(n, c) for n in dup + act for c in np.ndindex(np.shape(primals[index[n]]))]
    if len(coords) > max_coords:
        coords = [coords[k] for k in rng.choice(len(coords), max_coords, replace=False)]
    for n, c in coords:
        x = base[index[n]]
        h = eps * float(_magnitude(x[c] if isinstance(x, np.ndarray) else x) if relative else
                        max(1.0, abs(float(x[c] if isinstance(x, np.ndarray) else x))))
        (up, up_size), (down, down_size) = loss(_bumped(base, index[n], c, h)), loss(_bumped(base, index[n], c, -h))
        numeric = (up - down) / (2 * h)
        got = float(analytic[n][c])
        _compare(report, f"d loss / d {n}{list(c) if c else ''}", got, numeric, rtol,
                 atol + _roundoff(max(up_size, down_size), h))

    # dot-product tests: <w, J v> by central differences and by forward mode, <J^T w, v> from reverse mode
    report.dot_analytic = float(sum(np.sum(analytic[n] * v[n]) for n in dup + act))
    _compare(report, "dot-product test <w, Jv> vs <J^T w, v>", report.dot_analytic, report.dot_numeric, rtol, atol)
    _compare(report, "forward vs reverse: <w, Jv> vs <J^T w, v>", report.dot_forward, report.dot_analytic,
             rtol, atol)
    if raise_on_failure and not report.ok:
        raise AssertionError(str(report))
    return report


def input_problem(args: tuple, names: list[str], eps: Any, max_coords: Any, rtol: Any, atol: Any,
                  seed: Any) -> str | None:
    """What check_grad (and gkm.check_grad) cannot check at these inputs, the first in order, or None: an option
    that is no finite number in its range (eps 0 divided by zero, a NaN tolerance failed every comparison, a
    string or a negative seed failed inside NumPy), an Active value that is no finite real number, a Duplicated
    float array holding NaN or an infinity (its finite differences are NaN: a report of failures that are not
    the kernel's). `names[k]` names argument k in the message."""
    for what, value, ok, expected in (
            ("eps", eps, _finite(eps) and eps > 0, "a finite number > 0"),
            ("max_coords", max_coords, _whole(max_coords), "an int >= 0"),
            ("rtol", rtol, rtol is None or _finite(rtol) and rtol >= 0, "None or a finite number >= 0"),
            ("atol", atol, atol is None or _finite(atol) and atol >= 0, "None or a finite number >= 0"),
            ("seed", seed, _whole(seed), "an int >= 0")):
        if not ok:
            return f"{what} must be {expected}; got {value!r} ({type(value).__name__})"
    for name, a in zip(names, args):
        if isinstance(a, Active) and not _finite(a.val.item() if _scalar_array(a.val) else a.val):
            return (f"argument {name} is Active with {a.val!r} ({type(a.val).__name__}); expected a finite real "
                    f"number")
        if isinstance(a, Duplicated) and isinstance(a.val, np.ndarray) and a.val.dtype.kind == "f" \
                and not np.isfinite(a.val).all():
            c = tuple(int(i) for i in np.argwhere(~np.isfinite(a.val))[0])
            return (f"argument {name} holds {a.val[c]} at {list(c)}; expected finite values (finite differences "
                    f"of a non-finite input are NaN)")
    return None


def _finite(v: Any) -> bool:
    """Whether `v` is a real number (no bool, no duration) and finite."""
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
            and not isinstance(v, np.timedelta64) and bool(np.isfinite(float(v))))


def _whole(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_, np.timedelta64)) and v >= 0


def _scalar_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "fiu"


def _magnitude(x: Any) -> Any:
    """|x| elementwise, 1 where x is 0 (a relative step needs a nonzero scale)."""
    a = np.abs(np.asarray(x, np.float64))
    return np.where(a > 0, a, 1.0)


def _dim(values):
    return next(v.shape for v in values if isinstance(v, np.ndarray))


def _bumped(values: list, k: int, c: tuple, h: float) -> list:
    out = list(values)
    x = values[k]
    if isinstance(x, np.ndarray):
        x = x.copy()
        x[c] += h
    else:
        x = x + h
    out[k] = x
    return out


def _roundoff(size: float, h: float) -> float:
    """The rounding error of a float64 central difference (f(x+h) - f(x-h)) / 2h whose two values were
    summed from terms of total magnitude `size`: each carries ~eps·size, so ~2·eps·size / 2h, taken
    with a factor 4 of margin. It matters only where the values are large against their derivative
    (a kernel writing 3500 into an output whose weight the loss sums: 5.5e-7 of error at h = 1e-6)."""
    return 4.0 * float(np.finfo(np.float64).eps) * size / h


def _compare(report: GradCheckReport, what: str, analytic: float, numeric: float, rtol: float, atol: float):
    report.checked += 1
    err = abs(analytic - numeric)
    rel = err / max(abs(analytic), abs(numeric), atol)
    report.max_abs_error = max(report.max_abs_error, err)
    report.max_rel_error = max(report.max_rel_error, rel)
    if not err <= atol + rtol * max(abs(analytic), abs(numeric)):
        report.failures.append(f"{what}: analytic {analytic:.12g}, finite differences {numeric:.12g} "
                               f"(error {err:.3e})")
