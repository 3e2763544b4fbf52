"""CPU backend: typed IR → Python source → `numba.njit`.

The launch domain becomes a loop nest whose outer loop is `prange` for a
launch known to be race-free (serial otherwise). CPUs have no atomic float
add, so in a parallel launch each atomic target gets per-chunk private copies
(chunk c accumulates into `_gkb_priv_X[c]`), summed into X after the loop. A
target the launch also loads or stores plainly ("mixed": the reverse of LU's
update, of a red-black sweep) has none: its adds at row `tid[0] + c` go straight
to X, the chunks in two phases where c varies, and its other adds to per-slot
copies kept between launches, which its plain loads and stores go through
(PrivatizedSyntax, MixedPlan). The runtime passes `_gkb_chunks` = 0 when the copies
would exceed the memory limit (`private_chunks`): the entry then returns False and
the serial path runs, `<entry>_atomics_serial`, compiled only then. A parallel entry
whose thread body has no loop gets a serial twin, the same function compiled
without parallel=True, run for launches of fewer than SERIAL_THREADS threads.
Generated modules are written to the cache directory under a content hash and
executed from there, so Numba's own `cache=True` finds them again in the next
process (the file never changes, so its stamp stays valid); numba_cache.py
keeps that cache healthy.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InternalError
from ..ir import nodes as ir
from .base import Backend, Generated, check_launch_ndim
from .numba_names import defined_before_use, single_definitions, statements, tid_copies_unaliased
from .numba_syntax import CHECK, IMPORTS, INLINE_CHECKS, MixedPlan, NumbaSyntax, PrivatizedSyntax
from .printer import Printer


@dataclass(frozen=True)
class NumbaOptions:
    parallel: bool
    boundscheck: bool = False
    privatized: tuple[str, ...] = ()  # atomic targets, in a parallel launch
    mixed: tuple[str, ...] = ()  # those of them the kernel also loads or stores plainly (PrivatizedSyntax)
    plan: MixedPlan | None = None  # how the launch runs when some are mixed
    serial_twin: bool = False  # also print `<entry>_serial`, the entry without parallel=True


# Thread bodies longer than this (IR statements, nested ones included) are outlined (see `generate`).
# 96: the gathers of 1- to 3-D stencils (65-95 statements: one guarded copy of a short reverse body per
# neighbour) stay inline, where their vectorised loop is the point (outlined, the 2-D heat step's gradient
# took 63 ms instead of 15 ms at 2048^2); a reverse body of ten straight-line source statements is ~100.
OUTLINE_STATEMENTS = int(os.environ.get("GRADKERN_OUTLINE_STATEMENTS", "96"))
# An interior whose body still branches (data-dependent `if`s, early returns the split could not fold) is kept
# only up to this many expression nodes: it does not vectorise, so the split saves a few well-predicted edge
# tests per thread, and each extra copy of a long body costs its compile again (superbee's first primal: 136 s
# split, 54 s not; the launch 81 vs 87 ms; docs/compile-time.md). Periodic gathers of 1-D stencils (~300)
# stay split; superbee (457) and a 2-D periodic gather (940) do not.
SPLIT_BRANCHY_OPS = 400
PRIVATE_LIMIT = int(os.environ.get("GRADKERN_PRIVATE_BYTES", str(1 << 30)))
# A launch whose privatised targets it also reads or writes plainly ("mixed": the reverse of a red-black
# sweep, LU's update) runs in parallel while its private copies take at most this many bytes in all (default:
# GRADKERN_PRIVATE_BYTES); above, serially. Most of its adds need no copy (MixedPlan): a red-black sweep's
# gradient has none, LU's update one per slot, kept between launches.
MIXED_PRIVATE_LIMIT = int(os.environ.get("GRADKERN_MIXED_PRIVATE_BYTES", str(PRIVATE_LIMIT)))
# A parallel launch of fewer threads than this runs the serial twin of its entry (`generate`): waking the
# worker threads costs more than a few hundred threads of a loop-free body (benchmarks/overhead.py).
# 0 turns the twins off.
SERIAL_THREADS = int(os.environ.get("GRADKERN_SERIAL_THREADS", "256"))
# Vector mode runs its k lanes in launches of at most this many lanes, the primal once (Backend.lane_group;
# 0: all k in one launch). The 2-D heat step's gather costs about the same per launch for 1 to 4 lanes at
# 1024^2, and a parallel launch on a loaded machine can stall at its barrier: on the 2-core Intel Xeon (260 MiB
# L3) 4 was the fastest group of 1/2/4/8 in both modes at 256^2 and 1024^2 (1 and 2 threads), 8 about as fast.
# 2 was chosen on a 2-core AMD EPYC (32 MiB L3), whose 8-lane gather's equally aligned rows collided in cache
# sets; 4 measured within 16% of 2 there (benchmarks/batch.py --lane-group, RESULTS.md).
LANE_GROUP = int(os.environ.get("GRADKERN_LANE_GROUP", "4"))
# A 1-D parallel launch split into an interior (transforms/split.py) runs its edge threads, at most this
# many, serially beside the interior's `prange`: each `prange` is a gufunc Numba compiles apart (about 0.4 s
# each, cold), and the edges of a stencil are a few threads. Wider edges (an interior bounded by a parameter)
# run in `<entry>_edges`, a parallel function compiled only when a launch needs it (`generate`).
SERIAL_EDGES = 256


def private_chunks(copy_bytes: int, n0: int, mixed: bool = False, width: int = 0) -> int:
    """How many chunks a parallel launch with atomics splits axis 0 into: one per Numba thread (at most
    one per outer index; for a mixed launch whose chunks run in two phases, `MixedPlan`, two per thread,
    each at least `width` threads wide), or 0 (the serial path) when their private copies, `copy_bytes`
    each, would take more than GRADKERN_PRIVATE_BYTES (default 1 GiB), or for a mixed launch
    GRADKERN_MIXED_PRIVATE_BYTES (default the same)."""
    import numba

    plan = MixedPlan(width, ())
    chunks = plan.chunks(max(1, min(numba.get_num_threads() * plan.phases, n0)), n0)
    return chunks if chunks * copy_bytes <= (MIXED_PRIVATE_LIMIT if mixed else PRIVATE_LIMIT) else 0


def generate(k: ir.Kernel, launch_ndim: int, options: NumbaOptions, header: str = "") -> tuple[str, str]:
    """The Python module source for a typed kernel, and its entry function's name.

    The entry takes the launch extents first, then the kernel's parameters."""
    check_launch_ndim(launch_ndim)
    entry = f"{k.name}_{launch_ndim}d"
    dims = [f"_gkb_n{a}" for a in range(launch_ndim)]
    private = options.privatized if options.parallel else ()
    plan = options.plan if private else None
    shared = plan.shared if plan is not None else ()
    copied = tuple(a for a in private if plan is None or a not in options.mixed)  # per-chunk private copies
    params = dims + [p.name for p in k.params] + (["_gkb_chunks"] if private else []) + \
        [f"_gkb_{b}_{a}" for a in shared for b in ("pb", "rows")]
    flags = f"parallel={options.parallel}, cache=True, error_model='numpy', boundscheck={options.boundscheck}"
    lines = [f"# {line}" for line in header.splitlines()]
    lines += IMPORTS
    checks = sum(isinstance(e, ir.InBounds) for e in ir.all_exprs(k.body + (k.interior.body if k.interior else ())))
    if checks:
        inline = ", inline='always'" if checks <= INLINE_CHECKS else ""
        lines += ["", "", CHECK[0].format(inline=inline), *CHECK[1:]]
    lines += ["", "", f"@_gk_njit({flags})", f"def {entry}({', '.join(params)}):"]

    # Every local is defined at the top of each thread's body. Numba privatises a
    # prange variable only if each iteration defines it before any use it can see;
    # a local set in one branch and read in a later branch on the same condition
    # (a fused reverse reading a forward value) would otherwise be shared between
    # workers. Thread-index aliases are left out: Numba refuses writes to them.
    # Locals whose first mention is a top-level assignment are defined before any use on every path and
    # need no prologue: leaving them out keeps them single-definition, and Numba's SSA reconstruction
    # costs time quadratic in the multiply-defined names of a long body.
    # Each body (the general one, the interior's) has its own: the interior's straight-line copies define
    # their locals first where the general body's guarded copies cannot.
    k = tid_copies_unaliased(k)
    k = single_definitions(k)
    firsts = {id(k.body): defined_before_use(k.body)}
    if k.interior is not None:
        firsts[id(k.interior.body)] = defined_before_use(k.interior.body)
    zeros = tuple(ir.Assign(n, ir.Const(0, type=t)) for n, t in k.locals if n not in k.thread_indices)
    outline = statements(k.body) > OUTLINE_STATEMENTS

    # A long thread body is printed once as a serial function that the launch loops call: Numba's parfor
    # passes and LLVM's optimisation of one huge loop body cost time superlinear in its length (issue 14.11),
    # and a body this long gains nothing from vectorising across threads.
    outlined: list[str] = []
    thread_args = [f"_gkb_t{a}" for a in range(launch_ndim)]

    def thread_body(syntax, depth: int, body: tuple[ir.Stmt, ...], role: str) -> list[str]:
        """The body of one thread at `depth`: printed in place, or a call of its outlined function.
        Its prologue defines only the locals this body reads: every other definition is dead code that
        Numba's SSA, type inference and parfor passes would still process (a gather's copies of a reverse
        body leave dozens of locals no copy mentions)."""
        p = Printer(syntax)
        reads = {e.name for e in ir.all_exprs(body) if isinstance(e, ir.Var)}
        first = firsts[id(body)]
        own_prologue = tuple(a for a in zeros if a.name in reads and a.name not in first)
        if not outline:
            p.block(own_prologue + body, depth)
            return p.lines
        private_args = ["_gkb_c", *(["_gkb_s"] if shared else []), *[f"_gkb_priv_{a}" for a in copied]] \
            if isinstance(syntax, PrivatizedSyntax) else []
        name = f"_gkb_{role}{'_private' if private_args else ''}"
        args = ", ".join(thread_args + private_args + params)
        if not any(line.startswith(f"def {name}(") for line in outlined):
            f = Printer(syntax)
            f.block(own_prologue + body, 1)
            outlined.extend(["", "", f"@_gk_njit(cache=True, error_model='numpy', boundscheck={options.boundscheck})",
                             f"def {name}({args}):", *f.lines])
        # the indices pass as int64: Numba types the call twice, in the entry before its parfor pass and in
        # the gufunc the `prange` loop becomes, where the loop's index is unsigned; an unsigned index would
        # compile the body a second time, for a second signature (docs/compile-time.md)
        indices = len(thread_args) + (1 + bool(shared) if private_args else 0)  # with _gkb_c and _gkb_s
        call = [f"_gk_int64({a})" for a in (thread_args + private_args)[:indices]] + \
            (thread_args + private_args)[indices:] + params
        p.line(depth, f"{name}({', '.join(call)})")
        return p.lines

    def loop_nest(syntax, depth: int, outer: str, loop: str = "range", split: bool = True,
                  merge: bool = False, edges_only: bool = False, chunked: bool = False) -> list[str]:
        """The launch loops around the body. With an interior (transforms/split.py), each split axis
        has its range computed before its loop: the innermost is printed three times (edge, interior,
        edge), an outer one runs the rest of the nest towards the interior inside an `if` on its index
        and the general body in the `else`. `merge` (a race-free launch, whose threads may run in any
        order) prints the innermost's two edges as one loop before the interior: two copies of the body,
        not three; in 1-D that loop is serial, for at most SERIAL_EDGES threads, and the entry returns
        whether it ran it. `edges_only` prints only the edges of a 1-D launch, as a `prange`."""
        p = Printer(syntax)
        last = launch_ndim - 1
        inner = k.interior if split and k.interior is not None else None

        def nest(axis: int, d: int, inside: bool, flag: str | None = None) -> None:
            # inside: this thread is inside the range of every split axis so far (`flag`: where merged,
            # the name of a bool that says whether it is)
            if axis == launch_ndim:
                p.lines.extend(thread_body(syntax, d, inner.body if inside else k.body,
                                           "interior" if inside else "body"))
                return
            header = outer if axis == 0 else f"range(_gkb_n{axis})"
            r = inner.on(axis) if inside else None
            if flag is not None and axis == last and r is None:  # the merged outer tests decide here
                p.line(d, f"if {flag}:")
                nest(axis, d + 1, True)
                p.line(d, "else:")
                nest(axis, d + 1, False)
                return
            if r is None:
                p.line(d, f"for _gkb_t{axis} in {header}:")
                if axis == 0 and chunked:
                    # always true, but LLVM cannot see that a chunk's range starts at or above 0: without
                    # the test every index keeps Numba's negative-index wrap and the loop is not vectorised
                    p.line(d + 1, "if _gkb_t0 >= 0:")
                    d += 1
                nest(axis + 1, d + 1, inside, flag)
                return
            n, lo_, hi_ = f"_gkb_n{axis}", f"_gkb_lo{axis}", f"_gkb_hi{axis}"
            # a constant start is printed literally: LLVM then knows j >= start, drops Numba's
            # negative-index checks on j - 1 and vectorises (an empty range when n < start)
            const_lo = isinstance(r.lo, ir.Const)
            start = str(max(int(r.lo.value), 0)) if const_lo else lo_
            if axis < last:
                if not const_lo:
                    p.line(d, f"{lo_} = max({p.expr(r.lo)}, 0)")
                p.line(d, f"{hi_} = {n if r.hi is None else p.expr(r.hi)}")
                p.line(d, f"for _gkb_t{axis} in {header}:")
                test = f"_gkb_t{axis} >= {start} and _gkb_t{axis} < {hi_}"
                if merge:
                    # no branch here: a bool the innermost axis reads, so that the general body is printed
                    # once whatever the number of split axes (two copies of the body in all, not 1 + axes)
                    p.line(d + 1, f"_gkb_in{axis} = {test}{f' and {flag}' if flag else ''}")
                    nest(axis + 1, d + 1, True, f"_gkb_in{axis}")
                    return
                p.line(d + 1, f"if {test}:")
                nest(axis + 1, d + 2, True)
                p.line(d + 1, "else:")
                nest(axis + 1, d + 2, False)
                return
            p.line(d, f"{lo_} = min({start if const_lo else f'max({p.expr(r.lo)}, 0)'}, {n})")
            p.line(d, f"{hi_} = {n if r.hi is None else f'min(max({p.expr(r.hi)}, {lo_}), {n})'}")
            if flag is not None:
                # a thread outside an outer range: the whole row is edge (an empty interior at [0, 0))
                p.line(d, f"if not {flag}:")
                p.line(d + 1, f"{lo_} = 0")
                p.line(d + 1, f"{hi_} = 0")
            if merge or edges_only:
                e, w = f"_gkb_e{axis}", f"_gkb_w{axis}"
                p.line(d, f"{w} = {lo_} + {n} - {hi_}")
                at = d
                if edges_only:
                    p.line(d, f"for {e} in {loop}({w}):")
                elif axis == 0:
                    p.line(d, f"if {w} <= {SERIAL_EDGES}:")
                    p.line(d + 1, f"for {e} in range({w}):")
                    at = d + 1
                else:
                    p.line(d, f"for {e} in range({w}):")
                # int64: a prange index is unsigned, and an unsigned index mixed with int64 is a float
                p.line(at + 1, f"_gkb_t{axis} = _gk_int64({e}) if {e} < {lo_} else _gk_int64({e}) + ({hi_} - {lo_})")
                nest(axis + 1, at + 1, False)
                if not edges_only:
                    p.line(d, f"for _gkb_t{axis} in {loop if axis == 0 else 'range'}({start}, {hi_}):")
                    nest(axis + 1, d + 1, True)
                return
            for first, stop, interior in (("0", lo_, False), (start, hi_, True), (hi_, n, False)):
                p.line(d, f"for _gkb_t{axis} in {loop if axis == 0 else 'range'}({first}, {stop}):")
                nest(axis + 1, d + 1, interior)

        nest(0, depth, inner is not None)
        return p.lines

    # a 1-D parallel launch with an interior: its edges run serially in the entry, or in `<entry>_edges`
    edges = options.parallel and not private and launch_ndim == 1 and k.interior is not None \
        and k.interior.on(0) is not None
    if not private:
        loop = "_gk_prange" if options.parallel else "range"
        lines += loop_nest(NumbaSyntax(launch_ndim), 1, f"{loop}(_gkb_n0)", loop, merge=options.parallel)
        if edges:
            lines.append(f"    return _gkb_w0 <= {SERIAL_EDGES}")
    else:
        lines.append("    if _gkb_chunks > 0:")
        # one parallel region for the chunks and one for the sums, whatever the number of targets
        # (docs/adjoint-forms.md): np.zeros and `X += copy[c]` would each be a parallel region of their own
        # (a fork and a join per target, and per target and chunk). Each chunk zeroes its own copy, flat.
        for a in copied:
            lines += [f"        _gkb_priv_{a} = _gk_np.empty((_gkb_chunks,) + {a}.shape, {a}.dtype)",
                      f"        _gkb_flat_{a} = _gkb_priv_{a}.reshape((_gkb_chunks, {a}.size))"]
        depth = 3
        if plan is not None and plan.phases == 2:
            # the even chunks, then the odd ones, each at least `width` threads wide (MixedPlan)
            lines.append(f"        _gkb_chunks = max(1, min(_gkb_chunks, _gkb_n0 // {plan.width}))")
            lines.append("        for _gkb_ph in range(2):")
            lines.append("            for _gkb_q in _gk_prange((_gkb_chunks + 1 - _gkb_ph) // 2):")
            lines.append("                _gkb_s = _gk_int64(_gkb_q)")
            lines.append("                _gkb_c = _gkb_s * 2 + _gkb_ph")
            depth = 4
        else:
            lines.append("        for _gkb_c in _gk_prange(_gkb_chunks):")
            if shared:
                lines.append("            _gkb_s = _gk_int64(_gkb_c)")
        accumulators = {} if outline else _accumulators(k, private, options.mixed)
        types = {p.name: p.type for p in k.params}
        sx = NumbaSyntax(launch_ndim)
        pad = "    " * depth
        for a in copied:
            lines += [f"{pad}for _gkb_e in range({a}.size):",
                      f"{pad}    _gkb_flat_{a}[_gkb_c, _gkb_e] = {sx.literal(0, types[a].dtype)}"]
        lines += [f"{pad}{acc} = {sx.literal(0, types[a].dtype)}" for (a, _), acc in accumulators.items()]
        # chunks split axis 0; only an inner axis may be split further
        lines += loop_nest(PrivatizedSyntax(launch_ndim, frozenset(options.mixed) if plan else frozenset(),
                                            frozenset(shared), accumulators), depth,
                           "range(_gkb_c * _gkb_n0 // _gkb_chunks, (_gkb_c + 1) * _gkb_n0 // _gkb_chunks)",
                           split=launch_ndim > 1, chunked=True)
        lines += [f"{pad}_gkb_priv_{a}[{', '.join(['_gkb_c', *idx])}] += {acc}"
                  for (a, idx), acc in accumulators.items()]
        if copied:
            lines += _private_sums(copied, {a: types[a].ndim for a in copied})
        for a in shared:  # the flagged rows of each slot's copy, in slot order; zeroed again
            rest = [f"_gkb_r{d}" for d in range(1, k.param(a).type.ndim)]
            at = ", ".join(["_gkb_r0", *rest])
            lines += [f"        for _gkb_s in range(_gkb_pb_{a}.shape[0]):",
                      f"            for _gkb_r0 in range({a}.shape[0]):",
                      f"                if _gkb_rows_{a}[_gkb_s, _gkb_r0]:",
                      f"                    _gkb_rows_{a}[_gkb_s, _gkb_r0] = 0"]
            for d, r in enumerate(rest, 1):
                lines.append(f"{'    ' * (4 + d)}for {r} in range({a}.shape[{d}]):")
            pad = "    " * (5 + len(rest))
            lines += [f"{pad}{a}[{at}] += _gkb_pb_{a}[_gkb_s, {at}]", f"{pad}_gkb_pb_{a}[_gkb_s, {at}] = 0"]
        # the serial path (chunks = 0: the copies would pass the memory limit) is a function of its own,
        # `<entry>_atomics_serial`, which Numba compiles only when a launch takes it (docs/compile-time.md)
        lines += ["        return True", "    return False"]
    if options.serial_twin:
        # the same function, compiled without parallel=True (prange is then range): the same chunks in the
        # same order, so the same results, bit for bit, without waking the worker threads
        start = lines.index(f"@_gk_njit({flags})")
        lines += ["", "", f"@_gk_njit({flags.replace('parallel=True', 'parallel=False')})",
                  f"def {entry}_serial({', '.join(params)}):", *lines[start + 2:]]
    if edges:
        # compiled only when a launch's edges are wider than SERIAL_EDGES (NumbaBackend.run)
        lines += ["", "", f"@_gk_njit({flags})", f"def {entry}_edges({', '.join(params)}):",
                  *loop_nest(NumbaSyntax(launch_ndim), 1, "_gk_prange(_gkb_n0)", "_gk_prange", edges_only=True)]
    if private:
        lines += ["", "", f"@_gk_njit({flags.replace('parallel=True', 'parallel=False')})",
                  f"def {entry}_atomics_serial({', '.join(params)}):",
                  *loop_nest(NumbaSyntax(launch_ndim), 1, "range(_gkb_n0)", split=launch_ndim > 1)]
    if outlined:  # the body functions go before the entry that calls them
        at = lines.index(f"@_gk_njit({flags})") - 2
        lines[at:at] = outlined
    return "\n".join(lines) + "\n", entry


