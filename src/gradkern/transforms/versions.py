"""Versioned locals: every top-level reassignment of a local that is assigned
only at the top level of the thread body gets a name of its own, so each name
is defined once. Nothing changes in meaning (each read sees the latest
definition before it, as before); what changes is the compile time of long
kernels: Numba's SSA reconstruction costs time quadratic in the definitions of
one name, and a reverse-mode kernel of a long straight-line body reassigns its
locals hundreds of times. Applied to every kernel just before printing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..ir import names
from ..ir import nodes as ir
from ..ir.rewrite import rename_locals


def version_locals(k: ir.Kernel) -> ir.Kernel:
    """`k` with each top-level redefinition of a top-level-only local renamed."""
    top = Counter(s.name for s in k.body if isinstance(s, ir.Assign))
    nested = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)} - set(top)
    nested |= {s.var for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)}
    for s in k.body:  # assignments inside blocks nested in top-level statements
        if not isinstance(s, ir.Assign):
            nested |= {x.name for x in ir.walk_stmts((s,)) if isinstance(x, ir.Assign)}
    params = {p.name for p in k.params}
    redefined = {n for n, c in top.items() if c > 1 and n not in nested and n not in params}
    if not redefined:
        return k
    types = dict(k.locals)
    current: dict[str, str] = {}
    seen: Counter = Counter()
    body = []
    for s in k.body:
        if isinstance(s, ir.Assign) and s.name in redefined:
            value = rename_locals((ir.Assign(s.name, s.value, loc=s.loc),), current)[0].value
            seen[s.name] += 1
            new = s.name if seen[s.name] == 1 else names.version(s.name, seen[s.name] - 1)
            current[s.name] = new
            types[new] = types[s.name]
            body.append(replace(s, name=new, value=value))
        else:
            body.append(rename_locals((s,), current)[0] if current else s)
    return replace(k, body=tuple(body), locals=tuple(sorted(types.items())))
