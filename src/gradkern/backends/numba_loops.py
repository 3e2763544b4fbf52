"""CPU backend, loop generation: the Python module that runs a typed kernel over its launch domain.

The launch domain becomes a loop nest whose outer loop is `prange` for a launch known to be race-free
(serial otherwise). CPUs have no atomic float add, so in a parallel launch each atomic target gets per-chunk
private copies (chunk c accumulates into `_gkb_priv_X[c]`), summed into X after the loop; a target the launch
also loads or stores plainly ("mixed") has none, and runs as its `MixedPlan` says (numba_plan.py). The entry
takes `_gkb_chunks` (0: return False, and the runtime runs `<entry>_atomics_serial`). A parallel entry gets a
serial twin, `<entry>_serial`, the same function without parallel=True (numba_cpu.py: which launches run it); a 1-D
split launch whose edges are wide runs them in `<entry>_edges`. `LoopPrinter` prints all of it: the thread
body (inline, or outlined as a function of its own), the loop nest around it (split into interior and edges),
the chunks, their private copies and sums, and the sibling functions."""

from __future__ import annotations

from dataclasses import dataclass

from ..environment import env_int
from ..ir import nodes as ir
from .base import check_launch_ndim
from .numba_names import defined_before_use, floor_of, single_definitions, statements, tid_copies_unaliased
from .numba_plan import MixedPlan
from .numba_syntax import (
    CHECK,
    IMPORTS,
    INLINE_CHECKS,
    REASSOCIATED_ADD,
    NumbaSyntax,
    PrivatizedSyntax,
    private_sums,
    register_accumulators,
    spill_function,
    unsigned_copies,
    unsigned_literals,
)
from .printer import Printer


@dataclass(frozen=True)
class NumbaOptions:
    parallel: bool
    boundscheck: bool = False
    privatized: tuple[str, ...] = ()  # atomic targets, in a parallel launch
    mixed: tuple[str, ...] = ()  # those of them the kernel also loads or stores plainly (PrivatizedSyntax)
    plan: MixedPlan | None = None  # how the launch runs when some are mixed
    serial_twin: bool = False  # also print `<entry>_serial`, the entry without parallel=True
    owned: tuple[tuple[str, int], ...] = ()  # privatised targets whose rows chunks own (numba_plan.owned_rows)
    spilled: tuple[tuple[str, int], ...] = ()  # targets `<entry>_sparse` spills, with adds per thread (numba_plan)


# Thread bodies longer than this (IR statements, nested ones included) are outlined (LoopPrinter.thread_body).
# 96: the gathers of 1- to 3-D stencils (65-95 statements: one guarded copy of a short reverse body per
# neighbour) stay inline, where their vectorised loop is the point (outlined, the 2-D heat step's gradient
# took 63 ms instead of 15 ms at 2048^2); a reverse body of ten straight-line source statements is ~100.
OUTLINE_STATEMENTS = env_int("GRADKERN_OUTLINE_STATEMENTS", 96)
# A straight-line body (no `if` or loop statement: selects only) stays inline up to this many statements: LLVM
# vectorises it across threads, which outlining forbids. Measured (one thread, docs/performance.md): the fused
# gradient of d2q9_equilibrium (242 statements) ran 5.4x faster inline (51 -> 9.6 ms at 682^2), d2q9_step's
# (719) 1.2x (93 -> 77 ms), for about 18 % more compile (d2q9_step's first autodiff 104 -> 122 s wall, loaded);
# the periodic gathers' straight-line interiors (upwind_2d 132, burgers_rusanov_1d 167 statements) vectorise
# inline beside an outlined general body.
STRAIGHT_STATEMENTS = env_int("GRADKERN_STRAIGHT_STATEMENTS", 1024)
# An interior whose body still branches (data-dependent `if`s, early returns the split could not fold) is kept
# only up to this many expression nodes: it does not vectorise, so the split saves a few well-predicted edge
# tests per thread, and each extra copy of a long body costs its compile again (superbee's first primal: 136 s
# split, 54 s not; the launch 81 vs 87 ms; docs/compile-time.md). Periodic gathers of 1-D stencils (~300)
# stay split; superbee (457) and a 2-D periodic gather (940) do not.
SPLIT_BRANCHY_OPS = 400
# A 1-D parallel launch split into an interior (transforms/split.py) runs its edge threads, at most this
# many, serially beside the interior's `prange`: each `prange` is a gufunc Numba compiles apart (about 0.4 s
# each, cold), and the edges of a stencil are a few threads. Wider edges (an interior bounded by a parameter)
# run in `<entry>_edges`, a parallel function compiled only when a launch needs it (`LoopPrinter.module`).
SERIAL_EDGES = 256
# A 1-D private copy's chunk rows are this many elements longer than the target (64 bytes of 4-byte elements):
# two chunks adding at once to the same few elements (an Active sum in an outlined body adds to its chunk's
# slot at every thread) would otherwise write the same cache line from two cores at every add.
PAD = 16