def _private_sums(copied: tuple[str, ...], ndims: dict[str, int]) -> list[str]:
    """The chunks' private copies summed into their targets in one parallel loop over the targets' rows
    (each row of each target by one worker): every element gets its copies' values in chunk order, the
    order of the serial sums `X += copy[c]`, so the same result."""
    rows = ", ".join(f"{a}.shape[0]" for a in copied)
    lines = [f"        for _gkb_r0 in _gk_prange({f'max({rows})' if len(copied) > 1 else rows}):"]
    for a in copied:
        rest = [f"_gkb_r{d}" for d in range(1, ndims[a])]
        at = ", ".join(["_gkb_r0", *rest])
        lines.append(f"            if _gkb_r0 < {a}.shape[0]:")
        for d, r in enumerate(rest, 1):
            lines.append(f"{'    ' * (3 + d)}for {r} in range({a}.shape[{d}]):")
        pad = "    " * (4 + len(rest))
        # a sum of its own per target: one name for all would take the widest type, and round differently
        lines += [f"{pad}_gkb_v_{a} = {a}[{at}]",
                  f"{pad}for _gkb_k in range(_gkb_chunks):",
                  f"{pad}    _gkb_v_{a} += _gkb_priv_{a}[_gkb_k, {at}]",
                  f"{pad}{a}[{at}] = _gkb_v_{a}"]
    return lines


