"""IR node types: frozen dataclasses, each with a source `loc`.

Expressions are pure trees; statements form structured control flow (no
goto, no return: the frontend turns early returns into if/else). A node's
`type` is None before type inference and a `Scalar` after it; `str(node)`
prints the code it means.

Each node class names the fields that hold its sub-expressions
(`expr_fields`: an Expr or a tuple of them, in evaluation order) and, for
statements, its nested blocks (`block_fields`). `children`, `stmt_exprs`,
`blocks` and the rebuilders of ir/rewrite.py read only these, so a new node
declares its structure once, here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace

from ..errors import InternalError, Loc
from .ops import INFIX, Op
from .types import Array, Scalar, Type

_loc = dict(default=None, compare=False, repr=False, kw_only=True)


def _element(array: str, indices) -> str:
    return f"{array}[{', '.join(map(str, indices))}]"


@dataclass(frozen=True)
class Expr:
    expr_fields = ()  # unannotated: a class attribute, not a dataclass field


@dataclass(frozen=True)
class Const(Expr):
    value: bool | int | float
    type: Scalar | None = None
    weak: bool = False  # a Python literal: takes its type from the other operand
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Var(Expr):
    name: str
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Tid(Expr):
    """Component `axis` of this thread's index in the launch domain."""

    axis: int
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)

    def __post_init__(self):
        if not 0 <= self.axis < 3:
            raise InternalError(f"tid axis {self.axis} out of range", self.loc)

    def __str__(self) -> str:
        return f"tid[{self.axis}]"


@dataclass(frozen=True)
class Apply(Expr):
    expr_fields = ("args",)
    op: Op
    args: tuple[Expr, ...]
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)

    def __post_init__(self):
        if len(self.args) != self.op.arity:
            raise InternalError(f"{self.op.value} takes {self.op.arity} operands, got {len(self.args)}", self.loc)

    def __str__(self) -> str:
        a = self.args
        if self.op in INFIX:
            return f"({a[0]} {self.op.value} {a[1]})"
        if self.op is Op.NEG:
            return f"(-{a[0]})"
        if self.op is Op.NOT:
            return f"(not {a[0]})"
        if self.op is Op.INVERT:
            return f"(~{a[0]})"
        if self.op is Op.CAST:
            return f"{self.type.name if self.type else '?'}({a[0]})"
        return f"{self.op.value}({', '.join(map(str, a))})"


@dataclass(frozen=True)
class Select(Expr):
    """`a if cond else b`; only the chosen operand is evaluated."""

    expr_fields = ("cond", "a", "b")
    cond: Expr
    a: Expr
    b: Expr
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"({self.a} if {self.cond} else {self.b})"


@dataclass(frozen=True)
class Load(Expr):
    expr_fields = ("indices",)
    array: str
    indices: tuple[Expr, ...]
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return self.target

    @property
    def target(self) -> str:
        """The element read, as code."""
        return _element(self.array, self.indices)


@dataclass(frozen=True)
class InBounds(Expr):
    """`index` as axis `axis` of `array`, checked (GRADKERN_BOUNDSCHECK=1): inside
    [0, extent) it is itself; outside, the launch records access `site` (of
    `nsites`) and this thread in the out-of-bounds flag, and the index is 0."""

    expr_fields = ("index",)
    index: Expr
    array: str
    axis: int
    site: int
    nsites: int
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"inbounds({self.index}, {self.array}.shape[{self.axis}])"


@dataclass(frozen=True)
class Shape(Expr):
    """`array.shape[axis]`. `unpacked`, set by the frontend only, holds the names of
    `a, b, c = array.shape`: type inference checks that the array has one dimension
    per name, then clears it (docs/language.md)."""

    array: str
    axis: int
    type: Scalar | None = None
    loc: Loc | None = field(**_loc)
    unpacked: tuple[str, ...] = field(default=(), compare=False, repr=False, kw_only=True)

    def __str__(self) -> str:
        return f"{self.array}.shape[{self.axis}]"


@dataclass(frozen=True)
class Stmt:
    # every statement kind declares `expr_fields` (no default: an unknown kind fails loudly)
    block_fields = ()


@dataclass(frozen=True)
class Assign(Stmt):
    expr_fields = ("value",)
    name: str
    value: Expr
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"{self.name} = {self.value}"


@dataclass(frozen=True)
class Store(Stmt):
    expr_fields = ("indices", "value")
    array: str
    indices: tuple[Expr, ...]
    value: Expr
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"{self.target} = {self.value}"

    @property
    def target(self) -> str:
        """The element written, as code: `u[(i + 1)]`."""
        return _element(self.array, self.indices)


@dataclass(frozen=True)
class AtomicAdd(Stmt):
    """`array[indices] += value` performed atomically: the one sanctioned shared write."""

    expr_fields = ("indices", "value")
    array: str
    indices: tuple[Expr, ...]
    value: Expr
    loc: Loc | None = field(**_loc)
    # set by analysis/rows.py where the pipeline prepares a parallel CPU launch: c when the index on array
    # axis 0 is the thread's launch index on axis 0 plus the constant c (through tid aliases), None otherwise
    # or not analysed (ir/verify.py checks a set value against the index)
    row: int | None = field(default=None, kw_only=True)

    def __str__(self) -> str:
        return f"atomic_add({self.target}, {self.value})"

    @property
    def target(self) -> str:
        """The element added to, as code."""
        return _element(self.array, self.indices)


@dataclass(frozen=True)
class If(Stmt):
    expr_fields = ("cond",)
    block_fields = ("then", "orelse")
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"if {self.cond}: ..."


