"""Exactly aliased array arguments (same memory, shape, strides, dtype) are
one array: the kernel is specialised with those parameters merged into the
first of them (docs/launches.md), so every later analysis sees the real accesses,
e.g. a stencil launched with its input as its output becomes the racy
in-place stencil it is."""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.rewrite import rename_arrays


def merge_aliases(k: ir.Kernel, aliases: dict[str, str]) -> ir.Kernel:
    """`k` with each parameter in `aliases` replaced by the one it aliases."""
    if not aliases:
        return k
    written = {p.name for p in k.params if p.written}
    params = []
    for p in k.params:
        if p.name in aliases:
            continue
        merged = [m for m, rep in aliases.items() if rep == p.name]
        params.append(replace(p, written=p.written or any(m in written for m in merged),
                              used=p.used or bool(merged)))
    return replace(k, params=tuple(params), body=rename_arrays(k.body, aliases))
