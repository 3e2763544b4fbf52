"""How a parallel CPU launch with atomic targets is chunked: how many chunks (per-chunk private copies
under a memory limit), the plan of a launch whose targets are also accessed plainly (`MixedPlan`), and the
cache of that plan's slot copies between launches (`SlotCache`). backends/numba_loops.py prints what the
plan says; backends/numba_cpu.py runs it."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from ..environment import env_float, env_int
from ..ir import nodes as ir

PRIVATE_LIMIT = env_int("GRADKERN_PRIVATE_BYTES", 1 << 30)
# A launch whose privatised targets it also reads or writes plainly ("mixed": the reverse of a red-black
# sweep, LU's update) runs in parallel while its private copies take at most this many bytes in all (default:
# GRADKERN_PRIVATE_BYTES); above, serially. Most of its adds need no copy (MixedPlan): a red-black sweep's
# gradient has none, LU's update one per slot, kept between launches.
MIXED_PRIVATE_LIMIT = env_int("GRADKERN_MIXED_PRIVATE_BYTES", PRIVATE_LIMIT)


# Sparse privatisation (`spilled`) is picked for a launch when, at the worst (no locality: 1 - 1/C of its adds
# spilled, then added on one thread), its spilled adds are at most this many times the elements of the copies
# a chunk would zero and sum: per thread, copies cost about 2 x elements (zeroing, the sum's read), the spill
# lists about the spilled adds. Measured on 2 threads (l2_misfit's gradient, n = 2^22, m random sensors):
# sparse is faster up to m = 2n and about as fast at m = 4n, where adds x (1 - 1/C) = 2 x elements; sorted
# sensors spill almost nothing and sparse won at every m tried (docs/adjoint-forms.md#5-atomic-adds-on-the-cpu).
SPARSE_RATIO = env_float("GRADKERN_SPARSE_RATIO", 2.0)


def sparse_pays(adds: int, elements: int, chunks: int, spill_bytes: int) -> bool:
    """Whether a launch runs sparse privatisation: `adds`, the bound of its spilled targets' adds, of which
    at worst 1 - 1/chunks spill, against the `elements` of the copies each chunk would take; its spill lists
    (`spill_bytes`, reserved, touched only as they fill) within GRADKERN_PRIVATE_BYTES."""
    return chunks > 1 and adds * (chunks - 1) <= SPARSE_RATIO * elements * chunks and spill_bytes <= PRIVATE_LIMIT


@dataclass(frozen=True)
class MixedPlan:
    """How a parallel launch with mixed atomic targets runs (issue 18.5; numba_syntax.PrivatizedSyntax).

    `width`: the largest cmax - cmin over the mixed targets' adds marked `tid[0] + c`. Chunk c runs
    tid[0] in [a, b) and adds straight to rows [a + cmin, b + cmax): with width 0 no two chunks reach a
    common row, and otherwise the chunks run in two phases (the even chunks, then the odd ones), every
    chunk at least `width` threads wide, so the chunks of one phase never do (chunk c + 2 starts adding at
    row b' + cmin >= b + width + cmin = b + cmax, b' the end of chunk c + 1). A thread order like any other:
    the launch is race-free. `shared`: mixed targets with other adds (LU's pivot row `dA[k, j]`), each
    with one copy per slot (the chunks running at once: chunk // phases) that the backend allocates once
    and keeps, all zero between launches, and one flag per row and slot: after the loop only the flagged
    rows are summed into the target and zeroed again."""

    width: int
    shared: tuple[str, ...]

    @property
    def phases(self) -> int:
        return 2 if self.width > 0 else 1

    def chunks(self, chunks: int, n0: int) -> int:
        """`chunks` (0: the serial path) made at least `width` threads wide (the entry does the same)."""
        return max(1, min(chunks, n0 // self.width)) if chunks > 0 and self.width > 0 else chunks

    def slots(self, chunks: int) -> int:
        return -(-chunks // self.phases)


def mixed_plan(k: ir.Kernel, mixed: tuple[str, ...]) -> MixedPlan:
    """The plan of a parallel launch whose targets `mixed` are also accessed plainly, from the rows the
    pipeline marked on its atomic adds (ir.AtomicAdd.row)."""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    adds = [s for s in ir.walk_stmts(bodies) if isinstance(s, ir.AtomicAdd) and s.array in mixed]
    width = 0
    for a in mixed:  # chunks at least this wide never reach a common row of any target within one phase
        rows = [s.row for s in adds if s.array == a and s.row is not None]
        width = max(width, max(rows) - min(rows) if rows else 0)
    return MixedPlan(width, tuple(a for a in mixed if any(s.array == a and s.row is None for s in adds)))


def owned_rows(k: ir.Kernel, atomic: tuple[str, ...], mixed: tuple[str, ...]) -> dict[str, int]:
    """The atomic targets of a parallel launch that need no private copy, each with its row offset c: a 1-D
    target not accessed plainly, every add to which (body and interior) the pipeline marked as landing in
    row `tid[0] + c` with one c (ir.AtomicAdd.row, analysis/rows.py), of the target's own type.

    Chunks split axis 0, so chunk [a, b) adds only to rows [a + c, b + c): no two chunks reach a common
    row, and each outer index's adds (every thread `(t0, ...)` of it adds to row t0 + c alone) are summed
    in a register and added to the target once (numba_loops.py `_rows_flush`). That is the private copy's
    sum for the row (no other chunk's copy holds anything there), without the copy
    (docs/adjoint-forms.md#5-atomic-adds-on-the-cpu); in thread order in 1-D, reassociated over the inner
    axes of a 2-D or 3-D launch (docs/adjoint-forms.md, section 9)."""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    adds: dict[str, list[ir.AtomicAdd]] = {}
    for s in ir.walk_stmts(bodies):
        if isinstance(s, ir.AtomicAdd):
            adds.setdefault(s.array, []).append(s)
    types = {p.name: p.type for p in k.params}
    owned = {}
    for a in atomic:
        mine, t = adds.get(a, []), types[a]
        rows = {s.row for s in mine}
        if a in mixed or t.ndim != 1 or len(rows) != 1 or None in rows or \
                any(s.value.type != t.dtype for s in mine):
            continue
        owned[a] = rows.pop()
    return owned


def adds_per_thread(k: ir.Kernel, a: str) -> int | None:
    """A bound on how many atomic adds to `a` one thread runs: its add statements outside any loop, the
    larger branch of an `if` (a thread runs the body or the interior, never both); None when an add to `a`
    sits in a loop (`for`, `while`: no bound without the trip counts)."""

    def count(body: tuple[ir.Stmt, ...]) -> int | None:
        n = 0
        for s in body:
            if isinstance(s, ir.AtomicAdd):
                n += s.array == a
            elif isinstance(s, ir.If):
                then, orelse = count(s.then), count(s.orelse)
                if then is None or orelse is None:
                    return None
                n += max(then, orelse)
            elif any(isinstance(x, ir.AtomicAdd) and x.array == a for b in ir.blocks(s) for x in ir.walk_stmts(b)):
                return None
        return n

    bounds = [count(k.body)] + ([count(k.interior.body)] if k.interior is not None else [])
    return None if None in bounds else max(bounds)


def spilled(k: ir.Kernel, atomic: tuple[str, ...], exclude) -> dict[str, int]:
    """The atomic targets a parallel launch may run without private copies, each with its bound of adds per
    thread (`adds_per_thread`): those with a bound that are not in `exclude` (mixed, owned, an Active
    scalar's register sums). Sparse privatisation (docs/adjoint-forms.md#5-atomic-adds-on-the-cpu): chunk c
    owns rows [c R / C, (c + 1) R / C) of the target's R rows and adds there directly; an add to another
    row is spilled to the chunk's list of (index, value) pairs, at most its adds' bound, and the lists are
    added after the loop in chunk order. NumbaBackend.run picks it by cost at each launch (SPARSE_RATIO)."""
    bounds = {a: adds_per_thread(k, a) for a in atomic if a not in exclude}
    return {a: b for a, b in bounds.items() if b}


def thread_count() -> int:
    """`numba.get_num_threads()`: once Numba's threading layer is up, its C getter alone (the public function
    first takes two locks, one a multiprocessing lock: 1.2 µs against 0.08 here, at every privatised launch;
    docs/programs.md#host-cost-per-step); the public function before that, or where Numba's module differs."""
    layer = sys.modules.get("numba.np.ufunc.parallel")
    if layer is not None and getattr(layer, "_is_initialized", False) is True:
        getter = getattr(layer, "_get_num_threads", None)
        threads = getter() if getter is not None else 0
        if threads > 0:
            return threads
    import numba

    return numba.get_num_threads()


def private_chunks(copy_bytes: int, n0: int, mixed: bool = False, width: int = 0) -> int:
    """How many chunks a parallel launch with atomics splits axis 0 into: one per Numba thread (at most
    one per outer index; for a mixed launch whose chunks run in two phases, `MixedPlan`, two per thread,
    each at least `width` threads wide), or 0 (the serial path) when their private copies, `copy_bytes`
    each, would take more than GRADKERN_PRIVATE_BYTES (default 1 GiB), or for a mixed launch
    GRADKERN_MIXED_PRIVATE_BYTES (default the same)."""
    threads = thread_count()
    if width > 0:
        plan = MixedPlan(width, ())
        chunks = plan.chunks(max(1, min(threads * plan.phases, n0)), n0)
    else:  # one phase, no minimum width (MixedPlan(0, ()).chunks is the identity): every privatised launch's path
        chunks = max(1, min(threads, n0))
    return chunks if chunks * copy_bytes <= (MIXED_PRIVATE_LIMIT if mixed else PRIVATE_LIMIT) else 0


class SlotCache:
    """The shared targets' slot copies and row flags (`MixedPlan`) between launches, by (shape, dtype,
    slots, name): all zero; a launch takes them out while it runs, so two at once never share them, and
    one that raises never gives them back."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def take(self, key: tuple) -> tuple[Any, Any]:
        """Zeroed slot copies and row flags for a shared target of this shape and dtype: cached, or new."""
        import numpy

        with self._lock:
            pair = self.buffers.pop(key, None)
        if pair is None:
            shape, dtype, slots, _ = key
            pair = numpy.zeros((slots, *shape), dtype), numpy.zeros((slots, shape[0]), numpy.uint8)
        return pair

    def clear(self) -> int:
        """Drop every cached buffer (gk.release_memory); returns the bytes freed."""
        with self._lock:
            freed = sum(p.nbytes + f.nbytes for p, f in self.buffers.values())
            self.buffers.clear()
        return freed

    def keep(self, key: tuple, pair: tuple[Any, Any]) -> None:
        """Cache zeroed buffers for the next launch, keeping the cache under GRADKERN_PRIVATE_BYTES."""
        with self._lock:
            self.buffers[key] = pair
            while sum(p.nbytes + f.nbytes for p, f in self.buffers.values()) > PRIVATE_LIMIT:
                del self.buffers[next(iter(self.buffers))]  # the oldest first


SLOTS = SlotCache()
