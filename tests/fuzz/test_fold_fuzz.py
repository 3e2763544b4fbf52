"""The fold's own-copy stores fuzzed against a brute-force oracle (transforms/fold.py, docs/adjoint-forms.md
section 6, "Stores into thread-own shadows").

Random stencil kernels, 1-D and 2-D: an output written from a stencil read of u, beside extra reads and writes
at the thread's own index (`p[i]`, `w[i1]` with `i1 = i + 1`, `w[i] = exp(p[i]) * u[i]`, in-place
`q[i] = q[i] * ...`), and mutations that break ownership (`p` also read at `i + 1`, or at `n - 1 - i`; `w` written
at `n - 1 - i`) or that make a neighbour's copy read an own shadow (`q[i] = q[i] * u[i - 1]`).
Each kernel runs on the reference interpreter with the fold turned on there (the interpreter runs the gather's
threads one after another, then its deferred statements), against:

* the oracle of the legality rule: every element a gather thread writes, outside the deferred statements, is
  read or written by no other gather thread (recorded per element by running the gather's IR thread by
  thread on arrays that log who touches what): a fold is legal only where every pulled contribution lands
  on an element the gathering thread owns;
* the plan before (the fold off: gather, then the reverse launch): every shadow bit for bit, the Active
  derivative within the bound of a reordered sum;
* forward mode (no gather at all): the dot-product test.

It counts the kernels whose reverse the fold took with own-copy stores, and the refused ones: both are reached.
GRADKERN_FUZZ_FOLD sets the number of kernels (default 40), GRADKERN_FUZZ_SEED the seed.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys

import numpy as np

import gradkern as gk
import gradkern.backends.interp as interp_backend
import gradkern.pipeline as pipeline
from gradkern.ir import interp as ir_interp
from gradkern.ir import nodes as ir
from gradkern.runtime.call import prepare

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_FOLD", "40"))
N_CPU = int(os.environ.get("GRADKERN_FUZZ_FOLD_CPU", "1"))  # of those folded with own stores, also compiled
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
ARGS = ("u", "un", "p", "w", "q")


def _source(rng: np.random.Generator, name: str, ndim: int) -> str:
    """One random kernel: u read at stencil offsets into un, and own-index extras (module doc)."""
    tid = "i" if ndim == 1 else "i, j"
    own, own1 = ("i", "i1") if ndim == 1 else ("i, j", "i1, j")
    guard = "i >= 1 and i < u.shape[0] - 1" + ("" if ndim == 1 else " and j >= 1 and j < u.shape[1] - 1")
    offsets = [f"u[i - 1{', j' if ndim == 2 else ''}]", f"u[i + 1{', j' if ndim == 2 else ''}]", f"u[{own}]"]
    if ndim == 2:
        offsets += ["u[i, j - 1]", "u[i, j + 1]"]
    picked = [offsets[int(k)] for k in rng.choice(len(offsets), int(rng.integers(1, len(offsets) + 1)),
                                                    replace=False)]
    p_at = own if rng.random() < 0.5 else own1
    lines = [f"def {name}(u, un, p, w, q, c):", f"    {tid} = gk.tid()", "    i1 = i + 1", f"    if {guard}:",
             f"        s = c * ({' + '.join(picked)})"]
    extras = []
    if rng.random() < 0.7:
        extras.append(f"        s = s * p[{p_at}]")
    mutation = rng.random()
    if mutation < 0.12:  # p also a stencil: gathered, no longer own
        extras.append(f"        s = s + p[i + 1{', j' if ndim == 2 else ''}] * u[{own}]")
    elif mutation < 0.2:  # p read at a mirrored index: not own, atomics, the fold refused
        extras.append(f"        s = s + p[p.shape[0] - 1 - i{', j' if ndim == 2 else ''}]")
    kind = int(rng.integers(6))
    w_at = own if rng.random() < 0.5 else own1
    if kind == 0:  # a write-only own output from this thread's own value: its shadow read by the own copy only
        extras.append(f"        w[{w_at}] = u[{own}] * u[{own}] + p[{p_at}]")
    elif kind == 1:  # ... or from the stencil value: its shadow read by the neighbours' copies too
        extras.append(f"        w[{w_at}] = s * s")
    elif kind == 2:  # in place, own only: its adjoint updated by the own copy
        extras.append(f"        q[{own}] = q[{own}] * p[{p_at}] + u[{own}]")
    elif kind == 3:  # in place from a neighbour: the neighbour's copy reads this shadow, the fold refused
        extras.append(f"        q[{own}] = q[{own}] * {picked[0]}")
    elif kind == 4:  # an own output whose partial is its result (exp): the own copy replays it before the primal
        extras.append(f"        w[{w_at}] = gk.exp(p[{p_at}]) * u[{own}]")
    else:  # an output at a mirrored index: not own, so not the own copy's (cleared deferred, or refused)
        extras.append(f"        w[w.shape[0] - 1 - i{', j' if ndim == 2 else ''}] = u[{own}] * p[{p_at}]")
    rng.shuffle(extras)
    lines += extras + ["        un[" + own + "] = s + u[" + own + "]", "    else:", f"        un[{own}] = u[{own}]"]
    if kind in (2, 3) or rng.random() < 0.3:
        lines.append(f"        q[{own}] = q[{own}] * 2.0")
    return "\n".join(lines) + "\n"


def _module(tmp_path, sources: dict[str, str]):
    path = tmp_path / "fold_fuzz_kernels.py"
    path.write_text("import gradkern as gk\n\n" + "".join("\n@gk.kernel\n" + s for s in sources.values()))
    spec = importlib.util.spec_from_file_location("fold_fuzz_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fold_fuzz_kernels"] = module
    spec.loader.exec_module(module)
    return module


class _Logged:
    """An array that records, per element, which thread touches it and whether it was written."""

    def __init__(self, a: np.ndarray, name: str, log: dict, written: set, who: list):
        self.a, self.name, self.log, self.written, self.who = a, name, log, written, who

    def __getattr__(self, attr):
        return getattr(self.a, attr)

    def __getitem__(self, idx):
        self.log.setdefault((self.name, idx), set()).add(self.who[0])
        return self.a[idx]

    def __setitem__(self, idx, value):
        self.log.setdefault((self.name, idx), set()).add(self.who[0])
        self.written.add((self.name, idx))
        self.a[idx] = value


def _shared_writes(k, dim, args) -> list:
    """Run a folded gather's IR as the interpreter does, recording accesses; the elements some gather thread
    writes that another gather thread touches (the legality rule's oracle: none)."""
    log: dict = {}
    written: set = set()
    who = [None]
    arrays = {p.name: _Logged(a, p.name, log, written, who) for p, a in zip(k.params, args)
              if isinstance(a, np.ndarray)}
    scalars = {p.name: a for p, a in zip(k.params, args) if not isinstance(a, np.ndarray)}
    with np.errstate(all="ignore"):
        for tid in itertools.product(*(range(n) for n in dim)):
            who[0] = tid
            ir_interp._Frame(k, arrays, scalars, tid, dim).run(k.body)
        plain = {n: a.a for n, a in arrays.items()}
        extents = [int(ir_interp._Frame(k, plain, scalars, (0,) * len(dim), dim).val(e)) for e in k.deferred.extents]
        for tid in itertools.product(*(range(n) for n in extents)):
            ir_interp._Frame(k, plain, scalars, tid, tuple(extents)).run(k.deferred.body)
    atomic = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd)}  # the Active sums: shared
    return [e for e in written if len(log[e]) > 1 and e[0] not in atomic]


