"""The one IR walker both backends share. A backend supplies a `Syntax` (tables
of operator templates, literals, statement forms) and the walker prints typed
IR with it: backends differ by tables, not by logic (STYLE §5)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InternalError
from ..ir import nodes as ir
from ..ir.names import OOB
from ..ir.ops import Op
from ..ir.types import Scalar


@dataclass
class Syntax:
    """What a target language looks like. Templates use {0}, {1} for operands."""

    ops: dict[Op, str]
    indent: str = "    "
    empty_block: str | None = None  # printed for an empty block ("pass")
    if_open: str = "if {0}:"
    else_open: str = "else:"
    block_close: str | None = None  # printed after a block ("}")
    while_open: str = "while {0}:"
    assign: str = "{0} = {1}"
    store: str = "{0} = {1}"
    atomic_add: str = "{0} += {1}"
    select: str = "({1} if {0} else {2})"
    shape: str = "{0}.shape[{1}]"
    tid: str = "_gkb_t{0}"
    statement_end: str = ""
    extra: dict = field(default_factory=dict)

    # per-language hooks, overridden by subclasses
    def literal(self, value, t: Scalar) -> str:
        raise NotImplementedError

    def cast(self, operand: str, src: Scalar, dst: Scalar) -> str:
        raise NotImplementedError

    def index(self, array: str, indices: list[str]) -> str:
        raise NotImplementedError

    def load(self, e: ir.Load, indices: list[str]) -> str:
        """The value of the plain load `e` (a backend may read more than the element)."""
        return self.index(e.array, indices)

    def store_lines(self, s: ir.Store, indices: list[str], value: str) -> list[str]:
        """The statements of the plain store `s` (a backend may write more than the element)."""
        return [self.store.format(self.index(s.array, indices), value)]

    def copy(self, name: str, value: str, is_int: bool) -> str:
        """`name = value` where value is another local."""
        return self.assign.format(name, value)

    def defined(self, name: str) -> list[str]:
        """Statements printed right after each definition of the local `name` (an assignment, at the top of a
        loop over it): none here (the Numba printer keeps an unsigned copy of some indices)."""
        return []

    def atomic_index(self, array: str, indices: list[str]) -> str:
        """The element an atomic add updates (a backend may redirect it)."""
        return self.index(array, indices)

    def atomic(self, array: str, indices: list[str], value: str) -> str:
        """The statement `array[indices] += value`, performed atomically."""
        return self.atomic_add.format(self.atomic_index(array, indices), value)

    def atomic_stmt(self, s: ir.AtomicAdd, indices: list[str], value: str) -> str:
        """The atomic add `s` (a backend may print it by its analysed form: `s.row`)."""
        return self.atomic(s.array, indices, value)

    def shape_of(self, array: str, axis: int) -> str:
        return self.shape.format(array, axis)

    def name(self, name: str) -> str:
        """A kernel identifier as the target language spells it."""
        return name

    def apply(self, e: ir.Apply, args: list[str]) -> str | None:
        """A language-specific form of an operation (None: use the `ops` template)."""
        return None

    def for_open(self, var: str, start: str, stop: str, step: str, step_node: ir.Expr) -> list[str]:
        raise NotImplementedError

    launch_ndim: int = 1

    def flat_thread(self) -> str:
        """This thread's row-major index in the launch domain."""
        flat = self.tid.format(0)
        for a in range(1, self.launch_ndim):
            flat = f"({flat} * _gkb_n{a} + {self.tid.format(a)})"
        return flat

    def in_bounds(self, index: str, array: str, axis: int, site: int, nsites: int) -> str:
        """A checked index (ir.InBounds): the helper `_gkb_check` each backend defines."""
        return (f"_gkb_check({index}, {self.shape_of(array, axis)}, {site}, {nsites}, {self.name(OOB)}, "
                f"{self.flat_thread()})")


class Printer:
    """Prints a typed kernel body with a Syntax; collects lines."""

    def __init__(self, syntax: Syntax):
        self.sx = syntax
        self.lines: list[str] = []

    def expr(self, e: ir.Expr) -> str:
        sx = self.sx
        if isinstance(e, ir.Const):
            return sx.literal(e.value, e.type)
        if isinstance(e, ir.Var):
            return sx.name(e.name)
        if isinstance(e, ir.Tid):
            return sx.tid.format(e.axis)
        if isinstance(e, ir.Shape):
            return sx.shape_of(e.array, e.axis)
        if isinstance(e, ir.Load):
            return sx.load(e, [self.expr(i) for i in e.indices])
        if isinstance(e, ir.Select):
            return sx.select.format(self.expr(e.cond), self.expr(e.a), self.expr(e.b))
        if isinstance(e, ir.InBounds):
            return sx.in_bounds(self.expr(e.index), e.array, e.axis, e.site, e.nsites)
        if isinstance(e, ir.Apply):
            args = [self.expr(a) for a in e.args]
            if e.op is Op.CAST:
                return sx.cast(args[0], e.args[0].type, e.type)
            custom = sx.apply(e, args)
            if custom is not None:
                return custom
            template = sx.ops.get(e.op)
            if template is None:
                raise InternalError(f"backend has no template for {e.op.name}", e.loc)
            return template.format(*args, t=e.type.name)
        raise InternalError(f"cannot print {type(e).__name__}", getattr(e, "loc", None))

    def line(self, depth: int, text: str):
        self.lines.append(self.sx.indent * depth + text)

    def block(self, body: tuple[ir.Stmt, ...], depth: int):
        sx = self.sx
        if not body and sx.empty_block:
            self.line(depth, sx.empty_block)
        end = sx.statement_end
        for s in body:
            if isinstance(s, ir.Assign):
                name = sx.name(s.name)
                if isinstance(s.value, ir.Var):
                    self.line(depth, sx.copy(name, sx.name(s.value.name), s.value.type.is_int) + end)
                else:
                    self.line(depth, sx.assign.format(name, self.expr(s.value)) + end)
                for text in sx.defined(name):
                    self.line(depth, text + end)
            elif isinstance(s, ir.Store):
                for text in sx.store_lines(s, [self.expr(i) for i in s.indices], self.expr(s.value)):
                    self.line(depth, text + end)
            elif isinstance(s, ir.AtomicAdd):
                self.line(depth, sx.atomic_stmt(s, [self.expr(i) for i in s.indices], self.expr(s.value)) + end)
            elif isinstance(s, ir.If):
                self.line(depth, sx.if_open.format(self.expr(s.cond)))
                self.block(s.then, depth + 1)
                if s.orelse:
                    self.line(depth, sx.else_open)
                    self.block(s.orelse, depth + 1)
                if sx.block_close:
                    self.line(depth, sx.block_close)
            elif isinstance(s, ir.For):
                bounds = (self.expr(s.start), self.expr(s.stop), self.expr(s.step))
                for text in sx.for_open(sx.name(s.var), *bounds, s.step):
                    self.line(depth, text)
                for text in sx.defined(sx.name(s.var)):
                    self.line(depth + 1, text + end)
                self.block(s.body, depth + 1)
                if sx.block_close:
                    self.line(depth, sx.block_close)
            elif isinstance(s, ir.While):
                self.line(depth, sx.while_open.format(self.expr(s.cond)))
                self.block(s.body, depth + 1)
                if sx.block_close:
                    self.line(depth, sx.block_close)
            else:
                raise InternalError(f"cannot print {type(s).__name__}", getattr(s, "loc", None))
