"""Random host programs and their store-everything oracle (tests/fuzz/test_program_save_fuzz.py, docs/testing.md
"The program save fuzzer and the cross-mode fuzzer").

A program is a list of operations on *slots* (Python names bound to arrays): three argument buffers of length N
(Duplicated, DuplicatedNoNeed or Const; sometimes the program is called with a0 passed again as a1, its shadow
too), a loss buffer `E` of length 1, temporaries allocated inside the program, and one float scalar `c` (Active or
Const). An operation is a launch of one of the kernels below on views of the slots (the whole array, its halves,
its even or odd elements, the array reversed; 2-D: reshaped, and reshaped then transposed), `gk.copy`, `gk.fill`,
a swap of two slots' bindings (ping-pong buffers), an allocation, a host read, or a `gk.checkpointed_loop` of 2-7
steps over a stretch of these (random snapshots, or a random `memory=` budget: binomial, two-level or mixed
schedules). The scalars a launch takes are `c`, host arithmetic on it (`c * 0.5 + 0.25`, `c * c`) or a constant.
The kernels keep values bounded (tanh, sin, factors below 1), so that a 7-step loop does not drown differences in
its magnitudes.

Two distinct array arguments of one launch are either disjoint views or the very same view (exact aliasing,
docs/shadows-and-modes.md), never a partial overlap, and never an alias a kernel would race on.

The oracle (`oracle_reverse`, `oracle_forward`) differentiates the program without the program layer: it runs
the operations one by one (a loop's body once per step), copying every buffer before each one (store everything),
then walks them backwards, restores every buffer to its state before the operation and calls `gk.autodiff` on that
one launch with every array Duplicated (shadows follow memory: a Const buffer and a temporary get shadows that start
at zero), the scalar Active where it depends on `c`, and the chain rule of the host arithmetic by hand. `gk.copy`
and `gk.fill` are differentiated by hand (dsrc += ddst, ddst = 0; dc += sum ddst, ddst = 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import gradkern as gk

N = 8
H = N // 2
_SLICES = {"all": slice(None), "lo": slice(0, H), "hi": slice(H, N), "ev": slice(0, None, 2),
           "od": slice(1, None, 2), "rev": slice(None, None, -1)}
VIEWS = {name: (lambda a, s=s: a[s]) for name, s in _SLICES.items()}
VIEWS["m24"] = lambda a: a.reshape(2, H)  # 2-D views for the 2-D kernels: C order, and a transposed one
VIEWS["m42T"] = lambda a: a.reshape(H, 2).T
LENGTH = {"all": N, "rev": N, "lo": H, "hi": H, "ev": H, "od": H, "m24": "2d", "m42T": "2d"}
DISJOINT = {frozenset(("lo", "hi")), frozenset(("ev", "od"))}


@gk.kernel
def pf_inplace(y, c):
    i = gk.tid()
    y[i] = gk.sin(y[i]) * c + 0.5 * y[i]


@gk.kernel
def pf_rmw(y, x):
    i = gk.tid()
    y[i] = 0.9 * y[i] * gk.tanh(x[i]) + gk.sin(x[i]) * 0.5


@gk.kernel
def pf_stencil(x, y, c):
    i = gk.tid()
    n = x.shape[0]
    y[i] = x[i] + c * (x[(i + 1) % n] - gk.sin(x[i]) * x[i])


@gk.kernel
def pf_write(out, x, c):
    i = gk.tid()
    out[i] = gk.exp(0.5 * gk.sin(x[i])) * c


@gk.kernel
def pf_swap(a, b, c):
    i = gk.tid()
    a[i], b[i] = b[i] * c, gk.sin(a[i])


@gk.kernel
def pf_loop(y, x, m):
    i = gk.tid()
    for q in range(m):
        y[i] = gk.sin(y[i]) * x[i] + 0.3 * y[i]


@gk.kernel
def pf_scatter(y, x, idx):
    i = gk.tid()
    y[idx[i]] = y[idx[i]] * 0.5 + gk.tanh(x[i]) * x[i] * 0.5


@gk.kernel
def pf_inplace2(y, c):
    i, j = gk.tid()
    y[i, j] = gk.sin(y[i, j]) * c + 0.25 * y[i, j] * j


@gk.kernel
def pf_rmw2(y, x):
    i, j = gk.tid()
    y[i, j] = 0.9 * y[i, j] * gk.tanh(x[i, j]) + gk.sin(x[i, j]) * i


@gk.kernel
def pf_loss(x, E):
    i = gk.tid()
    gk.atomic_add(E, 0, x[i] * x[i] * 0.5)


# kernel: (number of array arguments, takes a scalar, its arrays may be exactly aliased, extra Const int argument)
KERNELS = {pf_inplace: (1, True, False, None), pf_rmw: (2, False, True, None),
           pf_stencil: (2, True, False, None), pf_write: (2, True, False, None), pf_swap: (2, True, True, None),
           pf_loop: (2, False, False, "m"), pf_scatter: (2, False, False, "idx"),
           pf_inplace2: (1, True, False, "2d"), pf_rmw2: (2, False, True, "2d")}
SCALARS = ("c", "c", "affine", "square", "const")


@dataclass
class Op:
    kind: str  # "launch", "copy", "fill", "swap", "alloc", "read", "loss", "loop"
    kernel: object = None
    views: list = field(default_factory=list)  # (slot, view name) per array argument
    scalar: str | None = None
    extra: object = None  # the Const int argument: m, or an index permutation; a loop's (nsteps, keyword, value)
    body: list = field(default_factory=list)  # a loop's operations, every step
    part: bool = False  # launched over the first half of the views' extent only (1-D launches)

    def __str__(self):
        if self.kind == "loop":
            return (f"checkpointed_loop({self.extra}):\n    " + "\n    ".join(str(op) for op in self.body))
        args = ", ".join(f"s{s}[{v}]" for s, v in self.views)
        name = getattr(self.kernel, "__name__", None) or getattr(self.kernel, "name", "")
        return f"{self.kind} {name}({args}{', ' + self.scalar if self.scalar else ''}){' half' if self.part else ''}"


@dataclass
class Program:
    ops: list
    annotations: list  # "dup", "noneed", "const" or "alias" (a0 again) per argument buffer; E is Duplicated
    active_c: bool

    def __str__(self):
        return (f"args {self.annotations} + E, c {'Active' if self.active_c else 'Const'}:\n  "
                + "\n  ".join(str(op) for op in self.ops))


def _views(rng, count: int, aliasable: bool, idents: list, two_d: bool = False):
    """`count` views of one length on slots whose buffers are `idents`, pairwise disjoint or (if aliasable,
    sometimes) the same view of the same buffer."""
    length = "2d" if two_d else rng.choice([N, H])
    names = [v for v, n in LENGTH.items() if n == length]
    slots = range(len(idents))
    first = (int(rng.integers(len(idents))), str(rng.choice(names)))
    views = [first]
    for _ in range(count - 1):
        same = [(s, first[1]) for s in slots if idents[s] == idents[first[0]]]
        if aliasable and rng.random() < 0.25:
            views.append(same[int(rng.integers(len(same)))])
            continue
        options = [(s, v) for s in slots for v in names
                   if idents[s] != idents[first[0]] or frozenset((v, first[1])) in DISJOINT]
        views.append(options[int(rng.integers(len(options)))])
    return views


def draw(rng: np.random.Generator) -> Program:
    """A random program of 2-6 launches (besides copies, fills, swaps, allocations and host reads)."""
    annotations = [str(rng.choice(["const", "dup", "dup", "dup", "noneed"])) for _ in range(3)]
    idents = [0, 1, 2]  # which buffer each slot holds (E is kept apart)
    if annotations[0] != "const" and annotations[1] != "const" and rng.random() < 0.2:
        annotations[1] = "alias"  # the program is called with a0 passed again as a1 (the same shadow too)
        idents[1] = 0
    ops: list[Op] = []
    launches = int(rng.integers(2, 7))
    while sum(op.kind == "launch" for op in ops) < launches:
        kind = rng.choice(["launch"] * 6 + ["copy", "fill", "swap", "alloc", "read", "loss"])
        if kind == "launch":
            kernel = list(KERNELS)[int(rng.integers(len(KERNELS)))]
            count, scalar, aliasable, extra = KERNELS[kernel]
            views = _views(rng, count, aliasable, idents, extra == "2d")
            size = LENGTH[views[0][1]]
            value = None
            if extra == "m":
                value = int(rng.integers(1, 4))
            elif extra == "idx":
                value = rng.permutation(size).astype(np.int64)
            ops.append(Op("launch", kernel, views, str(rng.choice(SCALARS)) if scalar else None, value,
                          part=extra != "2d" and bool(rng.random() < 0.2)))
        elif kind in ("copy", "fill"):
            ops.append(Op(kind, views=_views(rng, 2 if kind == "copy" else 1, False, idents),
                          scalar=str(rng.choice(SCALARS)) if kind == "fill" else None))
        elif kind == "swap":
            a, b = (int(x) for x in rng.choice(len(idents), 2, replace=False))
            idents[a], idents[b] = idents[b], idents[a]
            ops.append(Op("swap", views=[(a, "all"), (b, "all")]))
        elif kind == "alloc":
            ops.append(Op("alloc", views=[(len(idents), "all")]))
            idents.append(max(idents) + 1)
        elif kind == "read":
            ops.append(Op("read", views=_views(rng, 1, False, idents)))
        else:
            ops.append(Op("loss", pf_loss, _views(rng, 1, False, idents)))
    if rng.random() < 0.4:
        ops = _loop(rng, ops)
    ops.append(Op("loss", pf_loss, [(int(rng.integers(len(idents))), "all")]))
    return Program(ops, annotations, bool(rng.random() < 0.8))


def _loop(rng, ops: list) -> list:
    """`ops` with a stretch of 1-4 operations (no swap, no allocation: a step is a function of t and the state)
    made the body of a `gk.checkpointed_loop` of 2-7 steps, with random snapshots or a random memory budget."""
    starts = [k for k, op in enumerate(ops) if op.kind not in ("swap", "alloc")]
    if not starts:
        return ops
    first = starts[int(rng.integers(len(starts)))]
    last = first
    while last + 1 < len(ops) and last - first < 3 and ops[last + 1].kind not in ("swap", "alloc") \
            and rng.random() < 0.7:
        last += 1
    nsteps = int(rng.integers(2, 8))
    if rng.random() < 0.5:
        how = ("snapshots", int(rng.integers(1, nsteps + 1)))
    else:
        how = ("memory", int(rng.integers(2, 40)) * N * 8)  # from two arrays' bytes to a whole store-all
    loop = Op("loop", extra=(nsteps,) + how, body=ops[first:last + 1])
    return ops[:first] + [loop] + ops[last + 1:]


def scalar_value(name: str, c: float) -> tuple[float, float]:
    """The scalar `name` at c, and its derivative with respect to c."""
    return {"c": (c, 1.0), "affine": (c * 0.5 + 0.25, 0.5), "square": (c * c, 2.0 * c), "const": (0.7, 0.0)}[name]


def _host_scalar(name: str, c):
    """The same scalar computed on the host inside the program (c may be an Active scalar: differentiated)."""
    if name == "c":
        return c
    if name == "affine":
        return c * 0.5 + 0.25
    if name == "square":
        return c * c
    return 0.7


def make_function(program: Program):
    """The program as a plain Python function `fn(a0, a1, a2, E, c)` (the host code a user writes)."""

    def do(op: Op, slots: list, E, c):
        if op.kind == "swap":
            (p, _), (q, _) = op.views
            slots[p], slots[q] = slots[q], slots[p]
            return
        if op.kind == "alloc":
            slots.append(np.zeros(N))
            return
        if op.kind == "loop":
            nsteps, keyword, value = op.extra
            bound = list(slots)  # the step binds the arrays as they are now: swaps after the loop rebind `slots`

            def step(t):
                for inner in op.body:
                    do(inner, bound, E, c)
            gk.checkpointed_loop(step, nsteps, **{keyword: value})
            return
        views = [VIEWS[v](slots[s]) for s, v in op.views]
        if op.kind == "read":
            float(views[0].sum())  # a host read: the program goes on (a constant, docs/programs.md)
        elif op.kind == "copy":
            gk.copy(views[0], views[1])
        elif op.kind == "fill":
            gk.fill(views[0], _host_scalar(op.scalar, c))
        elif op.kind == "loss":
            gk.launch(pf_loss, views[0].shape[0], views[0], E)
        else:
            args = list(views)
            if op.scalar:
                args.append(_host_scalar(op.scalar, c))
            if op.extra is not None:
                args.append(op.extra)
            gk.launch(op.kernel, launch_dim(op, views), *args)

    def fn(a0, a1, a2, E, c):
        slots = [a0, a1, a2]
        for op in program.ops:
            do(op, slots, E, c)

    return fn


def launch_dim(op: Op, views) -> tuple:
    """A launch's dim: the views' shape, or the first half of it (`op.part`: the rest untouched)."""
    return (views[0].shape[0] // 2,) if op.part else views[0].shape


def _arguments(op: Op, views, shadows, c: float, tangent: float | None = None):
    """gk.autodiff's arguments for one launch of the oracle, and the scalar's derivative with respect to c; in
    forward mode (`tangent`: c's tangent) the scalar carries its tangent inline."""
    args = [gk.Duplicated(v, d) for v, d in zip(views, shadows)]
    if op.kind == "loss":
        return args, 0.0
    dvalue = 0.0
    if op.scalar:
        value, dvalue = scalar_value(op.scalar, c)
        if tangent is not None:
            args.append(gk.Duplicated(value, dvalue * tangent))
        else:
            args.append(gk.Active(value) if dvalue != 0.0 else gk.Const(value))
    if op.extra is not None:
        args.append(gk.Const(op.extra))
    return args, dvalue


def _walk(program: Program, buffers: list, E):
    """Run the program's operations on `buffers` (a0, a1, a2), yielding before each one: (op, slots, views)."""
    slots = list(buffers)
    for op in _unrolled(program.ops):
        if op.kind == "swap":
            (p, _), (q, _) = op.views
            slots[p], slots[q] = slots[q], slots[p]
            continue
        if op.kind == "alloc":
            slots.append(np.zeros(N))
            continue
        yield op, slots, [VIEWS[v](slots[s]) for s, v in op.views]


def _unrolled(ops: list):
    """The operations in the order they run: a loop's body once per step (the store-everything oracle has no
    checkpoints)."""
    for op in ops:
        if op.kind == "loop":
            for _ in range(op.extra[0]):
                yield from op.body
        else:
            yield op


def copies(arrays: list) -> list:
    """Copies of `arrays` that alias where they do (the same object twice stays one copy)."""
    made: dict[int, np.ndarray] = {}
    return [made.setdefault(id(a), a.copy()) for a in arrays]


def oracle_reverse(program: Program, buffers: list, E, c: float, seeds: list, seedE):
    """Store everything, then differentiate launch by launch (module doc). Returns (the argument buffers' shadows,
    E's shadow, dL/dc, the final primals)."""
    buffers = copies(buffers)
    E = E.copy()
    shadow_of: dict[int, np.ndarray] = {id(b): s.copy() for b, s in zip(buffers, seeds)}
    shadow_of[id(E)] = seedE.copy()
    steps = []
    for op, slots, views in _walk(program, buffers, E):
        for b in slots:
            shadow_of.setdefault(id(b), np.zeros(N))
        owners = [slots[s] for s, _ in op.views]
        steps.append((op, list(slots), owners, [b.copy() for b in slots] + [E.copy()]))
        if op.kind == "read":
            continue
        _primal(op, views, E, c)
    final = [b.copy() for b in buffers] + [E.copy()]
    dc = 0.0
    for op, slots, owners, saved in reversed(steps):
        for b, old in zip(slots + [E], saved):
            b[...] = old
        views = [VIEWS[v](b) for b, (_, v) in zip(owners, op.views)]
        dviews = [VIEWS[v](shadow_of[id(b)]) for b, (_, v) in zip(owners, op.views)]
        if op.kind == "read":
            continue
        if op.kind == "copy":
            dviews[1] += dviews[0]
            dviews[0][...] = 0.0
        elif op.kind == "fill":
            value, dvalue = scalar_value(op.scalar, c)
            dc += float(dviews[0].sum()) * dvalue
            dviews[0][...] = 0.0
        else:
            if op.kind == "loss":
                views, dviews = views + [E], dviews + [shadow_of[id(E)]]
            args, dvalue = _arguments(op, views, dviews, c)
            grads = gk.autodiff(op.kernel, *args, dim=launch_dim(op, views))
            if op.scalar and dvalue != 0.0:
                dc += grads[len(views)] * dvalue
    return [shadow_of[id(b)] for b in buffers], shadow_of[id(E)], dc, final


def oracle_forward(program: Program, buffers: list, E, c: float, tangents: list, tangentE, dc: float):
    """Forward mode launch by launch: the tangents of the argument buffers and E after the program."""
    buffers = copies(buffers)
    E = E.copy()
    tangent_of: dict[int, np.ndarray] = {id(b): t.copy() for b, t in zip(buffers, tangents)}
    tangent_of[id(E)] = tangentE.copy()
    for op, slots, views in _walk(program, buffers, E):
        for b in slots:
            tangent_of.setdefault(id(b), np.zeros(N))
        if op.kind == "read":
            continue
        dviews = [VIEWS[v](tangent_of[id(slots[s])]) for s, v in op.views]
        if op.kind == "copy":
            dviews[0][...] = dviews[1]
            views[0][...] = views[1]
            continue
        if op.kind == "fill":
            value, dvalue = scalar_value(op.scalar, c)
            dviews[0][...] = dvalue * dc
            views[0][...] = value
            continue
        if op.kind == "loss":
            views, dviews = views + [E], dviews + [tangent_of[id(E)]]
        args = _arguments(op, views, dviews, c, tangent=dc)[0]
        gk.autodiff(op.kernel, *args, dim=launch_dim(op, views), mode=gk.Forward)
    return [tangent_of[id(b)] for b in buffers], tangent_of[id(E)], buffers + [E]


def _primal(op: Op, views, E, c: float):
    if op.kind == "copy":
        views[0][...] = views[1]
    elif op.kind == "fill":
        views[0][...] = scalar_value(op.scalar, c)[0]
    elif op.kind == "loss":
        gk.launch(pf_loss, views[0].shape[0], views[0], E)
    else:
        args = list(views)
        if op.scalar:
            args.append(scalar_value(op.scalar, c)[0])
        if op.extra is not None:
            args.append(op.extra)
        gk.launch(op.kernel, launch_dim(op, views), *args)
