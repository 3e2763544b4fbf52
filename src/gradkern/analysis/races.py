"""Race detection: prove statically that no thread touches an element another
thread writes, or build the exact run-time check (docs/launches.md).

The static proof (`race_proof`) is sound for every kernel the language
accepts: it follows every binding of every name and treats index arithmetic
as exact only under checks that it does not wrap (analysis/affine.py,
analysis/access.py, analysis/overflow.py). A proof whose checks hold for every
launch needs no run-time check; one whose checks depend on the launch (`i * n`
with a run-time n) comes with the run-time check, which runs only at launches
where the checks fail.

The check is an instrumented copy of the kernel that runs before any user
buffer is written. For every written array whose freedom from races the static
analysis could not prove for every launch it keeps, per element,
the (thread, access site) of the plain writer, of the first reader, of a second
reader from another thread, and of the first and a second atomic adder; an
access that meets another thread's conflicting access records the race and the
launch is refused with both sites named. It computes only what indices and
branches depend on, unless those read an array the kernel writes: then it runs
the whole kernel on scratch copies of the written arrays, so it sees the same
values the launch would.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InternalError
from ..ir import build as b
from ..ir import nodes as ir
from ..ir.names import RACE_CHECK as P
from ..ir.names import Namer
from ..ir.ops import Op
from ..ir.rewrite import with_blocks
from ..ir.types import BOOL, I64, Array
from .access import launch_facts
from .affine import proves_race_free
from .overflow import Exactness

RACE = P + "race"  # int64[RACE_LENGTH]: found, site, other site, thread, other thread
RACE_LENGTH = 5
EXTENT = P + "n"
# per tracked array: plain writer, first reader, second reader, first atomic, second atomic
TRACKS = ("w", "r", "m", "a", "am")
# the parallel check: per tracked array, the stamp of some plain writer, reader and atomic adder;
# per thread, its first conflicting site and the other access's stamp (-1: none)
PARALLEL_TRACKS = ("w", "r", "a")
HIT_SITE = P + "hit_site"
HIT_OTHER = P + "hit_other"


@dataclass(frozen=True)
class Site:
    kind: str  # "read", "write" or "atomic_add"
    text: str  # the access as code, e.g. "u[(i + 1)]"
    loc: object


@dataclass(frozen=True)
class RaceCheck:
    """The instrumented kernel and what the runtime needs to run and report it."""

    kernel: ir.Kernel
    tracked: tuple[str, ...]  # written arrays whose elements are tracked
    sites: tuple[Site, ...]
    copies: tuple[str, ...]  # arrays the check must run on scratch copies of
    # True when the check reads no array contents: its verdict then depends only
    # on the launch shape, the array shapes and the scalar arguments
    data_independent: bool = False
    race_free: set = field(default_factory=set, compare=False)  # keys of launches found race-free
    # the same check as two parallel launches (note, then check), when it computes
    # only indices and branches from arrays the kernel does not write
    parallel: tuple[ir.Kernel, ir.Kernel] | None = None
    # the static proof, where there is one: launches at which it holds skip the check
    proof: Exactness | None = None


def race_proof(k: ir.Kernel, proofs: dict[str, Exactness | None] | None = None) -> Exactness | None:
    """The static proof that no element is shared with a writer, as the checks
    under which it holds (analysis/overflow.py), or None when there is none.

    Plainly written arrays must be own (analysis/access.py: every access in the
    thread's own slab) or proven by the affine analysis under the guards
    (analysis/affine.py); atomic targets must be touched only by atomic adds,
    which never conflict with each other. Both analyses reason about exact
    integers, so the proof holds at a launch where none of the index
    arithmetic it relied on wraps (`Exactness.holds`), and for every launch
    when `Exactness.holds_always`."""
    proof = Exactness()
    for p in (array_proofs(k) if proofs is None else proofs).values():
        if p is None:
            return None
        proof = proof.merge(p)
    return proof


def array_proofs(k: ir.Kernel) -> dict[str, Exactness | None]:
    """Per array the kernel writes, the proof that no element of it is shared
    with a writer (None where there is none). Two accesses can meet only on the
    same array, so the kernel's proof is the conjunction of these."""
    atomic = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd)}
    plain = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.Store)}
    loads = {e.array for e in ir.all_exprs(k.body) if isinstance(e, ir.Load)}
    facts = launch_facts(k)
    out: dict[str, Exactness | None] = {}
    for a in sorted(atomic | plain):
        if a in atomic:  # atomic adds never conflict with each other, only with plain accesses
            out[a] = None if a in plain | loads else Exactness()
        elif a in facts.own:
            out[a] = facts.exactness({a})
        else:
            out[a] = proves_race_free(k, {a})
    return out


