"""Every generated name, in one place.

A user's kernel may not use a name that starts with RESERVED (the frontend
rejects it), so no generated name collides with a user's. Within that space
each producer keeps its own prefix, so producers never collide either:

    _gk<n>_<what>      frontend: an inlined call's locals (`_gk1_f_x`), tuple temporaries
    _gk__<p>           frontend: a reassigned scalar parameter's per-thread copy
    _gk_ret            frontend: a device function's returned value
    _gk_<kind><n>      transforms: fresh temporaries (`Namer(PASS).fresh("g")` → `_gk_g1`)
    _gk_d_, _gk_t_, …  transforms: shadows, adjoints, tangents, tapes, gather accumulators
    _gk_rc_            analysis/races.py: the race check's instrumentation
    _gkv_<v>_<c>       frontend: component c (x, y, z, w) of a vector local v; `_gkv<n>_<c>` its temporaries
    _gka_<f>__<i>_<j>  frontend: element [i, j] of a local array f (frontend/unroll.py); `_gka_as_<t>` its zero's cast
    _gkb_, _gku_       backends only (printer-introduced names, C-escaped user names)

Suffixes (`_l<k>` for vector-mode lanes, `_n<k>` for gather neighbours) are
applied to every name of a kind at once, so they stay injective.
"""

from __future__ import annotations

RESERVED = "_gk"  # no user name may start with it (frontend/lower.py checks)
PASS = "_gk_"  # names the IR transforms generate
RACE_CHECK = "_gk_rc_"  # the race check's instrumentation (analysis/races.py)
PUSH_COUNTS = "_gk_count"  # a reverse kernel's per-thread push counters (transforms/reverse.py: COUNT)
RESULT = "_gk_ret"  # a device function's returned value, before inlining
LOCAL_ARRAY = "_gka_"  # frontend/unroll.py: a local array's elements (`_gka_f__3`, `_gka_qs__8_1`)
VECTOR = "_gkv_"  # frontend/vectors.py: a vector local's components (`_gkv_p_x`); its temporaries are `_gkv<n>_x`
# The backends (backends/printer.py, numba_loops.py, cuda.py) spell these two
# prefixes themselves; no IR pass may generate a name under them.
BACKEND = "_gkb_"  # names a printer introduces: launch extents, loop indices, helpers
C_ESCAPED = "_gku_"  # a user name that is a C keyword or not ASCII, escaped for CUDA C


class Namer:
    """Fresh names under one prefix, numbered by one counter.

    `fresh("g")` gives `_gk_g1`, `_gk_g2`, …; `numbered("f")` gives the
    frontend's form `_gk1_f`. The counter is shared by every kind, so two
    names from one Namer never coincide."""

    def __init__(self, prefix: str = PASS):
        self.prefix = prefix
        self.counter = 0

    def fresh(self, what: str) -> str:
        self.counter += 1
        return f"{self.prefix}{what}{self.counter}"

    def numbered(self, what: str) -> str:
        self.counter += 1
        return f"{self.prefix}{self.counter}_{what}"


def is_generated(name: str) -> bool:
    """Whether `name` is in the reserved space (a user kernel may not use it)."""
    return name.startswith(RESERVED)


def shown(name: str) -> str:
    """The name a user wrote, for error messages: an inlined local loses its call prefix, a vector's
    component is `v.x`."""
    if name.startswith(LOCAL_ARRAY) and "__" in name:
        f, _, index = name[len(LOCAL_ARRAY):].rpartition("__")
        return f"{f}[{', '.join(index.split('_'))}]"
    if name.startswith(VECTOR):
        v, c = name[len(VECTOR):].rsplit("_", 1)
        return f"{v}.{c}"
    return name.split("_", 2)[-1] if is_generated(name) else name


def private(param: str) -> str:
    """The per-thread local that replaces a scalar parameter the kernel reassigns."""
    return f"{RESERVED}_{param}"


def shadow(name: str) -> str:
    """The shadow of an array, and the adjoint of a local (transforms/reverse.py)."""
    return f"{PASS}d_{name}"


def accumulator(scalar: str) -> str:
    """The one-element array an Active scalar's adjoint is summed into."""
    return f"{PASS}dacc_{scalar}"


def save(array: str) -> str:
    """Where an augmented primal copies an array's old contents before overwriting them (transforms/reverse.py)."""
    return f"{PASS}save_{array}"


SAVING = f"{PASS}saving"  # the augmented primal's switch: copy the saved arrays' old contents (non-zero) or not


def active_sum(scalar: str) -> str:
    """A thread's float64 sum of its contributions to an Active scalar's derivative."""
    return f"{PASS}dsum_{scalar}"


def tangent(name: str) -> str:
    """The tangent of an array, a scalar parameter or a local (transforms/forward.py)."""
    return f"{PASS}t_{name}"


def gather_accumulator(shadow_name: str) -> str:
    """A gather kernel's per-thread sum for one shadow (transforms/gather.py)."""
    return f"{PASS}gacc_{shadow_name}"


def pull_site(n: int) -> str:
    """A thread's sum of the atomic adds of pull site n, before its tape slot (transforms/pull.py)."""
    return f"{PASS}psite{n}"


def pull_accumulator(shadow_name: str, n: int) -> str:
    """A pull kernel's per-thread sum for the n-th (shadow, constant positions) group (transforms/pull.py)."""
    return f"{PASS}pacc{n}_{shadow_name}"


GATHER_EXTENT = PASS + "gn"  # + axis: the gather kernel's launch extents


def gather_offset(axis: int) -> str:
    """The offset along `axis` of the neighbour a looped gather kernel replays (transforms/gather.py)."""
    return f"{PASS}goff{axis}"


GATHER_NEIGHBOUR = PASS + "gnb"  # a looped gather kernel's loop over its offsets


def neighbour(name: str, n: int) -> str:
    """A local of the n-th neighbour copy in a gather kernel."""
    return f"{name}_n{n}"


def deferred(name: str) -> str:
    """A local of a gather kernel's deferred statements (transforms/fold.py)."""
    return f"{name}_d"


def lane(name: str, k: int) -> str:
    """Lane k of a derivative parameter or local in vector mode (transforms/lanes.py)."""
    return f"{name}_l{k}"


def version(name: str, k: int) -> str:
    """The k-th top-level reassignment of a local, given a name of its own (transforms/versions.py)."""
    return f"{PASS}v{k}_{name}"


OOB = PASS + "oob"  # the out-of-bounds flag of a bounds-checked kernel (transforms/boundscheck.py)
TEMPORAL = PASS + "tb_"  # transforms/temporal.py: the blocked kernel's parameters and loop locals
BOUNDS_INDEX = PASS + "bi_"  # + index type: an index the exact bounds check evaluates only to check it
