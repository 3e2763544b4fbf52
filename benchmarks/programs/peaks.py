"""Exact peak counts for checkpoint.py's memory rows (docs/checkpointed-loops.md, "What the peak holds").

The RSS high-water mark checkpoint.py reads is the kernel's batched counter (its docstring: up to 62 pages,
0.12 states at N = 2**18 on 2 CPUs, low). Two counters here are exact, each for what it counts:

* `LargeAllocations`: glibc's own high-water mark of its mmapped chunks (`malloc_stats`' "max mmap bytes",
  glibc's `mp_.max_mmapped_mem`, raised at every mmap of a chunk). With MALLOC_MMAP_THRESHOLD_=65536 (which
  checkpoint.py's children set; an explicit threshold also turns glibc's dynamic threshold off) every
  malloc of 64 KiB or more is its own mapping: NumPy's array data, Numba's NRT allocations (NRT allocates
  through malloc), CPython's large objects. A NumPy array of N float64 is one chunk of N x 8 + 8 bytes
  rounded up to a page (N = 2**18: 2 MiB + 4 KiB). The mark only grows, so a call's peak is read as the mark
  after the call less the mapped bytes before it, and is exact when the call raised the mark (`raised`).
* tracemalloc (`traced_peak`): every Python allocation and NumPy's data (NumPy reports its allocations in its
  own domain), at their requested sizes; its peak is exact for their sum. Tracing slows Python, and its own
  bookkeeping is resident memory, so it runs in its own call, never in the RSS row's.

Numba's NRT allocations inside kernels are not traced by tracemalloc; they are counted by NRT's statistics
(`nrt_allocations`, NUMBA_NRT_STATS=1 in the child) and, at 64 KiB or more, by `LargeAllocations`.
"""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
import tracemalloc

_LIBC = ctypes.CDLL(None)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def _mapped() -> int:
    """The bytes glibc holds in mmapped chunks now (mallinfo2's hblkhd)."""
    _LIBC.mallinfo2.restype = _MallInfo2
    return int(_LIBC.mallinfo2().hblkhd)


def _max_mapped() -> int:
    """glibc's high-water mark of mmapped chunks (malloc_stats writes it to stderr only)."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            _LIBC.malloc_stats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode()
    return int(re.search(r"max mmap bytes\s*=\s*(\d+)", text).group(1))


class LargeAllocations:
    """Around one call: the peak of the bytes in mmapped chunks (every malloc of MALLOC_MMAP_THRESHOLD_ or
    more) above what was mapped before it."""

    def __enter__(self) -> LargeAllocations:
        self.before, self.mark_before = _mapped(), _max_mapped()
        return self

    def __exit__(self, *exc) -> None:
        mark = _max_mapped()
        self.raised = mark > self.mark_before  # else the call's peak is at most the earlier mark: not exact
        self.peak = mark - self.before
        self.after = _mapped() - self.before


def chunk_bytes(nbytes: int) -> int:
    """The bytes of glibc's mmapped chunk for a malloc of `nbytes` (a header word, rounded up to a page)."""
    page = os.sysconf("SC_PAGE_SIZE")
    return -(-(nbytes + 8) // page) * page


def traced_peak(call) -> tuple[int, int]:
    """tracemalloc's peak during `call()` above the traced bytes before it, and what it left traced."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        call()
        now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, now - before


def nrt_allocations() -> int | None:
    """Numba NRT's allocation count so far (None without NUMBA_NRT_STATS=1)."""
    from numba.core.runtime import rtsys
    try:
        return int(rtsys.get_allocation_stats().alloc)
    except RuntimeError:  # statistics off
        return None


def exact_above(row: dict, primal: dict, state: int) -> tuple[str, str]:
    """The table's exact columns: the large allocations above the primal's, in arrays of one state (glibc's
    chunks), and tracemalloc's peak above the primal's, in states ("" where not measured or not exact)."""
    arrays = traced = ""
    if row is not primal and row.get("large_raised") and primal.get("large_raised"):
        arrays = f"{(row['large_peak'] - primal['large_peak']) / chunk_bytes(state):.3f}"
    if row is not primal and "traced_peak" in row and "traced_peak" in primal:
        traced = f"{(row['traced_peak'] - primal['traced_peak']) / state:.3f}"
    return arrays, traced


def s10_goal(row: dict, primal: dict, state: int, slack: int) -> str:
    """Issue 33's memory goal, snapshots = 10 at most 12 states above the primal, decided on the exact count of
    arrays (glibc's large allocations), with its derivation, tracemalloc's count and the RSS reading beside."""
    chunk = chunk_bytes(state)
    rss = (row["peak_bytes"] - primal["peak_bytes"]) / state
    exact = bool(row.get("large_raised") and primal.get("large_raised"))
    if exact:
        arrays = (row["large_peak"] - primal["large_peak"]) / chunk
        parts = [f"* snapshots = 10, exact: the allocations of 64 KiB or more at the gradient's peak are "
                 f"{row['large_peak']:,} bytes = {row['large_peak'] / chunk:.3f} arrays of one state (glibc chunks "
                 f"of {chunk:,} bytes), the primal's {primal['large_peak']:,} = {primal['large_peak'] / chunk:.3f}: "
                 f"{arrays:.3f} states above the primal (goal <= 12: {'met' if arrays <= 12 else 'MISSED'})"]
    else:
        arrays = round(rss)
        parts = [f"* snapshots = 10: no exact count of the arrays (a call did not raise glibc's mark, peaks.py), "
                 f"so the goal reads the RSS: {rss:.2f} states above the primal (+- {slack / state:.2f}; goal <= 12: "
                 f"{'met' if rss <= 12 else 'MISSED'})"]
    if "traced_peak" in row and "traced_peak" in primal:
        traced = row["traced_peak"] - primal["traced_peak"]
        rest = traced - round(arrays) * state
        parts.append(f"tracemalloc (NumPy's data and Python's objects): {traced:,} bytes above the primal's peak "
                     f"= {round(arrays)} x {state:,} + {rest:,} bytes ({rest / state:.3f} states) of Python objects "
                     f"and small allocations")
    if "nrt_allocations" in row:
        whole = exact and row["large_peak"] % chunk == 0 and primal["large_peak"] % chunk == 0
        parts.append(f"Numba NRT: {row['nrt_allocations']:,} allocations during the call (the primal: "
                     f"{primal.get('nrt_allocations', '?')}), "
                     + ("so none of 64 KiB or more was live at the peak beyond whole arrays" if whole else
                        "not counted by size here" if not exact else
                        "and the large allocations are not whole arrays: see which"))
    parts.append(f"RSS: {rss:.2f} states above (+- {slack / state:.2f}, the counter's batching)")
    return "; ".join(parts)