def outlines(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether a thread body is printed as a serial function the launch loops call: past OUTLINE_STATEMENTS
    statements, or past STRAIGHT_STATEMENTS for a straight-line body."""
    n = statements(body)
    if n <= OUTLINE_STATEMENTS:
        return False
    straight = not any(isinstance(s, (ir.If, ir.For, ir.While)) for s in ir.walk_stmts(body))
    return not straight or n > STRAIGHT_STATEMENTS


def keeps_interior(k: ir.Kernel) -> bool:
    """Whether `k`'s interior is printed: not where both bodies are outlined (a serial function per thread
    gains no vectorisation from the split, and its interior would be a second function to compile), nor for
    a long one whose interior still branches (SPLIT_BRANCHY_OPS). A long general body with a straight-line
    interior (a periodic gather, whose wrapped candidates the interior drops) keeps it: the general body
    is outlined, the interior printed inline (LoopPrinter.thread_body)."""
    if outlines(k.body) and outlines(k.interior.body):
        return False
    branches = any(isinstance(s, (ir.If, ir.While)) for s in ir.walk_stmts(k.interior.body))
    return not branches or sum(1 for _ in ir.all_exprs(k.body)) <= SPLIT_BRANCHY_OPS


@dataclass(frozen=True)
class Nest:
    """How one launch loop nest is printed (`LoopPrinter.loop_nest`): `outer` is axis 0's loop header,
    `loop` the loop of axis 0's split ranges. `split`: print the interior where the kernel has one.
    `merge` (a race-free launch, whose threads may run in any order): the innermost split axis's two edges
    as one loop before the interior, two copies of the body, not three; in 1-D that loop is serial, for at
    most SERIAL_EDGES threads, and the entry returns whether it ran it. `edges_only`: only the edges of a
    1-D launch, as a `prange`. `chunked`: axis 0 runs one chunk's range. `ordered`: the outer axes' ranges
    as bools as `merge` has them, but every thread in order (the innermost axis's edges and interior as
    three loops), so a sum over the threads adds in the same order as without the split."""

    outer: str
    loop: str = "range"
    split: bool = True
    merge: bool = False
    edges_only: bool = False
    chunked: bool = False
    ordered: bool = False


class LoopPrinter:
    """Prints the Python module of one typed kernel for one launch rank (`module`); its entry function,
    `entry`, takes the launch extents first, then the kernel's parameters."""

    def __init__(self, k: ir.Kernel, launch_ndim: int, options: NumbaOptions, header: str = ""):
        check_launch_ndim(launch_ndim)
        self.ndim, self.options, self.header = launch_ndim, options, header
        self.entry = f"{k.name}_{launch_ndim}d"
        self.private = options.privatized if options.parallel else ()
        # a parallel launch with deferred statements (ir.Deferred) runs in chunks too: they run row-lagged
        self.deferred = k.deferred
        self.chunked = bool(self.private) or (options.parallel and k.deferred is not None)
        self.plan = options.plan if self.private else None
        self.shared = self.plan.shared if self.plan is not None else ()
        rows = dict(options.owned) if self.private else {}
        # per-chunk private copies: not of the mixed targets, nor of those whose rows the chunks own
        self.copied = tuple(a for a in self.private if (self.plan is None or a not in options.mixed) and a not in rows)
        self.params = [f"_gkb_n{a}" for a in range(launch_ndim)] + [p.name for p in k.params] + \
            (["_gkb_chunks"] if self.chunked else []) + [f"_gkb_{b}_{a}" for a in self.shared for b in ("pb", "rows")]
        self.flags = f"parallel={options.parallel}, cache=True, error_model='numpy', boundscheck={options.boundscheck}"
        self.checks = sum(isinstance(e, ir.InBounds)
                          for e in ir.all_exprs(k.body + (k.interior.body if k.interior else ())))
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
        k = self.k = single_definitions(tid_copies_unaliased(k))
        self.firsts = {id(k.body): defined_before_use(k.body)}
        if k.interior is not None:
            self.firsts[id(k.interior.body)] = defined_before_use(k.interior.body)
        self.zeros = tuple(ir.Assign(n, ir.Const(0, type=t)) for n, t in k.locals if n not in k.thread_indices)
        # A long thread body is printed once as a serial function that the launch loops call: Numba's parfor
        # passes and LLVM's optimisation of one huge loop body cost time superlinear in its length (issue
        # 14.11), and a body this long gains nothing from vectorising across threads.
        # per body (the general one, the interior's): whether it is outlined; `outline`: either is
        self.outlines = {id(k.body): outlines(k.body)}
        if k.interior is not None:
            self.outlines[id(k.interior.body)] = outlines(k.interior.body)
        self.outline = any(self.outlines.values())
        # the owned targets' register accumulators, one per outer index (`_rows_open`); an outlined body adds
        # to them straight (PrivatizedSyntax), its chunk's rows all the same
        self.owned = {} if self.outline else {a: (c, f"_gkb_row_{a}") for a, c in rows.items()}
        self.direct = frozenset(rows)
        # sparse privatisation needs the chunk's own locals in the thread body: not for an outlined one
        self.spilled = {} if self.outline or self.plan is not None or not self.private else dict(options.spilled)
        self.outlined: list[str] = []
        self.thread_args = [f"_gkb_t{a}" for a in range(launch_ndim)]
        # what `module` printed, for the backend to run it by (numba_cpu.CpuLaunch) without reading the text:
        # `<entry>_edges` (`<entry>_sparse` where `spilled`), a sum through `_gkb_radd`, the targets summed in
        # a register (numba_syntax.register_accumulators)
        self.edges = self.reassociated = False
        self.registers: frozenset[str] = frozenset()

    def module(self) -> str:
        """The module's source: imports, the bounds-check helper, outlined bodies, the entry, its siblings."""
        options, flags, params, entry, k = self.options, self.flags, self.params, self.entry, self.k
        lines = [f"# {line}" for line in self.header.splitlines()]
        lines += IMPORTS
        if self.checks:
            inline = ", inline='always'" if self.checks <= INLINE_CHECKS else ""
            lines += ["", "", CHECK[0].format(inline=inline), *CHECK[1:]]
        lines += ["", "", f"@_gk_njit({flags})", f"def {entry}({', '.join(params)}):"]
        # a 1-D parallel launch with an interior: its edges run serially in the entry, or in `<entry>_edges`
        edges = self.edges = options.parallel and not self.chunked and self.ndim == 1 and k.interior is not None \
            and k.interior.on(0) is not None
        if not self.chunked:
            loop = "_gk_prange" if options.parallel else "range"
            lines += self.loop_nest(NumbaSyntax(self.ndim), 1, Nest(f"{loop}(_gkb_n0)", loop, merge=options.parallel))
            lines += self.deferred_loops(1)
            if edges:
                lines.append(f"    return _gkb_w0 <= {SERIAL_EDGES}")
        else:
            lines += self.chunks()
        if options.serial_twin:
            # the same function, compiled without parallel=True (prange is then range): the same chunks in the
            # same order, so the same results, bit for bit, without waking the worker threads
            start = lines.index(f"@_gk_njit({flags})")
            lines += ["", "", f"@_gk_njit({flags.replace('parallel=True', 'parallel=False')})",
                      f"def {entry}_serial({', '.join(params)}):", *lines[start + 2:]]
        if edges:
            # compiled only when a launch's edges are wider than SERIAL_EDGES (NumbaBackend.run)
            lines += ["", "", f"@_gk_njit({flags})", f"def {entry}_edges({', '.join(params)}):",
                      *self.loop_nest(NumbaSyntax(self.ndim), 1,
                                      Nest("_gk_prange(_gkb_n0)", "_gk_prange", edges_only=True))]
        if self.chunked:
            lines += ["", "", f"@_gk_njit({flags.replace('parallel=True', 'parallel=False')})",
                      f"def {entry}_atomics_serial({', '.join(params)}):",
                      *self.loop_nest(NumbaSyntax(self.ndim), 1, Nest("range(_gkb_n0)", split=self.ndim > 1)),
                      *self.deferred_loops(1)]
        if self.spilled:
            # compiled only when a launch picks sparse privatisation (NumbaBackend.run); with its own serial twin
            sparse = self.chunks(self.spilled)
            lines += ["", "", f"@_gk_njit({flags})", f"def {entry}_sparse({', '.join(params)}):", *sparse]
            if options.serial_twin:
                lines += ["", "", f"@_gk_njit({flags.replace('parallel=True', 'parallel=False')})",
                          f"def {entry}_sparse_serial({', '.join(params)}):", *sparse]
            for d in sorted({self.k.param(a).type.ndim for a in self.spilled}):
                lines += ["", "", *spill_function(d)]
        if self.reassociated:
            lines += ["", "", *REASSOCIATED_ADD]
        if self.outlined:  # the body functions go before the entry that calls them
            at = lines.index(f"@_gk_njit({flags})") - 2
            lines[at:at] = self.outlined
        at = len(self.header.splitlines()) + len(IMPORTS)
        lines[at:at] = unsigned_literals("\n".join(lines[at:]))
        return "\n".join(lines) + "\n"

    def chunks(self, spill: dict[str, int] | None = None) -> list[str]:
        """The entry of a parallel launch with atomic targets: its chunks, each with its private copies (or
        the mixed targets' slots), the loop nest over the chunk's range, then the copies summed. With
        `spill` (target: adds per thread), `<entry>_sparse`: those targets get spill lists, not copies."""
        k, plan, shared = self.k, self.plan, self.shared
        spill = spill or {}
        copied = tuple(a for a in self.copied if a not in spill)
        lines = ["    if _gkb_chunks > 0:"]
        for a, bound in spill.items():
            # chunk c runs at most n0 // C + 1 outer indices, each of them n1 * n2 threads
            threads = " * ".join(["(_gkb_n0 // _gkb_chunks + 1)", *[f"_gkb_n{d}" for d in range(1, self.ndim)]])
            lines += [f"        _gkb_cap_{a} = {bound} * {threads}",
                      f"        _gkb_si_{a} = _gk_np.empty((_gkb_chunks, _gkb_cap_{a}, {a}.ndim), _gk_np.int64)",
                      f"        _gkb_sv_{a} = _gk_np.empty((_gkb_chunks, _gkb_cap_{a}), {a}.dtype)",
                      f"        _gkb_ns_{a} = _gk_np.zeros(_gkb_chunks, _gk_np.int64)"]
        # one parallel region for the chunks and one for the sums, whatever the number of targets
        # (docs/adjoint-forms.md): np.zeros and `X += copy[c]` would each be a parallel region of their own
        # (a fork and a join per target, and per target and chunk). Each chunk zeroes its own copy, flat.
        for a in copied:
            if k.param(a).type.ndim == 1:  # chunks' rows PAD elements apart: no cache line shared between chunks
                lines += [f"        _gkb_priv_{a} = _gk_np.empty((_gkb_chunks, {a}.shape[0] + {PAD}), {a}.dtype)",
                          f"        _gkb_flat_{a} = _gkb_priv_{a}"]
                continue
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
        accumulators = {} if self.outline else register_accumulators(k, self.private, self.options.mixed)
        types = {p.name: p.type for p in k.params}
        sx = NumbaSyntax(self.ndim)
        pad = "    " * depth
        header = "range(_gkb_c * _gkb_n0 // _gkb_chunks, (_gkb_c + 1) * _gkb_n0 // _gkb_chunks)"
        if self.deferred is not None:  # the chunk's bounds, which its lagged rows test (no mixed plan here)
            lines += [f"{pad}_gkb_a = _gk_int64(_gkb_c) * _gkb_n0 // _gkb_chunks",
                      f"{pad}_gkb_b = (_gk_int64(_gkb_c) + 1) * _gkb_n0 // _gkb_chunks"]
            header = "range(_gkb_a, _gkb_b)"
        for a in copied:
            lines += [f"{pad}for _gkb_e in range({a}.size):",
                      f"{pad}    _gkb_flat_{a}[_gkb_c, _gkb_e] = {sx.literal(0, types[a].dtype)}"]
        lines += [f"{pad}{acc} = {sx.literal(0, types[a].dtype)}" for (a, _), acc in accumulators.items()]
        for a in spill:  # the rows this chunk owns, and its spill count
            lines += [f"{pad}_gkb_lo_{a} = _gkb_c * {a}.shape[0] // _gkb_chunks",
                      f"{pad}_gkb_hi_{a} = (_gkb_c + 1) * {a}.shape[0] // _gkb_chunks", f"{pad}_gkb_k_{a} = 0"]
        # chunks split axis 0; only an inner axis may be split further
        syntax = PrivatizedSyntax(self.ndim, frozenset(self.options.mixed) if plan else frozenset(),
                                  frozenset(shared), accumulators, self.direct,
                                  {a: acc for a, (_, acc) in self.owned.items()}, frozenset(spill))
        # with deferred rows, every axis is split (in 1-D, axis 0 too: LoopPrinter._chunk_split), the threads
        # kept in order so that the Active sums add as the unsplit loops do (docs/adjoint-forms.md, section 6)
        deferred = self.deferred is not None
        lines += self.loop_nest(syntax, depth, Nest(header, split=self.ndim > 1 or deferred, chunked=True,
                                                    ordered=deferred))
        lines += [f"{pad}_gkb_priv_{a}[{', '.join(['_gkb_c', *idx])}] += {acc}"
                  for (a, idx), acc in accumulators.items()]
        self.reassociated |= syntax.reassociates
        self.registers |= {a for a, _ in accumulators}
        lines += [f"{pad}_gkb_ns_{a}[_gkb_c] = _gkb_k_{a}" for a in spill]
        for a in spill:  # the spilled adds in chunk order, each chunk's in its threads' order
            at = ", ".join(f"_gkb_si_{a}[_gkb_k, _gkb_e, {d}]" for d in range(types[a].ndim))
            lines += ["        for _gkb_k in range(_gkb_chunks):",
                      f"            for _gkb_e in range(_gkb_ns_{a}[_gkb_k]):",
                      f"                {a}[{at}] += _gkb_sv_{a}[_gkb_k, _gkb_e]"]
        lines += self.deferred_rest()
        if copied:
            lines += private_sums(copied, {a: types[a].ndim for a in copied})
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
        return lines + ["        return True", "    return False"]

    def thread_body(self, syntax: NumbaSyntax, depth: int, body: tuple[ir.Stmt, ...], role: str) -> list[str]:
        """The body of one thread at `depth`: printed in place, or a call of its outlined function.
        Its prologue defines only the locals this body reads: every other definition is dead code that
        Numba's SSA, type inference and parfor passes would still process (a gather's copies of a reverse
        body leave dozens of locals no copy mentions)."""
        p = Printer(syntax)
        reads = {e.name for e in ir.all_exprs(body) if isinstance(e, ir.Var)}
        first = self.firsts[id(body)]
        own_prologue = tuple(a for a in self.zeros if a.name in reads and a.name not in first)
        if not self.outlines[id(body)]:
            self._unsigned_body(p, own_prologue + body, depth)
            return p.lines
        private_args = ["_gkb_c", *(["_gkb_s"] if self.shared else []), *[f"_gkb_priv_{a}" for a in self.copied]] \
            if isinstance(syntax, PrivatizedSyntax) else []
        name = f"_gkb_{role}{'_private' if private_args else ''}"
        args = ", ".join(self.thread_args + private_args + self.params)
        if not any(line.startswith(f"def {name}(") for line in self.outlined):
            f = Printer(syntax)
            self._unsigned_body(f, own_prologue + body, 1)
            self.outlined.extend(["", "", "@_gk_njit(cache=True, error_model='numpy', "
                                  f"boundscheck={self.options.boundscheck})", f"def {name}({args}):", *f.lines])
        # the indices pass as int64: Numba types the call twice, in the entry before its parfor pass and in
        # the gufunc the `prange` loop becomes, where the loop's index is unsigned; an unsigned index would
        # compile the body a second time, for a second signature (docs/compile-time.md)
        indices = len(self.thread_args) + (1 + bool(self.shared) if private_args else 0)  # with _gkb_c and _gkb_s
        call = [f"_gk_int64({a})" for a in (self.thread_args + private_args)[:indices]] + \
            (self.thread_args + private_args)[indices:] + self.params
        p.line(depth, f"{name}({', '.join(call)})")
        return p.lines

    def _unsigned_body(self, p: Printer, body: tuple[ir.Stmt, ...], depth: int) -> None:
        """`body` printed with unsigned copies of its index names (numba_syntax.unsigned_copies), tids' first."""
        p.sx.copies = unsigned_copies(body, frozenset(self.params), p.sx.tid)
        try:
            p.lines += [p.sx.indent * depth + text for t in self.thread_args for text in p.sx.defined(t)]
            p.block(body, depth)
        finally:
            p.sx.copies = frozenset()

    def _rows_open(self, p: Printer, d: int) -> None:
        """The register accumulators of the owned targets (`_row_accumulators`), zeroed for this outer index."""
        for a, (_, acc) in self.owned.items():
            p.line(d, f"{acc} = {p.sx.literal(0, self.k.param(a).type.dtype)}")

    def _rows_flush(self, p: Printer, d: int) -> None:
        """Each owned target's accumulator added once to its row `_gkb_t0 + c`, straight into the target."""
        for a, (c, acc) in self.owned.items():
            row = "_gkb_t0" if c == 0 else f"_gkb_t0 + {c}" if c > 0 else f"_gkb_t0 - {-c}"
            # a row outside the target received no add (its accumulator is still 0)
            p.line(d, f"if {row} >= 0 and {row} < {a}.shape[0]:")
            p.line(d + 1, f"{a}[{row}] += {acc}")

    def loop_nest(self, syntax: NumbaSyntax, depth: int, nest: Nest) -> list[str]:
        """The launch loops around the body. With an interior (transforms/split.py), each split axis
        has its range computed before its loop: the innermost is printed three times (edge, interior,
        edge), an outer one runs the rest of the nest towards the interior inside an `if` on its index
        and the general body in the `else` (`Nest` says how: merged edges, edges only, a chunk)."""
        p = Printer(syntax)
        inner = self.k.interior if nest.split and self.k.interior is not None else None
        self._axis(p, nest, inner, 0, depth, inner is not None)
        return p.lines

    def _axis(self, p: Printer, nest: Nest, inner: ir.Interior | None, axis: int, d: int, inside: bool,
              flag: str | None = None) -> None:
        """The loops of `axis` and those inside it. `inside`: this thread is inside the range of every
        split axis so far (`flag`: where merged, the name of a bool that says whether it is)."""
        k, last, loop = self.k, self.ndim - 1, nest.loop
        if axis == self.ndim:
            p.lines.extend(self.thread_body(p.sx, d, inner.body if inside else k.body,
                                            "interior" if inside else "body"))
            return
        header = nest.outer if axis == 0 else f"range(_gkb_n{axis})"
        r = inner.on(axis) if inside else None
        if flag is not None and axis == last and r is None:  # the merged outer tests decide here
            p.line(d, f"if {flag}:")
            self._axis(p, nest, inner, axis, d + 1, True)
            p.line(d, "else:")
            self._axis(p, nest, inner, axis, d + 1, False)
            return
        if r is None:
            p.line(d, f"for _gkb_t{axis} in {header}:")
            if axis == 0 and nest.chunked:
                # always true, but LLVM cannot see that a chunk's range starts at or above 0: without
                # the test every index keeps Numba's negative-index wrap and the loop is not vectorised
                p.line(d + 1, "if _gkb_t0 >= 0:")
                d += 1
                self._rows_open(p, d + 1)
            self._axis(p, nest, inner, axis + 1, d + 1, inside, flag)
            if axis == 0 and nest.chunked:
                self._rows_flush(p, d + 1)
                self.lagged_row(p, d + 1, True)
            return
        if axis == 0 and nest.chunked and axis == last:
            self._chunk_split(p, nest, inner, r, d)
            return
        n, lo_, hi_ = f"_gkb_n{axis}", f"_gkb_lo{axis}", f"_gkb_hi{axis}"
        # a constant start is printed literally: LLVM then knows j >= start, drops Numba's
        # negative-index checks on j - 1 and vectorises (an empty range when n < start)
        const_lo = isinstance(r.lo, ir.Const)
        start = str(max(int(r.lo.value), 0)) if const_lo else lo_
        # a start that is not constant but at least one (a periodic gather's `max(1, gn - M + 1)`): the
        # interior's threads test it, always true, which tells LLVM the same (docs/adjoint-forms.md, section 7)
        floor = None if const_lo else floor_of(r.lo)
        guard = f"_gkb_t{axis} >= {floor}" if floor else None
        if axis < last:
            if not const_lo:
                p.line(d, f"{lo_} = max({p.expr(r.lo)}, 0)")
            p.line(d, f"{hi_} = {n if r.hi is None else p.expr(r.hi)}")
            p.line(d, f"for _gkb_t{axis} in {header}:")
            test = f"_gkb_t{axis} >= {start} and _gkb_t{axis} < {hi_}{f' and {guard}' if guard else ''}"
            if nest.merge or nest.ordered:
                # no branch here: a bool the innermost axis reads, so that the general body is printed
                # once whatever the number of split axes (two copies of the body in all, not 1 + axes)
                p.line(d + 1, f"_gkb_in{axis} = {test}{f' and {flag}' if flag else ''}")
                self._axis(p, nest, inner, axis + 1, d + 1, True, f"_gkb_in{axis}")
                if axis == 0 and nest.chunked:
                    self.lagged_row(p, d + 1, True)
                return
            chunked = axis == 0 and nest.chunked
            if chunked:
                self._rows_open(p, d + 1)
            p.line(d + 1, f"if {test}:")
            self._axis(p, nest, inner, axis + 1, d + 2, True)
            p.line(d + 1, "else:")
            self._axis(p, nest, inner, axis + 1, d + 2, False)
            if chunked:
                self._rows_flush(p, d + 1)
                self.lagged_row(p, d + 1, True)
            return
        p.line(d, f"{lo_} = min({start if const_lo else f'max({p.expr(r.lo)}, 0)'}, {n})")
        p.line(d, f"{hi_} = {n if r.hi is None else f'min(max({p.expr(r.hi)}, {lo_}), {n})'}")
        if flag is not None:
            # a thread outside an outer range: the whole row is edge (an empty interior at [0, 0))
            p.line(d, f"if not {flag}:")
            p.line(d + 1, f"{lo_} = 0")
            p.line(d + 1, f"{hi_} = 0")
        if nest.merge or nest.edges_only:
            e, w = f"_gkb_e{axis}", f"_gkb_w{axis}"
            p.line(d, f"{w} = {lo_} + {n} - {hi_}")
            at = d
            if nest.edges_only:
                p.line(d, f"for {e} in {loop}({w}):")
            elif axis == 0:
                p.line(d, f"if {w} <= {SERIAL_EDGES}:")
                p.line(d + 1, f"for {e} in range({w}):")
                at = d + 1
            else:
                p.line(d, f"for {e} in range({w}):")
            # int64: a prange index is unsigned, and an unsigned index mixed with int64 is a float
            p.line(at + 1, f"_gkb_t{axis} = _gk_int64({e}) if {e} < {lo_} else _gk_int64({e}) + ({hi_} - {lo_})")
            self._axis(p, nest, inner, axis + 1, at + 1, False)
            if not nest.edges_only:
                p.line(d, f"for _gkb_t{axis} in {loop if axis == 0 else 'range'}({start}, {hi_}):")
                self._guarded(p, nest, inner, axis, d + 1, guard)
            return
        for first, stop, interior in (("0", lo_, False), (start, hi_, True), (hi_, n, False)):
            p.line(d, f"for _gkb_t{axis} in {loop if axis == 0 else 'range'}({first}, {stop}):")
            self._guarded(p, nest, inner, axis, d + 1, guard if interior else None, interior)

    def _guarded(self, p: Printer, nest: Nest, inner: ir.Interior, axis: int, d: int, guard: str | None,
                 inside: bool = True) -> None:
        """The rest of the nest inside the loop of `axis`, under `guard` where it has one."""
        if guard is not None:
            p.line(d, f"if {guard}:")
            d += 1
        self._axis(p, nest, inner, axis + 1, d, inside)


    def _chunk_split(self, p: Printer, nest: Nest, inner: ir.Interior, r: ir.AxisRange, d: int) -> None:
        """A 1-D chunk [_gkb_a, _gkb_b) split in order: the general body, the interior, the general body,
        each row followed by its lagged row (ir.Deferred). The interior starts where every lagged row it
        runs is inside the chunk's window and the deferred domain, and runs them without tests."""
        df = self.deferred
        const_lo = isinstance(r.lo, ir.Const)
        start = str(max(int(r.lo.value), 0)) if const_lo else f"max({p.expr(r.lo)}, 0)"
        p.line(d, f"_gkb_lo0 = min({start}, _gkb_n0)")
        p.line(d, f"_gkb_hi0 = {'_gkb_n0' if r.hi is None else f'min(max({p.expr(r.hi)}, _gkb_lo0), _gkb_n0)'}")
        lag, window, extent = df.lag, df.window, p.expr(df.extents[0])
        p.line(d, f"_gkb_ia = min(max(_gkb_a, _gkb_lo0, _gkb_a + {window}, {lag}), _gkb_b)")
        p.line(d, f"_gkb_ib = max(min(_gkb_b, _gkb_hi0, {extent} + {lag}), _gkb_ia)")
        for first, stop, interior in (("_gkb_a", "_gkb_ia", False), ("_gkb_ia", "_gkb_ib", True),
                                      ("_gkb_ib", "_gkb_b", False)):
            p.line(d, f"for _gkb_t0 in range({first}, {stop}):")
            p.line(d + 1, "if _gkb_t0 >= 0:")
            self._axis(p, nest, inner, 1, d + 2, interior)
            self.lagged_row(p, d + 2, not interior)

    def lagged_row(self, p: Printer, d: int, guarded: bool) -> None:
        """After body row _gkb_t0 of a chunk: deferred row _gkb_t0 - lag, where the chunk's window and the
        deferred domain allow (`guarded`: tested here; otherwise the loop's range ensures it)."""
        df = self.deferred
        if df is None:
            return
        if guarded:
            p.line(d, f"if _gkb_t0 >= _gkb_a + {df.window}:")
            d += 1
        p.line(d, f"_gkb_d0 = _gkb_t0 - {df.lag}")
        if guarded:
            p.line(d, f"if _gkb_d0 >= 0 and _gkb_d0 < {p.expr(df.extents[0])}:")
            d += 1
        self.deferred_row(p, d, "_gkb_d")

    def deferred_row(self, p: Printer, d: int, var: str) -> None:
        """Deferred row `{var}0` (ir.Deferred): the loops of its inner axes, its statements."""
        df = self.deferred
        for axis in range(1, self.ndim):
            p.line(d, f"for {var}{axis} in range({p.expr(df.extents[axis])}):")
            d += 1
        sx = NumbaSyntax(self.ndim)
        sx.tid = var + "{0}"
        q = Printer(sx)
        reads = {e.name for e in ir.all_exprs(df.body) if isinstance(e, ir.Var)}
        first = defined_before_use(df.body)
        q.block(tuple(a for a in self.zeros if a.name in reads and a.name not in first) + df.body, d)
        p.lines.extend(q.lines)

    def deferred_loops(self, d: int) -> list[str]:
        """Every deferred row, after a launch's loops (no chunks: the serial forms)."""
        if self.deferred is None:
            return []
        p = Printer(NumbaSyntax(self.ndim))
        p.line(d, f"for _gkb_x0 in range({p.expr(self.deferred.extents[0])}):")
        self.deferred_row(p, d + 1, "_gkb_x")
        return p.lines

    def deferred_rest(self) -> list[str]:
        """After the chunks: the deferred rows no chunk ran lagged, serially. Chunk [a, b) ran rows t - lag
        for t in [a + window, b); the rest are t - lag for t in [a, min(a + window, b)) of each chunk, and
        those below -lag or from n0 - lag on (no body row of the launch lags them)."""
        df = self.deferred
        if df is None:
            return []
        p = Printer(NumbaSyntax(self.ndim))
        extent, lag = p.expr(df.extents[0]), df.lag
        p.line(2, "for _gkb_xc in range(_gkb_chunks):")
        p.line(3, "_gkb_xa = _gkb_xc * _gkb_n0 // _gkb_chunks")
        p.line(3, "_gkb_xb = (_gkb_xc + 1) * _gkb_n0 // _gkb_chunks")
        p.line(3, f"for _gkb_xt in range(_gkb_xa, min(_gkb_xa + {df.window}, _gkb_xb)):")
        p.line(4, f"_gkb_x0 = _gkb_xt - {lag}")
        p.line(4, f"if _gkb_x0 >= 0 and _gkb_x0 < {extent}:")
        self.deferred_row(p, 5, "_gkb_x")
        if lag < 0:
            p.line(2, f"for _gkb_x0 in range(min({-lag}, {extent})):")
            self.deferred_row(p, 3, "_gkb_x")
        p.line(2, f"for _gkb_x0 in range(max(_gkb_n0 - {lag}, 0), {extent}):")
        self.deferred_row(p, 3, "_gkb_x")
        return p.lines


def generate(k: ir.Kernel, launch_ndim: int, options: NumbaOptions, header: str = "") -> tuple[str, str]:
    """The Python module source for a typed kernel, and its entry function's name.

    The entry takes the launch extents first, then the kernel's parameters."""
    printer = LoopPrinter(k, launch_ndim, options, header)
    return printer.module(), printer.entry
