"""The index analysis: which integer expressions of a kernel are `tid[axis] + c`, c an integer constant, and
which locals hold the thread index (docs/adjoint-forms.md).

One analysis, computed once per kernel object (`indices(k)`; the IR is immutable, so the answer is kept on
the kernel, as TVM's passes share one `arith::Analyzer`), that every pass asks: the access analysis's
thread-own slabs and overwritten outputs, the gather's stencil offsets (which extends it: below), interior
splitting's boundary tests, the unrolling of offset loops, the CPU's private rows and the verifier's check
of them, and the pipeline's choice of the locals the CPU prints as its loop index. So they all agree on what
an offset is.

Why it is sound. The form is syntactic: `tid[axis]` itself, `x + c`, `c + x` or `x - c` of such an x, or
a local every binding of which, in the body and the interior, is such an expression with the same
(axis, c) (`Indices.offsets`, a least fixpoint, so a cycle of copies is none; a loop variable never is
one). A local is bound before it is read on every path (the frontend's rule), so wherever an alias is
read it holds the value of its last binding, which is tid[axis] + c of this thread. In machine integers
`x + c` wraps, but x ↦ x + c is a bijection modulo 2^w: distinct thread indices give distinct values of
tid[axis] + c, which is all that an own slab (one element per thread) needs; a value that wrapped would
also leave its array, which is an error (docs/launches.md), not another element.

Two notions of "a local holding the thread index", on purpose (docs/adjoint-forms.md):

* `offsets` with c = 0: what an index's *value* is (copies `j = i`, `i = t + 1 - 1`, bindings in the
  interior too). Every proof asks this one.
* `tid_copies`: locals every binding of which, in the body, is the node `Tid(axis)` itself. The CPU
  printer prints them as plain aliases of its loop index (`ir.Kernel.thread_indices`; Numba's parfor pass
  refuses a later write to a plain alias of the prange index, so anything else is printed as a copy).
  A backend concern, never a proof's.

The gather (transforms/gather.py, `_Offsets`) recognises more than `offset`: locals set once before all
their uses, and periodic selects `i + 1 if i < n - 1 else i + 1 - n`. On an index with neither, its answer
is `offset`'s (it starts from `offsets` and follows the same `+`/`-` of constants).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from types import MappingProxyType

from . import nodes as ir
from .ops import Op

Offset = tuple[int, int]  # (tid axis, constant c)


def _int_const(e: ir.Expr) -> int | None:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool) \
            and (e.type is None or e.type.is_int and not e.type.is_bool):
        return int(e.value)
    return None


def _offset(e: ir.Expr, aliases: Mapping[str, Offset]) -> Offset | None:
    """(axis, c) when `e` is tid[axis] + c through the locals of `aliases`, else None."""
    if isinstance(e, ir.Tid):
        return (e.axis, 0)
    if isinstance(e, ir.Var):
        return aliases.get(e.name)
    if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB) and len(e.args) == 2:
        a, b = e.args
        c = _int_const(b)
        if c is not None:
            base = _offset(a, aliases)
            return None if base is None else (base[0], base[1] + (c if e.op is Op.ADD else -c))
        c = _int_const(a)
        if e.op is Op.ADD and c is not None:
            base = _offset(b, aliases)
            return None if base is None else (base[0], base[1] + c)
    return None


def _bindings(stmts: tuple[ir.Stmt, ...]) -> dict[str, list[ir.Expr | None]]:
    """Every binding of each local in `stmts`: an assignment's value, None for a loop variable."""
    binds: dict[str, list[ir.Expr | None]] = {}
    for s in ir.walk_stmts(stmts):
        if isinstance(s, ir.Assign):
            binds.setdefault(s.name, []).append(s.value)
        elif isinstance(s, ir.For):
            binds.setdefault(s.var, []).append(None)
    return binds


def _offset_aliases(bodies: tuple[ir.Stmt, ...]) -> dict[str, Offset]:
    """Locals that hold tid[axis] + c wherever they are read (module doc): every binding of them, in
    `bodies` (the body and the interior), is tid[axis] + c with one (axis, c), directly or through other such
    locals."""
    binds = _bindings(bodies)
    aliases: dict[str, Offset] = {}
    while True:
        more = {}
        for n, values in binds.items():
            if n in aliases:
                continue
            found = {None if v is None else _offset(v, aliases) for v in values}
            if len(found) == 1 and None not in found:
                more[n] = found.pop()
        if not more:
            return aliases
        aliases |= more


def _tid_copies(body: tuple[ir.Stmt, ...]) -> dict[str, int]:
    """Locals every binding of which, in the body, is the node `Tid(axis)` itself (module doc)."""
    assigns = _bindings(body)
    return {n: v[0].axis for n, v in assigns.items()
            if isinstance(v[0], ir.Tid) and all(isinstance(x, ir.Tid) and x.axis == v[0].axis for x in v)}


class Indices:
    """The index facts of one kernel (module doc), each found on first use. Read-only: get it from `indices(k)`."""

    def __init__(self, k: ir.Kernel):
        # the statements, not the kernel: the kernel keeps this object, which then keeps no cycle
        self._body = k.body
        self._interior = k.interior.body if k.interior is not None else ()

    @cached_property
    def offsets(self) -> Mapping[str, Offset]:
        """Locals holding tid[axis] + c wherever they are read: name -> (axis, c)."""
        return MappingProxyType(_offset_aliases(self._body + self._interior))

    @cached_property
    def tid_copies(self) -> Mapping[str, int]:
        """Locals bound only to the Tid node itself, in the body: name -> axis."""
        return MappingProxyType(_tid_copies(self._body))

    def offset(self, e: ir.Expr) -> Offset | None:
        """(axis, c) when `e` is tid[axis] + c, else None."""
        return _offset(e, self.offsets)

    def offset_on(self, e: ir.Expr, axis: int) -> int | None:
        """c when `e` is tid[axis] + c on that axis, else None."""
        found = _offset(e, self.offsets)
        return found[1] if found is not None and found[0] == axis else None

    def tid_axis(self, e: ir.Expr) -> int | None:
        """The axis when `e` is exactly a tid component (c = 0), else None."""
        found = _offset(e, self.offsets)
        return found[0] if found is not None and found[1] == 0 else None


_MEMO = "_gk_indices"  # the key of the memo in a kernel's __dict__ (no dataclass field: eq, hash, replace ignore it)


def indices(k: ir.Kernel) -> Indices:
    """`k`'s index facts, computed on the first call for this kernel object and kept on it. Sound because
    `ir.Kernel` is a frozen dataclass of immutable nodes: a pass that changes a kernel makes a new object
    (`dataclasses.replace`), which has no memo (functools.cached_property keeps its values the same way)."""
    found = k.__dict__.get(_MEMO)
    if found is None:
        found = k.__dict__[_MEMO] = Indices(k)
    return found