def _inputs(rng: np.random.Generator, ndim: int):
    shape = (int(rng.integers(1, 9)),) if ndim == 1 else (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
    big = (shape[0] + 1,) + shape[1:]
    primals = [rng.uniform(0.5, 1.5, s) for s in (shape, shape, big, big, shape)]
    seeds = [rng.standard_normal(x.shape) for x in primals]
    return shape, primals, seeds


def _reverse(kernel, primals, seeds, dim, c=None):
    shadows = [s.copy() for s in seeds]
    got = gk.autodiff(kernel, *(gk.Duplicated(a.copy(), s) for a, s in zip(primals, shadows)),
                      c if c is not None else gk.Active(0.7), dim=dim, backend="interp")
    return shadows, got[5]


def _compiled_against_unfolded(monkeypatch, kernel, primals, seeds, dim, source):
    """The compiled CPU backend (row-lagged chunks, 1 and 3 of them): the folded gather's shadows bit for bit those
    of the fold turned off, both interiors as replayed (docs/adjoint-forms.md, section 11)."""
    from gradkern.backends import numba_plan
    monkeypatch.setattr(pipeline, "COEFFICIENTS", False)
    for chunks in (1, 3):
        monkeypatch.setattr(numba_plan, "private_chunks", lambda *a, chunks=chunks, **k: min(chunks, a[1]))
        results = []
        for fold in (False, True):
            monkeypatch.setattr(pipeline, "FOLD", fold)
            shadows = [s.copy() for s in seeds]
            gk.autodiff(gk.kernel(kernel.fn), *(gk.Duplicated(a.copy(), s) for a, s in zip(primals, shadows)),
                        gk.Const(0.7), dim=dim, backend="cpu")
            results.append(shadows)
        for name, a, b in zip(ARGS, *results):
            assert np.array_equal(a, b), (source, name, chunks)
    monkeypatch.setattr(pipeline, "COEFFICIENTS", True)
    monkeypatch.setattr(pipeline, "FOLD", True)


def test_fold_of_own_stores_against_the_oracle(tmp_path, monkeypatch):
    rng = np.random.default_rng(SEED + 33)
    names = [f"fold_{k}" for k in range(N_KERNELS)]
    sources = {n: _source(rng, n, 1 + k % 2) for k, n in enumerate(names)}
    module = _module(tmp_path, sources)
    monkeypatch.setattr(interp_backend.InterpBackend, "row_lagged", True)  # the fold on the interpreter too
    real = interp_backend.interpret
    shared: list = []

    def recording(k, dim, args):
        if k.deferred is not None:  # a folded gather
            shared.extend(_shared_writes(k, dim, [a.copy() if isinstance(a, np.ndarray) else a for a in args]))
        real(k, dim, args)
    monkeypatch.setattr(interp_backend, "interpret", recording)
    kept = refused = 0
    for k, n in enumerate(names):
        ndim = 1 + k % 2
        dim, primals, seeds = _inputs(rng, ndim)
        kernel = getattr(module, n)
        monkeypatch.setattr(pipeline, "FOLD", False)
        before = gk.kernel(kernel.fn)
        old_shadows, old_c = _reverse(before, primals, seeds, dim)
        monkeypatch.setattr(pipeline, "FOLD", True)
        shared.clear()
        new_shadows, new_c = _reverse(kernel, primals, seeds, dim)
        assert not shared, (sources[n], shared)
        for name, a, b in zip(ARGS, old_shadows, new_shadows):
            assert np.array_equal(a, b), (sources[n], name, a, b)
        # the Active sum: the same terms, the gather's domain grouping them (test_fold.py's _sum_bound)
        assert abs(new_c - old_c) <= 1e-12 * (abs(old_c) + 1.0), (sources[n], old_c, new_c)
        # forward mode (no gathers): <w, J v> = <J^T w, v>
        vs = [rng.standard_normal(x.shape) for x in primals]
        tangents = [v.copy() for v in vs]
        gk.autodiff(kernel, *(gk.Duplicated(a.copy(), t) for a, t in zip(primals, tangents)), gk.Const(0.7),
                    dim=dim, mode=gk.Forward, backend="interp")
        adjoints, _ = _reverse(kernel, primals, seeds, dim, gk.Const(0.7))
        forward = sum(float((a * b).sum()) for a, b in zip(seeds, tangents))
        reverse = sum(float((a * b).sum()) for a, b in zip(adjoints, vs))
        scale = sum(float(np.abs(a * b).sum()) for a, b in zip(seeds, tangents)) + \
            sum(float(np.abs(a * b).sum()) for a, b in zip(adjoints, vs))
        assert abs(forward - reverse) <= 1e-12 * scale, (sources[n], forward, reverse)
        args = (*(gk.Duplicated(a.copy(), s.copy()) for a, s in zip(primals, seeds)), gk.Active(0.7))
        call = prepare(kernel, args, dim, "interp", "reverse")[0]
        rs = call.spec
        if rs.gather is not None and rs.gather_folded:
            forms = dict(rs.adjoint_forms)
            own = any(form == "plain add" for a, form in forms.items() if a in ARGS)
            if own and kept < N_CPU:
                _compiled_against_unfolded(monkeypatch, kernel, primals, seeds, dim, sources[n])
            kept += own
        elif rs.gather is not None:
            refused += 1
    assert kept >= N_KERNELS // 5 and refused >= N_KERNELS // 10, (kept, refused)
