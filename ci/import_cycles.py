"""Fail if any two modules of gradkern import each other, directly or through
others (type-checking-only imports included): docs/architecture.md's data flows one way.
Run by ci/run after lint-imports (grimp is import-linter's graph library)."""

from __future__ import annotations

import sys

import grimp


def cycles(package: str) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    g = grimp.build_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for m in sorted(g.modules):
        if m not in index:
            visit(m)
    return found


if __name__ == "__main__":
    bad = cycles("gradkern")
    for comp in bad:
        print("import cycle:", " <-> ".join(comp))
    print(f"import cycles: {len(bad)}")
    sys.exit(1 if bad else 0)
