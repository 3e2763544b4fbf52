"""Python function → `ast.FunctionDef`, keeping the offsets that map AST
positions back to the user's file (getsource → dedent → parse)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import KernelSyntaxError, Loc


@dataclass(frozen=True)
class ParsedFunction:
    fn: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    line_offset: int  # added to an AST line number to give the file's line
    col_offset: int  # indentation removed by dedent

    @property
    def name(self) -> str:
        return self.tree.name

    def loc(self, node: ast.AST) -> Loc:
        return Loc(self.file, getattr(node, "lineno", 1) + self.line_offset,
                   getattr(node, "col_offset", 0) + self.col_offset, self.tree.name)

    def namespace(self) -> dict[str, Any]:
        """Globals overlaid with the closure's cells: what a free name resolves to."""
        ns = dict(self.fn.__globals__)
        code = self.fn.__code__
        for name, cell in zip(code.co_freevars, self.fn.__closure__ or ()):
            try:
                ns[name] = cell.cell_contents
            except ValueError:  # an empty cell: defined later in the enclosing function
                pass
        return ns


def parse_function(fn: Callable[..., Any]) -> ParsedFunction:
    """Parse `fn`'s source; a lambda or a function without source is rejected."""
    code = getattr(fn, "__code__", None)
    if code is None:
        raise KernelSyntaxError(f"{fn!r} is not a Python function and cannot be a kernel")
    file = code.co_filename
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise KernelSyntaxError(
            f"cannot read the source of {fn.__qualname__!r} ({e})",
            Loc(file, code.co_firstlineno, 0, fn.__name__),
            hint="kernels must be defined in a file, not typed at an interactive prompt or exec'd",
        ) from None
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    first_line = next((ln for ln in lines if ln.strip()), "")
    indent = len(first_line) - len(first_line.lstrip())
    tree = ast.parse(dedented)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef):
        raise KernelSyntaxError(
            f"{fn.__qualname__!r} must be defined with a 'def' statement",
            Loc(file, first, indent, fn.__name__),
        )
    return ParsedFunction(fn, node, file, first - 1, indent)


def assigned_names(fn: ast.FunctionDef) -> set[str]:
    """Every name the function binds (assignment targets, loop variables)."""
    return {node.id for node in ast.walk(fn) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