def param_bits(k: ir.Kernel) -> dict[str, int]:
    """The width of each integer or bool scalar parameter (for `Exactness.holds_always`)."""
    return {p.name: 1 if p.type.name == "bool" else int(p.type.name[3:]) for p in k.params
            if isinstance(p.type, ir.Scalar) and (p.type.is_int or p.type.name == "bool")}


def written_arrays(k: ir.Kernel) -> set[str]:
    return {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}


class _Instrument:
    def __init__(self, k: ir.Kernel, launch_ndim: int, mode: str, tracked: set[str]):
        self.k = k
        self.ndim = launch_ndim
        self.mode = mode  # "serial" (one thread, exact), or the parallel pair "note" then "check"
        self.tracked = sorted(tracked)
        self.sites: list[Site] = []
        self.locals = dict(k.locals)
        self.namer = Namer(P)

    def fresh(self, t: ir.Scalar = I64) -> str:
        name = self.namer.fresh("v")
        self.locals[name] = t
        return name

    def thread(self) -> ir.Expr:
        """This thread's flat index in the launch domain."""
        t = ir.Tid(0, type=I64)
        for a in range(1, self.ndim):
            t = b.add(b.mul(t, b.var(f"{EXTENT}{a}", I64)), ir.Tid(a, type=I64))
        return t

    def site(self, kind: str, text: str, loc) -> int:
        self.sites.append(Site(kind, text, loc))
        return len(self.sites) - 1

    def record(self, kind: str, array: str, idx: tuple[ir.Expr, ...], text: str, loc) -> list[ir.Stmt]:
        """Check one access against the element's history, then note it."""
        if self.mode != "serial":
            return self.record_parallel(kind, array, idx, text, loc)
        s = b.const(self.site(kind, text, loc), I64)
        nsites = b.var(P + "nsites", I64)
        me = b.var(P + "me", I64)
        stamp = b.add(b.mul(me, nsites), s)
        neg = b.const(-1, I64)
        t = {name: f"{P}{name}_{array}" for name in TRACKS}
        cur = {name: self.fresh() for name in TRACKS}
        out: list[ir.Stmt] = []
        bound = []
        for i in idx:  # each index evaluated once, not once per track (the tracks are the only arrays written)
            if isinstance(i, (ir.Var, ir.Const)):
                bound.append(i)
            else:
                name = self.fresh(i.type)
                out.append(ir.Assign(name, i))
                bound.append(b.var(name, i.type))
        idx = tuple(bound)
        out += [ir.Assign(cur[n], ir.Load(t[n], idx, type=I64)) for n in TRACKS]

        def both(x, y) -> ir.Expr:
            return ir.Apply(Op.AND, (x, y), type=BOOL)

        def other(name) -> ir.Expr:  # the stamp in track `name` is another thread's
            v = b.var(cur[name], I64)
            return both(b.cmp(Op.NE, v, neg), b.cmp(Op.NE, b.apply(Op.FLOORDIV, v, nsites), me))

        def conflict(*names) -> list[ir.Stmt]:
            """Record the first race found: the first of these tracks holding another thread's stamp, in
            order, chosen by one expression and reported by one branch (one per access, not one per track:
            Numba's compile time grows with the branches, docs/compile-time.md)."""
            first: ir.Expr = neg
            for name in reversed(names):
                first = b.select(other(name), b.var(cur[name], I64), first)
            v = b.var(self.fresh(), I64)
            found = both(b.cmp(Op.NE, v, neg), b.cmp(Op.EQ, ir.Load(RACE, (b.const(0, I64),), type=I64),
                                                     b.const(0, I64)))
            return [ir.Assign(v.name, first),
                    ir.If(found, tuple(ir.Store(RACE, (b.const(k, I64),), x) for k, x in enumerate(
                        (b.const(1, I64), s, b.apply(Op.MOD, v, nsites), me, b.apply(Op.FLOORDIV, v, nsites)))))]

        def note(name) -> ir.Stmt:
            return ir.Store(t[name], idx, stamp)

        def if_(cond, *then) -> ir.Stmt:
            return ir.If(cond, tuple(then))

        def is_none(name):
            return b.cmp(Op.EQ, b.var(cur[name], I64), neg)

        if kind == "read":
            out += [*conflict("w", "a", "am"),
                    ir.If(is_none("r"), (note("r"),), (if_(both(other("r"), is_none("m")), note("m")),))]
        elif kind == "write":
            out += [*conflict("w", "r", "m", "a", "am"), note("w")]
        else:  # atomic add: conflicts only with plain accesses of other threads
            out += [*conflict("w", "r", "m"),
                    ir.If(is_none("a"), (note("a"),), (if_(both(other("a"), is_none("am")), note("am")),))]
        return out

    def record_parallel(self, kind: str, array: str, idx: tuple[ir.Expr, ...], text: str, loc) -> list[ir.Stmt]:
        """The parallel check (two launches). "note": every access stores its stamp
        into its kind's track (plain stores: some thread's stamp wins). "check": an
        access conflicts when a track it must not share holds another thread's
        stamp. If any writer w and another thread x touch an element, the winning
        writer w* differs from x or from w, and that one sees it; likewise for an
        atomic adder and a reader. A conflict is noted in the thread's own slot."""
        s = b.const(self.site(kind, text, loc), I64)
        nsites = b.var(P + "nsites", I64)
        me = b.var(P + "me", I64)
        track = {name: f"{P}{name}_{array}" for name in PARALLEL_TRACKS}
        if self.mode == "note":
            name = {"read": "r", "write": "w", "atomic_add": "a"}[kind]
            return [ir.Store(track[name], idx, b.add(b.mul(me, nsites), s))]
        against = {"read": ("w", "a"), "write": ("w", "r", "a"), "atomic_add": ("w", "r")}[kind]
        out: list[ir.Stmt] = []
        for name in against:
            v = self.fresh()
            out.append(ir.Assign(v, ir.Load(track[name], idx, type=I64)))
            other = b.cmp(Op.NE, b.apply(Op.FLOORDIV, b.var(v, I64), nsites), me)
            if not (kind == "write" and name == "w"):  # a write always finds some writer's stamp
                other = ir.Apply(Op.AND, (b.cmp(Op.NE, b.var(v, I64), b.const(-1, I64)), other), type=BOOL)
            first = b.cmp(Op.EQ, ir.Load(HIT_SITE, (me,), type=I64), b.const(-1, I64))
            out.append(ir.If(ir.Apply(Op.AND, (first, other), type=BOOL),
                             (ir.Store(HIT_SITE, (me,), s), ir.Store(HIT_OTHER, (me,), b.var(v, I64)))))
        return out

    def loads(self, e: ir.Expr) -> list[ir.Stmt]:
        """Records for the tracked loads `e` evaluates, under the same laziness."""
        if isinstance(e, ir.Load):
            out = [x for i in e.indices for x in self.loads(i)]
            if e.array in self.tracked:
                out += self.record("read", e.array, e.indices, str(e), e.loc)
            return out
        if isinstance(e, ir.Select):
            return self.loads(e.cond) + [ir.If(e.cond, tuple(self.loads(e.a)), tuple(self.loads(e.b)))] \
                if self.loads(e.a) or self.loads(e.b) else self.loads(e.cond)
        if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
            first, second = self.loads(e.args[0]), self.loads(e.args[1])
            if not second:
                return first
            cond = e.args[0] if e.op is Op.AND else ir.Apply(Op.NOT, (e.args[0],), type=e.args[0].type)
            return first + [ir.If(cond, tuple(second))]
        return [x for c in ir.children(e) for x in self.loads(c)]

    def block(self, body) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            for e in ir.stmt_exprs(s):
                out += self.loads(e)
            if isinstance(s, ir.Store) and s.array in self.tracked:
                out += self.record("write", s.array, s.indices, s.target, s.loc)
            elif isinstance(s, ir.AtomicAdd) and s.array in self.tracked:
                out += self.record("atomic_add", s.array, s.indices, s.target, s.loc)
            out.append(with_blocks(s, self.block))
        return tuple(out)