def _accumulators(k: ir.Kernel, private: tuple[str, ...],
                  mixed: tuple[str, ...]) -> dict[tuple[str, tuple[str, ...]], str]:
    """A register accumulator per element that a privatised float target's atomic adds all hit at
    constant indices (an Active scalar's sum): `acc += v` in the chunk's loop, added to the chunk's
    private copy once after it. The copy's element would otherwise be loaded and stored at every
    thread (LLVM cannot keep it in a register beside the other stores), a chain through memory that
    made saxpy's gradient latency-bound. The same additions in the same order: the same result."""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    adds = [s for s in ir.walk_stmts(bodies) if isinstance(s, ir.AtomicAdd)]
    types = {p.name: p.type for p in k.params}
    sx = NumbaSyntax(k.tid_ndim)
    out: dict[tuple[str, tuple[str, ...]], str] = {}
    for a in private:
        mine = [s for s in adds if s.array == a]
        if a in mixed or not types[a].dtype.is_float or \
                not all(isinstance(i, ir.Const) for s in mine for i in s.indices) or \
                any(s.value.type != types[a].dtype for s in mine):  # a wider sum would round differently
            continue
        for s in mine:
            key = (a, tuple(sx.literal(i.value, i.type) for i in s.indices))
            out.setdefault(key, f"_gkb_acc{len(out)}")
    return out


