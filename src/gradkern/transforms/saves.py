"""The augmented primal's copy-on-write saves (docs/programs.md#saved-copies-and-the-sweep): an array every
thread overwrites at its own element without reading it (analysis/access.py: `saved_in_place`) gets a save
parameter, into which each thread copies its element's old value before the primal runs, when a switch
parameter is on; a program turns it on where a recorded reverse still reads the old contents."""

from __future__ import annotations

from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.types import I64, Array


def saves_of(k: ir.Kernel, arrays: frozenset[str], tids: tuple) -> tuple[tuple[ir.Param, ...], list[ir.Stmt],
                                                                     tuple[str, ...]]:
    """The augmented primal's copy-on-write saves (docs/programs.md#saved-copies-and-the-sweep): for each array
    every thread overwrites at its own element without reading it, a parameter of its type the thread copies
    its element's old contents into before the primal runs, when the switch parameter is non-zero (a program
    saving the array for an earlier step's reverse); with it zero, nothing is read or written. A launch over
    the array's whole shape then leaves its old contents in the save, in the same pass as the primal."""
    ps = [p for p in k.params if p.name in arrays and isinstance(p.type, Array)]
    if not ps:
        return (), [], ()
    saves = tuple(ir.Param(names.save(p.name), p.type, is_array=True, written=True) for p in ps)
    switch = ir.Param(names.SAVING, I64)
    copies = tuple(ir.Store(s.name, tids, ir.Load(p.name, tids, type=p.type.dtype)) for p, s in zip(ps, saves))
    return (*saves, switch), [ir.If(b.cmp(Op.NE, b.var(names.SAVING, I64), b.const(0, I64)), copies)], \
        tuple(p.name for p in ps)
