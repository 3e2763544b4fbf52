"""Random programs and what they return, for the returned-derivative check (program/returns.py;
tests/fuzz/test_returns_fuzz.py).

A program `prog(u, v, E, c)` (u Duplicated, v Const, E Duplicated and seeded, c Active) makes two to five
operations on three temporaries (allocated by `np.zeros_like(u)`, or a quarter of them by `np.zeros(N)`, a
plain array whose host operations are not seen): a launch writing one from u (whole or its first half), from v
only, from v scaled by c, from another temporary; `gk.copy` and `gk.fill` (with c or a constant) between them; a
loss launch adding one into
E. Then it returns a random leaf, or a tuple, list or dict of leaves, sometimes after more than 64 plain items (the
check looks at the first 64). A leaf is host code on one temporary (the array, an element, a slice, a reshape, a sum,
a product, `np.dot`, `.max()`, `.copy()`, a scaled array, an element of it) or on c (`2.0 * c`, `c * c`, `-c`, an
element times c), or a value the user takes out of the program's bookkeeping (`float(...)`, `.item()`,
`.view(np.ndarray)`, `.tolist()`, `c.value`) or an argument (`E[0]`, `u[1:]`), both taken by design
(docs/programs.md "What a program returns").

`Leaf.exempt` says a leaf is taken by design; `Leaf.temps` which temporaries it reads and `Leaf.uses_c` whether it
reads c, so the test can tell what the program's launches made active."""

from __future__ import annotations

from dataclasses import dataclass

import gradkern as gk

N = 6
LOOKED_INTO = 64  # program/returns.py looks at the first 64 items of nested containers


@gk.kernel
def square(u, w):
    i = gk.tid()
    w[i] = u[i] * u[i]


@gk.kernel
def scale(v, w, c):
    i = gk.tid()
    w[i] = c * v[i] + 1.0


@gk.kernel
def total(w, E):
    i = gk.tid()
    gk.atomic_add(E, 0, w[i])


@dataclass(frozen=True)
class Leaf:
    text: str  # Python, over t (the temporaries), c, u, E, np
    temps: tuple[int, ...] = ()
    uses_c: bool = False
    exempt: bool = False


TEMP_LEAVES = ("t[{k}]", "t[{k}][2]", "t[{k}][1:4]", "t[{k}][::-1]", "t[{k}].reshape(2, 3)", "t[{k}].sum()",
               "np.sum(t[{k}])", "t[{k}] * 2.0", "(t[{k}] * 2.0)[0]", "np.dot(t[{k}], t[{k}])", "t[{k}].max()",
               "t[{k}].copy()", "t[{k}][4] - 1.0", "t[{k}].mean()", "abs(t[{k}][1])")
EXEMPT_LEAVES = ("float(t[{k}][2])", "t[{k}][3].item()", "t[{k}].view(np.ndarray)", "t[{k}].tolist()", "c.value",
                 "E[0]", "u[1:]", "3", "None")
C_LEAVES = ("2.0 * c", "c * c", "-c", "c + 1.0", "t[{k}][0] * c")


def leaf(rng) -> Leaf:
    r = rng.random()
    k = int(rng.integers(0, 3))
    if r < 0.6:
        return Leaf(str(rng.choice(TEMP_LEAVES)).format(k=k), temps=(k,))
    if r < 0.8:
        text = str(rng.choice(EXEMPT_LEAVES)).format(k=k)
        return Leaf(text, temps=(k,) if "t[" in text else (), exempt=True)
    text = str(rng.choice(C_LEAVES)).format(k=k)
    return Leaf(text, temps=(k,) if "t[" in text else (), uses_c=True)


def returned(rng) -> tuple[str, list[Leaf]]:
    """The text of what the program returns, and its items in the order the check looks at them: leaves, None
    for plain items (a long list's, a dict entry's 1, each of the N floats `.tolist()` makes)."""
    text, items = _returned(rng)
    return text, [y for x in items for y in ([None] * N if x is not None and x.text.endswith(".tolist()") else [x])]


def _returned(rng) -> tuple[str, list[Leaf]]:
    r = rng.random()
    if r < 0.5:
        x = leaf(rng)
        return x.text, [x]
    xs = [leaf(rng) for _ in range(int(rng.integers(1, 4)))]
    if r < 0.65:
        return "(" + ", ".join(x.text for x in xs) + ",)", xs
    if r < 0.8:
        return "{" + ", ".join(f"'k{n}': [1, {x.text}]" for n, x in enumerate(xs)) + "}", \
            [y for x in xs for y in (None, x)]
    pad = int(rng.integers(60, 70))  # past the 64 items looked at, or not
    return f"[0.0] * {pad} + [" + ", ".join(x.text for x in xs) + "]", [None] * pad + xs


OPS = ("from_u", "from_u", "half_u", "from_v", "scaled", "chain", "copy", "fill_c", "fill_0", "loss")


def program(rng) -> tuple[list[str], list[tuple[str, int, int]], set[int]]:
    """The body's source lines, the operations (kind, target, source) in order, and which temporaries are plain
    `np.zeros(N)` (the others `np.zeros_like(u)`: tracked host code, docs/host-code.md "What is not seen")."""
    ops = []
    plain = {k for k in range(3) if rng.random() < 0.25}
    lines = ["t = [" + ", ".join("np.zeros(N)" if k in plain else "np.zeros_like(u)" for k in range(3)) + "]"]
    for _ in range(int(rng.integers(2, 6))):
        kind = str(rng.choice(OPS))
        k, j = (int(x) for x in rng.integers(0, 3, size=2))
        lines.append({
            "from_u": f"gk.launch(square, N, u, t[{k}])",
            "half_u": f"gk.launch(square, N // 2, u, t[{k}])",
            "from_v": f"gk.launch(square, N, v, t[{k}])",
            "scaled": f"gk.launch(scale, N, v, t[{k}], c)",
            "chain": f"gk.launch(square, N, t[{j}], t[{k}])" if j != k else f"gk.launch(square, N, u, t[{k}])",
            "copy": f"gk.copy(t[{k}], t[{j}])" if j != k else f"gk.fill(t[{k}], 0.5)",
            "fill_c": f"gk.fill(t[{k}], c)",
            "fill_0": f"gk.fill(t[{k}], 0.5)",
            "loss": f"gk.launch(total, N, t[{j}], E)",
        }[kind])
        if kind == "chain" and j == k:
            kind = "from_u"
        if kind == "copy" and j == k:
            kind = "fill_0"
        ops.append((kind, k, j))
    return lines, ops, plain


def active_temps(ops) -> set[int]:
    """The temporaries into which some launch wrote a value that depends on u or c, by data flow (an inactive
    write over an active temporary does not make it inactive: its shadow stays, and the check may refuse it)."""
    active: set[int] = set()
    for kind, k, j in ops:
        if kind in ("from_u", "half_u", "scaled", "fill_c") or kind in ("chain", "copy") and j in active:
            active.add(k)
    return active


def source(name: str, lines: list[str], ret: str) -> str:
    body = "\n".join("    " + x for x in lines)
    return f"def {name}(u, v, E, c):\n{body}\n    return {ret}\n"
