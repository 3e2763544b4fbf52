"""Readable IR text (`gk.inspect(...).ir`): pseudo-Python with types."""

from __future__ import annotations

from . import nodes as ir


def format_kernel(k: ir.Kernel) -> str:
    params = ", ".join(str(p) for p in k.params)
    lines = [f"kernel {k.name}({params})  tid: {k.tid_ndim}-D"]
    if k.locals:
        lines.append("  locals: " + ", ".join(f"{n}: {t}" for n, t in k.locals))
    _block(k.body, lines, 1)
    if k.interior is not None:
        lines.append("interior where " + " and ".join(str(r) for r in k.interior.ranges) + ":")
        _block(k.interior.body, lines, 1)
    if k.deferred is not None:
        d = k.deferred
        lines.append(f"deferred over ({', '.join(str(e) for e in d.extents)}), row r after row r + {d.lag}, "
                     f"window {d.window}:")
        _block(d.body, lines, 1)
    return "\n".join(lines) + "\n"


def _block(body, lines: list[str], depth: int):
    pad = "  " * depth
    if not body:
        lines.append(pad + "pass")
    for s in body:
        if isinstance(s, ir.If):
            lines.append(f"{pad}if {s.cond}:")
            _block(s.then, lines, depth + 1)
            if s.orelse:
                lines.append(f"{pad}else:")
                _block(s.orelse, lines, depth + 1)
        elif isinstance(s, ir.For):
            lines.append(f"{pad}for {s.var} in range({s.start}, {s.stop}, {s.step}):")
            _block(s.body, lines, depth + 1)
        elif isinstance(s, ir.While):
            lines.append(f"{pad}while {s.cond}:")
            _block(s.body, lines, depth + 1)
        else:
            lines.append(pad + str(s))