@dataclass(frozen=True)
class For(Stmt):
    """`for var in range(start, stop, step)`; `var` is int64 and local to the body."""

    expr_fields = ("start", "stop", "step")
    block_fields = ("body",)
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[Stmt, ...]
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"for {self.var} in range({self.start}, {self.stop}, {self.step}): ..."


@dataclass(frozen=True)
class While(Stmt):
    expr_fields = ("cond",)
    block_fields = ("body",)
    cond: Expr
    body: tuple[Stmt, ...]
    loc: Loc | None = field(**_loc)

    def __str__(self) -> str:
        return f"while {self.cond}: ..."


@dataclass(frozen=True)
class Param:
    name: str
    type: Type | None = None
    is_array: bool = False  # decided by use in the body (indexed, .shape, atomic_add)
    written: bool = False  # the kernel stores into it (arrays only)
    used: bool = True  # the body reads it (as an array or a scalar)
    # an array's shape where the pipeline allocates it and fixes it (the race check's report: (5,)), else None
    extent: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return f"{self.name}: {self.type}" if self.type is not None else self.name


@dataclass(frozen=True)
class AxisRange:
    """lo <= tid[axis] < hi (hi None: up to the launch extent). `lo` and `hi` are
    launch invariants along this axis and every inner one: they may read the tid
    of outer axes only."""

    axis: int
    lo: Expr
    hi: Expr | None

    def __str__(self) -> str:
        return f"{self.lo} <= tid[{self.axis}] < {'n' if self.hi is None else self.hi}"


@dataclass(frozen=True)
class Interior:
    """The body specialised for threads inside every range of `ranges` (one per
    split launch axis, ascending), where the boundary tests on those axes have
    known values (transforms/split.py). Elsewhere the kernel's own body runs."""

    ranges: tuple[AxisRange, ...]
    body: tuple[Stmt, ...]

    def on(self, axis: int) -> AxisRange | None:
        """The range on `axis`, or None where this axis is not split."""
        return next((r for r in self.ranges if r.axis == axis), None)


@dataclass(frozen=True)
class Deferred:
    """Statements that every thread of a second domain runs after every thread of the kernel's body has
    run (transforms/fold.py): in them tid is the deferred thread's index, and the domain is `extents`
    (per launch axis, int64 expressions of parameters). A backend that runs axis 0 in chunks, the rows of
    a chunk in order, may instead run deferred row r right after body row r + `lag` of a chunk whose start
    is at least `window` rows before that row: the body reads what deferred row r writes only in rows
    r + lag - window to r + lag (the transform proves it). Every other row runs after the body's loop."""

    body: tuple[Stmt, ...]
    extents: tuple[Expr, ...]
    lag: int
    window: int


@dataclass(frozen=True)
class Kernel:
    """A kernel: parameters, a structured body, and the launch dimensionality it
    uses (`tid_ndim`, 0 if it never calls gk.tid()). `locals` maps each local to
    its type once types are inferred. `interior`, when set, is an equivalent
    body for the threads inside its per-axis index ranges; `deferred`, when set,
    statements run after the body for a second domain of threads."""

    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    tid_ndim: int
    locals: tuple[tuple[str, Scalar], ...] = ()
    interior: Interior | None = None
    thread_indices: frozenset[str] = frozenset()
    loc: Loc | None = field(**_loc)
    deferred: Deferred | None = field(default=None, kw_only=True)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def local_types(self) -> dict[str, Scalar]:
        return dict(self.locals)


def flat_fields(node, names: tuple[str, ...]) -> tuple:
    """The values of fields `names` of `node`, tuple-valued fields spliced in."""
    if len(names) == 1:
        v = getattr(node, names[0])
        return v if isinstance(v, tuple) else (v,)
    out: list = []
    for n in names:
        v = getattr(node, n)
        if isinstance(v, tuple):
            out.extend(v)
        else:
            out.append(v)
    return tuple(out)


def children(e: Expr) -> tuple[Expr, ...]:
    """The sub-expressions of an expression, in evaluation order."""
    return flat_fields(e, e.expr_fields) if e.expr_fields else ()


def walk_expr(e: Expr) -> Iterator[Expr]:
    """Pre-order walk of an expression tree."""
    yield e
    for c in children(e):
        yield from walk_expr(c)


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement evaluates itself (not those of nested blocks)."""
    names = getattr(s, "expr_fields", None)
    if names is None:
        raise TypeError(type(s))
    return flat_fields(s, names)


def blocks(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    """The nested statement blocks of a statement."""
    names = s.block_fields
    if not names:
        return ()
    if len(names) == 1:
        return (getattr(s, names[0]),)
    return tuple([getattr(s, n) for n in names])


def walk_stmts(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Pre-order walk over every statement of a block, nested ones included."""
    for s in body:
        yield s
        for b in blocks(s):
            yield from walk_stmts(b)


def all_exprs(body: tuple[Stmt, ...]) -> Iterator[Expr]:
    """Every expression node in a block (pre-order within each statement)."""
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            yield from walk_expr(e)


# what an access does to its element, in error messages
ACCESS_VERBS = {Load: "reads", Store: "writes", AtomicAdd: "atomically adds to"}


def field_names(node) -> list[str]:
    return [f.name for f in fields(node)]


__all__ = [
    "Expr", "Const", "Var", "Tid", "Apply", "Select", "Load", "Shape",
    "Stmt", "Assign", "Store", "AtomicAdd", "If", "For", "While",
    "Param", "Kernel", "Array", "Scalar", "children", "walk_expr", "stmt_exprs",
    "blocks", "walk_stmts", "all_exprs", "replace", "ACCESS_VERBS",
]
