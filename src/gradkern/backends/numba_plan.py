"""How a parallel CPU launch with atomic targets is chunked: how many chunks (per-chunk private copies
under a memory limit), the plan of a launch whose targets are also accessed plainly (`MixedPlan`), and the
cache of that plan's slot copies between launches (`SlotCache`). backends/numba_loops.py prints what the
plan says; backends/numba_cpu.py runs it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from ..ir import nodes as ir

PRIVATE_LIMIT = int(os.environ.get("GRADKERN_PRIVATE_BYTES", str(1 << 30)))
# A launch whose privatised targets it also reads or writes plainly ("mixed": the reverse of a red-black
# sweep, LU's update) runs in parallel while its private copies take at most this many bytes in all (default:
# GRADKERN_PRIVATE_BYTES); above, serially. Most of its adds need no copy (MixedPlan): a red-black sweep's
# gradient has none, LU's update one per slot, kept between launches.
MIXED_PRIVATE_LIMIT = int(os.environ.get("GRADKERN_MIXED_PRIVATE_BYTES", str(PRIVATE_LIMIT)))


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


def private_chunks(copy_bytes: int, n0: int, mixed: bool = False, width: int = 0) -> int:
    """How many chunks a parallel launch with atomics splits axis 0 into: one per Numba thread (at most
    one per outer index; for a mixed launch whose chunks run in two phases, `MixedPlan`, two per thread,
    each at least `width` threads wide), or 0 (the serial path) when their private copies, `copy_bytes`
    each, would take more than GRADKERN_PRIVATE_BYTES (default 1 GiB), or for a mixed launch
    GRADKERN_MIXED_PRIVATE_BYTES (default the same)."""
    import numba

    plan = MixedPlan(width, ())
    chunks = plan.chunks(max(1, min(numba.get_num_threads() * plan.phases, n0)), n0)
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