_modules: dict[str, Any] = {}
_lock = threading.Lock()


def compile_source(source: str, entry: str, directory: Path) -> Callable[..., Any]:
    """Load the generated module from `directory` (writing it once) and return
    its njit entry. Numba compiles lazily on the first call, or loads its cache;
    a damaged cache entry is rebuilt, an unusable directory falls back to
    memory (numba_cache.py)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    name = f"gradkern_gen_{digest}"
    with _lock:
        mod = _modules.get(name)
        if mod is None:
            from .numba_cache import load_module  # imports Numba: generating source needs none

            mod = _modules[name] = load_module(name, source, directory)
    return getattr(mod, entry)


def _threads(dim: tuple[int, ...]) -> int:
    n = 1
    for d in dim:
        n *= d
    return n


_SIBLINGS: dict[tuple[int, str], tuple[Any, Any]] = {}


def _sibling(entry: Any, name: str) -> Any:
    """The function `name` printed beside `entry` in its generated module. Numba compiles it on its
    first call, not when the module loads: a launch that never needs it never compiles it."""
    hit = _SIBLINGS.get((id(entry), name))
    if hit is None or hit[0] is not entry:
        hit = _SIBLINGS[id(entry), name] = (entry, entry.py_func.__globals__[name])
    return hit[1]


def _serial_twin(entry: Any, name: str) -> Any:
    """The serial twin printed beside `entry` in its generated module."""
    return _sibling(entry, name)


class NumbaBackend(Backend):
    """The CPU: every race-free launch a `prange` loop nest, atomics privatised per chunk."""

    name = "cpu"
    splits_interior = True
    private_rows = True
    split_reductions = True
    lane_group = LANE_GROUP

    def keeps_interior(self, k: ir.Kernel) -> bool:
        """Not for a body long enough to be outlined (a serial function per thread gains no vectorisation
        from the split, and its interior would be a second function to compile), nor for a long one whose
        interior still branches (SPLIT_BRANCHY_OPS)."""
        if statements(k.body) > OUTLINE_STATEMENTS:
            return False
        branches = any(isinstance(s, (ir.If, ir.While)) for s in ir.walk_stmts(k.interior.body))
        return not branches or sum(1 for _ in ir.all_exprs(k.body)) <= SPLIT_BRANCHY_OPS

    def generate(self, k: ir.Kernel, launch_ndim: int, *, parallel: bool, strided: frozenset[str],
                 header: str) -> Generated:
        atomic = tuple(sorted({s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd)}))
        bodies = k.body + (k.interior.body if k.interior is not None else ())
        plain = {s.array for s in ir.walk_stmts(bodies) if isinstance(s, ir.Store)} | \
            {e.array for e in ir.all_exprs(bodies) if isinstance(e, ir.Load)}
        # a serial twin for tiny launches only where each thread's work is bounded: no loop in the body
        twin = parallel and not any(isinstance(s, (ir.For, ir.While)) for s in ir.walk_stmts(k.body))
        mixed = tuple(a for a in atomic if a in plain)
        plan = _mixed_plan(k, mixed) if parallel and mixed else None
        options = NumbaOptions(parallel=parallel, privatized=atomic, mixed=mixed, plan=plan, serial_twin=twin)
        source, entry = generate(k, launch_ndim, options, header)
        edges = f"{entry}_edges" if f"\ndef {entry}_edges(" in source else None
        return Generated(source, entry, atomic if parallel else (), f"{entry}_serial" if twin else None, edges,
                         mixed if parallel else (), plan)

    def compile(self, code: Generated, cache: Path) -> Any:
        return compile_source(code.source, code.entry, cache / "numba")

    def run(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
            values: list) -> None:
        if 0 in dim:
            return
        if entry is None:
            raise InternalError(f"kernel '{typed.name}' was run before it was compiled")
        main = entry
        if code.serial is not None and _threads(dim) < SERIAL_THREADS:
            entry = _serial_twin(entry, code.serial)
        if code.launch and code.plan is not None:
            self._run_mixed(typed, code, entry, dim, values)
        elif code.launch:  # privatised atomic targets: how many private copies fit the memory limit
            names = [p.name for p in typed.params]
            copy_bytes = sum(values[names.index(a)].nbytes for a in code.launch)
            chunks = private_chunks(copy_bytes, dim[0], bool(code.mixed))
            if entry(*dim, *values, chunks) is False:  # no chunks: the serial path
                _sibling(main, f"{code.entry}_atomics_serial")(*dim, *values, chunks)
        elif entry(*dim, *values) is False:  # edges too wide to run serially: their parallel loop
            _sibling(main, code.edges)(*dim, *values)

    def ahead(self, code: Generated, entry: Any, dim: tuple[int, ...], values: list) -> Any:
        """The function `run` calls for this launch, to compile ahead (numba_cache.ahead); none for the
        rarer paths (mixed targets, the serial fallbacks), which compile at their first call."""
        if 0 in dim or entry is None or code.plan is not None:
            return None
        if code.serial is not None and _threads(dim) < SERIAL_THREADS:
            entry = _serial_twin(entry, code.serial)
        from .numba_cache import ahead
        return ahead(entry, (*dim, *values, *((0,) if code.launch else ())))

    def compile_here(self, ahead: Any) -> None:
        from .numba_cache import compile_here
        compile_here(ahead)

    def _run_mixed(self, typed: ir.Kernel, code: Generated, entry: Any, dim: tuple[int, ...], values: list) -> None:
        """A launch with mixed targets (`MixedPlan`): the shared targets' slot copies come from the cache
        and go back to it, all zero, after a launch that returns; a launch that raises drops them."""
        import numpy

        plan: MixedPlan = code.plan
        arrays = {p.name: values[n] for n, p in enumerate(typed.params) if p.name in code.launch}
        copy_bytes = _copy_bytes(code, {a: x.nbytes for a, x in arrays.items()})
        chunks = plan.chunks(private_chunks(copy_bytes, dim[0], True, plan.width), dim[0])
        if chunks == 0 or not plan.shared:
            # the serial branch: empty buffers of the cached ones' types (no other specialisation to compile)
            empty = [x for a in plan.shared for x in (numpy.zeros((0,) * (arrays[a].ndim + 1), arrays[a].dtype),
                                                      numpy.zeros((0, 0), numpy.uint8))]
            if entry(*dim, *values, chunks, *empty) is False:
                _sibling(entry, f"{code.entry}_atomics_serial")(*dim, *values, chunks, *empty)
            return
        slots = plan.slots(chunks)
        keys = [(arrays[a].shape, arrays[a].dtype.str, slots, a) for a in plan.shared]
        buffers = [self._take(key) for key in keys]
        entry(*dim, *values, chunks, *[x for pair in buffers for x in pair])  # raises: the buffers are dropped
        for key, pair in zip(keys, buffers):
            self._keep(key, pair)

    def _take(self, key: tuple) -> tuple[Any, Any]:
        """Zeroed slot copies and row flags for a shared target of this shape and dtype: cached, or new."""
        import numpy

        with _spare_lock:
            pair = _spare.pop(key, None)
        if pair is None:
            shape, dtype, slots, _ = key
            pair = numpy.zeros((slots, *shape), dtype), numpy.zeros((slots, shape[0]), numpy.uint8)
        return pair

    def _keep(self, key: tuple, pair: tuple[Any, Any]) -> None:
        """Cache zeroed buffers for the next launch, keeping the cache under GRADKERN_PRIVATE_BYTES."""
        with _spare_lock:
            _spare[key] = pair
            while sum(p.nbytes + f.nbytes for p, f in _spare.values()) > PRIVATE_LIMIT:
                del _spare[next(iter(_spare))]  # the oldest first

    def array_module(self) -> Any:
        import numpy
        return numpy

    def summation(self, code: Generated, accumulator: str, parallel: bool) -> str:
        if parallel and accumulator in code.launch:
            flush = rf"\n +_gkb_priv_{re.escape(accumulator)}\[_gkb_c\b[^\n]*\] \+= _gkb_acc\d+\n"  # at any depth
            where = "a register" if re.search(flush, code.source) else "its own slot"
            return (f"per-chunk partial sums: each Numba thread's chunk sums its threads' terms in order into {where}, "
                    "and the chunks' sums are added once after the loop (no atomics)")
        return super().summation(code, accumulator, parallel)

    def private_bytes(self, code: Generated, sizes: dict[str, int], dim: tuple[int, ...]) -> int:
        if not code.launch or 0 in dim:
            return 0
        if code.plan is not None:  # the per-chunk copies of the targets that are not mixed, the shared slots
            plan: MixedPlan = code.plan
            chunks = plan.chunks(private_chunks(_copy_bytes(code, sizes), dim[0], True, plan.width), dim[0])
            copied = sum(sizes[a] for a in code.launch if a not in code.mixed)
            return chunks * copied + plan.slots(chunks) * sum(sizes[a] for a in plan.shared) if chunks else 0
        copy = sum(sizes[a] for a in code.launch)
        return private_chunks(copy, dim[0], bool(code.mixed)) * copy


# the shared targets' slot copies and row flags (MixedPlan) between launches, by (shape, dtype, slots, name):
# all zero; a launch takes them out while it runs, so two at once never share them
_spare: dict[tuple, tuple[Any, Any]] = {}
_spare_lock = threading.Lock()


def _copy_bytes(code: Generated, sizes: dict[str, int]) -> int:
    """Bytes of private copies per chunk of a mixed launch: the targets that are not mixed, and the shared
    ones (one copy per slot, at most one per chunk)."""
    return sum(sizes[a] for a in code.launch if a not in code.mixed) + sum(sizes[a] for a in code.plan.shared)


def _mixed_plan(k: ir.Kernel, mixed: tuple[str, ...]) -> MixedPlan:
    """The plan of a parallel launch whose targets `mixed` are also accessed plainly, from the rows the
    pipeline marked on its atomic adds (ir.AtomicAdd.row)."""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    adds = [s for s in ir.walk_stmts(bodies) if isinstance(s, ir.AtomicAdd) and s.array in mixed]
    width = 0
    for a in mixed:  # chunks at least this wide never reach a common row of any target within one phase
        rows = [s.row for s in adds if s.array == a and s.row is not None]
        width = max(width, max(rows) - min(rows) if rows else 0)
    return MixedPlan(width, tuple(a for a in mixed if any(s.array == a and s.row is None for s in adds)))