def control_locals(body: tuple[ir.Stmt, ...]) -> set[str]:
    """Locals that control flow, indices or the laziness of loads depend on."""
    def uses(e: ir.Expr) -> set[str]:
        return {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}

    live: set[str] = set()
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.If, ir.While, ir.For)):
            for e in ir.stmt_exprs(s):
                live |= uses(e)
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            for i in s.indices:
                live |= uses(i)
    for e in ir.all_exprs(body):
        if isinstance(e, ir.Load):
            for i in e.indices:
                live |= uses(i)
        elif isinstance(e, ir.Select):
            live |= uses(e.cond)
        elif isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
            live |= uses(e.args[0])
    while True:
        grown = set(live)
        for s in ir.walk_stmts(body):
            if isinstance(s, ir.Assign) and s.name in grown:
                grown |= uses(s.value)
        if grown == live:
            return live
        live = grown


def _prune(body: tuple[ir.Stmt, ...], live: set[str], written: set[str]) -> tuple[ir.Stmt, ...]:
    """Drop the user's writes and assignments nothing live needs; the
    instrumentation's own statements stay."""
    out = []
    for s in body:
        if isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array in written:
            continue
        if isinstance(s, ir.Assign) and not s.name.startswith(P) and s.name not in live:
            continue
        out.append(with_blocks(s, lambda blk: _prune(blk, live, written)))
    return tuple(out)


