"""`gkm.check_grad`: gradkern.testing.check_grad for a program that runs on every rank of a communicator
(docs/distributed.md#checking-a-distributed-gradient).

The loss is L = Σ_r Σ_a ⟨w_a^r, a_r after the program⟩, a weight w_a^r per Duplicated array a and rank r,
so L is one function of every rank's inputs. A single process's check would perturb every rank's block at
once; this one perturbs one entry of one rank's array at a time (the others run the program unperturbed),
sums the loss over the ranks and compares the central difference with that entry's reverse-mode derivative
on its rank. An Active scalar is one parameter of every rank (perturbed alike everywhere): its derivative is
the sum over ranks of each rank's part. Then the dot-product tests across ranks: ⟨w, Jv⟩ by central
differences and by forward mode, against ⟨Jᵀw, v⟩ from reverse mode, each summed over the ranks.
Every decision uses values summed or broadcast over the ranks, so every rank passes or fails alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from ..annotations import Active, Annotation, Const, Duplicated
from ..api import Forward, autodiff
from ..errors import AnnotationError
from ..testing import GradCheckReport, _bumped, _compare, _float64, _roundoff, input_problem
from . import deadline
from .agreement import agree


def _finite(x: Any, low: float = 0.0) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and np.isfinite(x) \
        and x >= low


def _options(eps: Any, max_coords: Any, rtol: Any, atol: Any) -> str | None:
    """What is wrong with the options, or None: each would otherwise fail unclearly on every rank (eps=0 divides by
    zero, max_coords=-1 fails in NumPy, a NaN compares unequal to itself in the ranks' agreement, a negative rtol
    fails every comparison)."""
    if not _finite(eps) or eps == 0:
        return f"eps must be a finite number > 0, got {eps!r}"
    if not isinstance(max_coords, (int, np.integer)) or isinstance(max_coords, bool) or max_coords < 0:
        return f"max_coords must be an int >= 0, got {max_coords!r}"
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not _finite(value):
            return f"{name} must be None or a finite number >= 0, got {value!r}"
    return None


def check_grad(program: Any, *args: Any, comm: Any = None, seed: int = 0, rtol: float | None = None,
               atol: float | None = None, eps: float = 1e-6, max_coords: int = 32,
               raise_on_failure: bool = True) -> GradCheckReport:
    """Check the reverse- and forward-mode derivatives of `program` (a function every rank of `comm` calls
    with its own blocks; default MPI.COMM_WORLD, or a gkm.Cartesian) at `args`, annotated as for reverse-mode
    autodiff (shadow contents ignored, arguments not modified). Collective: every rank calls it with the same
    program, annotations, seed and options. `max_coords` entries of the ranks' arrays (drawn alike on every
    rank) and every Active scalar are checked one by one; the tolerances are check_grad's. Raises
    AssertionError with the report on every rank on failure, unless raise_on_failure is False."""
    comm = MPI.COMM_WORLD if comm is None else getattr(comm, "comm", comm)
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:  # a freed grid's is null
        raise AnnotationError(f"gkm.check_grad: comm must be a live mpi4py intracommunicator or gkm.Cartesian, got "
                              f"{type(comm).__name__}{' (freed)' if isinstance(comm, MPI.Comm) else ''}")
    primals = [a.val if isinstance(a, Annotation) else a for a in args]
    dup = [k for k, a in enumerate(args) if isinstance(a, Duplicated)]
    act = [k for k, a in enumerate(args) if isinstance(a, Active)]
    problem = _options(eps, max_coords, rtol, atol) or next(
        (f"Duplicated argument {k} must be a float NumPy array, got {type(primals[k]).__name__}"
         for k in dup if not (isinstance(primals[k], np.ndarray) and primals[k].dtype.kind == "f")), None)
    if problem is None:  # a NaN here (an input, eps, a tolerance) would fail every comparison, on every rank
        problem = input_problem(args, [str(k) for k in range(len(args))], eps, max_coords, rtol, atol, seed)
    # refused on every rank (a rank raising alone would leave the others waiting in the first loss's sum)
    agree(comm, problem, "gkm.check_grad", (seed, eps, max_coords, rtol, atol, raise_on_failure,
                                            tuple(type(a).__name__ for a in args)))
    def reduced(value: Any, op: Any = MPI.SUM, gather: bool = False) -> Any:
        """comm's allreduce (or allgather) of a Python value, after every rank's arrival within the deadline
        (deadline.arrive: an object's collective has no non-blocking form)."""
        deadline.arrive(comm, lambda: f"gkm.check_grad over {deadline.ranks(comm)}: a sum of its losses and "
                                      "derivatives over the ranks, each running the program alike")
        return comm.allgather(value) if gather else comm.allreduce(value, op=op)

    single = reduced(int(any(primals[k].dtype == np.float32 for k in dup)), op=MPI.MAX)  # one rtol everywhere
    rtol = rtol if rtol is not None else (2e-3 if single else 1e-5)
    atol = atol if atol is not None else (1e-3 if single else 1e-7)
    mine = np.random.default_rng([seed, comm.rank])  # this rank's weights and directions
    shared = np.random.default_rng(seed)  # what every rank draws alike: the scalars' directions, the entries
    weights = {k: mine.standard_normal(primals[k].shape) for k in dup}
    v = {k: mine.standard_normal(primals[k].shape) for k in dup}
    v.update({k: float(shared.standard_normal()) for k in act})
    base = [_float64(p) for p in primals]

    def run(values: list) -> list:
        values = [_float64(x) for x in values]
        program(*values)
        return values

    def loss(values: list) -> tuple[float, float]:
        """L summed over the ranks, and Σ |terms| (what its rounding scales with)."""
        out = run(values)
        terms = [weights[k] * out[k] for k in dup]
        total = reduced(np.array([sum(float(np.sum(t)) for t in terms),
                                         sum(float(np.sum(np.abs(t))) for t in terms)]))
        return float(total[0]), float(total[1])

    def along(sign: float) -> list:
        return [b + sign * eps * v[k] if k in v else (b.copy() if isinstance(b, np.ndarray) else b)
                for k, b in enumerate(base)]

    report = GradCheckReport(getattr(program, "__name__", "program"))
    (up, _), (down, _) = loss(along(1.0)), loss(along(-1.0))
    report.dot_numeric = (up - down) / (2 * eps)

    # forward mode at the user's dtypes: tangents v
    call = [Duplicated(p.copy(), v[k].astype(p.dtype)) if k in dup else Duplicated(p, v[k]) if k in act
            else Const(p.copy() if isinstance(p, np.ndarray) else p) for k, p in enumerate(primals)]
    autodiff(program, *call, mode=Forward)
    report.dot_forward = reduced(sum(float(np.sum(weights[k] * call[k].dval.astype(np.float64)))
                                            for k in dup))
    # reverse mode at the user's dtypes: shadows seeded with w
    shadows = {k: weights[k].astype(primals[k].dtype) for k in dup}
    call = [Duplicated(p.copy(), shadows[k]) if k in dup else Active(p) if k in act
            else Const(p.copy() if isinstance(p, np.ndarray) else p) for k, p in enumerate(primals)]
    grads = autodiff(program, *call)
    analytic = {k: shadows[k].astype(np.float64) for k in dup}
    mine_dot = sum(float(np.sum(analytic[k] * v[k])) for k in dup) + sum(float(grads[k]) * v[k] for k in act)
    report.dot_analytic = reduced(mine_dot)

    # entries: (rank, argument, index) over every rank's arrays, then the scalars (rank None: every rank's)
    shapes = reduced([primals[k].shape for k in dup], gather=True)
    coords = [(r, k, c) for r, ranks in enumerate(shapes) for k, shape in zip(dup, ranks) for c in np.ndindex(shape)]
    if len(coords) > max_coords:
        coords = [coords[j] for j in sorted(shared.choice(len(coords), max_coords, replace=False))]
    coords += [(None, k, ()) for k in act]  # every scalar: a few, each one parameter of every rank
    for r, k, c in coords:
        ours = r is None or r == comm.rank
        x = base[k][c] if ours and isinstance(base[k], np.ndarray) else base[k] if ours else 0.0
        h = eps * reduced(max(1.0, abs(float(x))) if ours else 0.0, op=MPI.MAX)
        (up, up_size), (down, down_size) = (loss(_bumped(base, k, c, s * h) if ours else base) for s in (1.0, -1.0))
        numeric = (up - down) / (2 * h)
        if r is None:
            got = reduced(float(grads[k]))  # each rank's part of the scalar's derivative
        else:
            got = reduced(float(analytic[k][c]) if ours else 0.0)
        where = f"argument {k}{list(c)} on rank {r}" if r is not None else f"argument {k} (summed over ranks)"
        _compare(report, f"d loss / d {where}", got, numeric, rtol, atol + _roundoff(max(up_size, down_size), h))
    _compare(report, "dot-product test across ranks <w, Jv> vs <J^T w, v>", report.dot_analytic,
             report.dot_numeric, rtol, atol)
    _compare(report, "forward vs reverse across ranks: <w, Jv> vs <J^T w, v>", report.dot_forward,
             report.dot_analytic, rtol, atol)
    if raise_on_failure and not report.ok:
        raise AssertionError(str(report))
    return report