def reads_written_for_control(body, live: set[str], written: set[str]) -> bool:
    """Whether a value the skeleton keeps is loaded from an array the kernel writes."""
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign) and s.name in live:
            exprs = (s.value,)
        elif isinstance(s, (ir.If, ir.While, ir.For)):
            exprs = ir.stmt_exprs(s)
        elif isinstance(s, (ir.Store, ir.AtomicAdd)):
            exprs = s.indices
        else:
            exprs = ()
        for e in exprs:
            if any(isinstance(x, ir.Load) and x.array in written for x in ir.walk_expr(e)):
                return True
    for e in ir.all_exprs(body):
        parts = e.indices if isinstance(e, ir.Load) else (e.cond,) if isinstance(e, ir.Select) else ()
        for p in parts:
            if any(isinstance(x, ir.Load) and x.array in written for x in ir.walk_expr(p)):
                return True
    return False


def _instrumented(k: ir.Kernel, launch_ndim: int, mode: str, tracked: set[str]):
    """The instrumented kernel of one mode, its sites, and whether it needs scratch copies."""
    inst = _Instrument(k, launch_ndim, mode, tracked)
    written = written_arrays(k)
    live = control_locals(k.body)
    body = inst.block(k.body)
    copies = reads_written_for_control(k.body, live, written)
    if not copies:
        body = _prune(body, live, written)
    nsites = len(inst.sites)
    prologue = (ir.Assign(P + "me", inst.thread()), ir.Assign(P + "nsites", b.const(max(nsites, 1), I64)))
    inst.locals[P + "me"] = I64
    inst.locals[P + "nsites"] = I64
    params = list(k.params)
    tracks = TRACKS if mode == "serial" else PARALLEL_TRACKS
    for a in inst.tracked:
        t = k.param(a).type
        params += [ir.Param(f"{P}{n}_{a}", Array(I64, t.ndim), is_array=True, written=True) for n in tracks]
    if mode == "serial":
        params.append(ir.Param(RACE, Array(I64, 1), is_array=True, written=True, extent=(RACE_LENGTH,)))
    elif mode == "check":
        params += [ir.Param(n, Array(I64, 1), is_array=True, written=True) for n in (HIT_SITE, HIT_OTHER)]
    params += [ir.Param(f"{EXTENT}{a}", I64) for a in range(1, launch_ndim)]
    names = {p.name for p in params}
    local_items = tuple(sorted((n, t) for n, t in inst.locals.items() if n not in names))
    suffix = {"serial": "racecheck", "note": "racenote", "check": "racecheck_par"}[mode]
    kernel = replace(k, name=f"{k.name}_{suffix}", params=tuple(params), body=prologue + body,
                     tid_ndim=launch_ndim, locals=local_items, interior=None)
    return kernel, inst, copies


def race_check_kernel(k: ir.Kernel, launch_ndim: int, proofs: dict[str, Exactness | None] | None = None,
                      param_widths: dict[str, int] | None = None) -> RaceCheck:
    """The instrumented kernel that finds, exactly, whether a launch races
    (run serially), and its parallel form when it needs no scratch copies.
    `proofs` (`array_proofs`): an array whose proof holds at every launch is
    not tracked, so the check instruments only the accesses the static
    analysis could not decide; launches where every proof holds skip it."""
    written = written_arrays(k)
    proofs = proofs if proofs is not None else {a: None for a in written}
    widths = param_widths if param_widths is not None else param_bits(k)
    tracked = {a for a in written if proofs.get(a) is None or not proofs[a].holds_always(widths)}
    kernel, inst, copies = _instrumented(k, launch_ndim, "serial", tracked)
    user_arrays = {p.name for p in k.params}
    reads = any(isinstance(e, ir.Load) and e.array in user_arrays for e in ir.all_exprs(kernel.body))
    parallel = None
    if not copies:
        note, _, _ = _instrumented(k, launch_ndim, "note", tracked)
        check, inst_check, _ = _instrumented(k, launch_ndim, "check", tracked)
        if inst_check.sites != inst.sites:
            raise InternalError("the parallel race check numbered its access sites differently", k.loc)
        parallel = (note, check)
    return RaceCheck(kernel, tuple(inst.tracked), tuple(inst.sites), tuple(sorted(written)) if copies else (),
                     data_independent=not reads, parallel=parallel, proof=race_proof(k, proofs))
