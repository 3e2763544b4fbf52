"""k launches of one step over ping-pong buffers as one temporally blocked pass (docs/checkpointed-loops.md,
"Temporal blocking of recomputed steps"), for the program layer, which sees launches, never bodies.

`blocked_step(kernel, bound, src, dst)` asks the pipeline (blocking.py) for the step's blocked form, once per
signature and pair of parameters, and answers a `BlockedStep` or the reason there is none. `BlockedStep.run`
takes the k launches as they were prepared (each a `Bound`, launch i + 1 the same call with the two buffers
swapped) and leaves both buffers exactly as the k launches would: state k in the one launch k wrote, state
k - 1 in the other. The blocked kernel reads one buffer and writes the other, so it computes k - 1 steps
(k even: then launch k runs as prepared) or k - 2 (k odd: launch 1 runs first, then the blocked pass from
the buffer it wrote, then launch k): every element either buffer ends with is computed by the same
operations on the same operands as in the k launches, so the result is the same to the bit.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..backends import backend
from ..blocking import BlockedSpecialization, specialize_blocked
from ..kernel import KernelFunction
from .call import Bound, Run
from .specialize import _cached

# points per tile: 2 scratch rows of 2048 float64 (2 x 16.5 KiB with the halo) stay in a 48 KiB L1, as fast as
# L2-sized rows of 16384 or faster (docs/checkpointed-loops.md, "The scratch"), and 0.03 states at 2**18 points
TILE = int(os.environ.get("GRADKERN_TEMPORAL_TILE", "2048"))
# launches per blocked pass at most: the halo of k·r points per tile end is computed twice, k·r/tile extra work;
# also at most tile / (2r) + 1, so that a scratch row (tile + 2(k - 1)r points) is at most 2 tiles (`scratch_bytes`)
MAX_STEPS = 32
# the least state (bytes of one buffer) for which a blocked pass pays: measured, docs/checkpointed-loops.md
MIN_BYTES = int(os.environ.get("GRADKERN_TEMPORAL_BYTES", str(2 << 20)))
MIN_LAUNCHES = 4  # fewer: the blocked pass would compute one step or none
# each thread's scratch rows, by dtype and backend, grown as needed and kept: a loop's recomputation allocates
# none (benchmarks/programs/checkpoint.py counts the loop's peak memory after a warm-up)
_SCRATCH = threading.local()


class BlockedStep:
    """A step's blocked form for one signature (module doc): the pass, its reach, and the positions of the
    buffer it reads (`src`) and the one it writes (`dst`) among the kernel's values."""

    def __init__(self, spec: BlockedSpecialization, src: int, dst: int):
        self.run_ = Run("blocked", spec.spec, 0, 0, spec.spec)
        self.reach, self.src, self.dst = spec.reach, src, dst
        self.be = backend(spec.spec.backend)

    def pays(self, bound: Bound) -> bool:
        """Whether a run of launches like `bound` is large enough to block (MIN_BYTES)."""
        return bound.values[self.src].nbytes >= MIN_BYTES

    def run(self, launches: list[Bound]) -> None:
        """The launches, prepared and in order, run as the module doc says (at least MIN_LAUNCHES)."""
        most = _most(self.reach)
        while launches:
            # no short tail: a run a little longer than `most` is cut so that its last pass has MIN_LAUNCHES
            take = most if len(launches) <= most or len(launches) - most >= MIN_LAUNCHES else \
                len(launches) - MIN_LAUNCHES
            part, launches = launches[:take], launches[take:]
            self._part(part)

    def _part(self, part: list[Bound]) -> None:
        k = len(part)
        if k < MIN_LAUNCHES:
            for bound in part:
                _run(bound)
            return
        if k % 2:
            _run(part[0])
            self._pass(part[1], k - 2)
        else:
            self._pass(part[0], k - 1)
        _run(part[-1])

    def _pass(self, first: Bound, steps: int) -> None:
        """`steps` launches from `first` in one blocked pass: its src read, its dst written."""
        values = first.values
        n = first.call.dim[0]
        workers = max(1, self.be.workers())
        tile = max(1, min(TILE, -(-n // workers)))
        ntiles = -(-n // tile)
        workers = min(workers, ntiles)
        shape = (2 * workers, tile + 2 * steps * self.reach)
        self.run_((workers,), [*values, self._scratch(shape, values[self.dst].dtype), n, ntiles, tile, steps,
                               workers])

    def _scratch(self, shape: tuple[int, int], dtype: Any) -> Any:
        kept = _SCRATCH.__dict__.setdefault("rows", {})
        key = (dtype, self.be.name)
        s = kept.get(key)
        if s is None or s.shape[0] < shape[0] or s.shape[1] < shape[1]:
            # as large as any pass of this reach needs, whatever the state's size: a first pass on a small state
            # (a warm-up) allocates what later ones use
            rows = max(shape[0], 2 * self.be.workers(), s.shape[0] if s is not None else 0)
            width = max(shape[1], TILE + 2 * (_most(self.reach) - 1) * self.reach, s.shape[1] if s is not None else 0)
            s = kept[key] = self.be.array_module().empty((rows, width), dtype)
        return s


def _most(reach: int) -> int:
    """Launches per pass at most for a step of this reach (MAX_STEPS)."""
    return max(MIN_LAUNCHES, min(MAX_STEPS, TILE // (2 * max(reach, 1)) + 1))


def scratch_bytes(itemsize: int) -> int:
    """The most the blocked passes allocate (their scratch rows, kept per thread) for a state of `itemsize`-byte
    elements: two rows a worker, each at most 2 TILE points (`_most`) for a step of reach up to TILE / 6; a
    checkpointed loop's memory= counts it (docs/checkpointed-loops.md, "The scratch")."""
    return 2 * max(1, backend("cpu").workers()) * 2 * TILE * itemsize


def _run(bound: Bound) -> None:
    for r in bound.call.runs:
        r(bound.call.dim, bound.values)


def blocked_step(kernel: KernelFunction, bound: Bound, src: int, dst: int) -> BlockedStep | str:
    """The blocked form of `kernel`'s launch `bound` reading the buffer at position `src` and writing the one at
    `dst` (module doc), or why there is none. Cached with the kernel's specialisations."""
    call, b = bound.call, bound.b
    if len(call.dim) != 1:
        return "the launch is not 1-D"
    if b.aliases:
        return "the launch passes one array for two parameters"
    a, d = bound.values[src], bound.values[dst]
    if a.shape != (call.dim[0],) or d.shape != (call.dim[0],):
        return "the buffers' shapes are not the launch's extent"
    params = [p.name for p in call.primal.typed.params]
    boundscheck = bool(call.primal.bounds_sites)
    spec = _cached(kernel, ("blocked", b.key, src, dst, boundscheck), lambda: specialize_blocked(
        kernel.ir, call.primal.typed, params[src], params[dst], b.backend, frozenset(b.strided), boundscheck))
    if spec.spec is None:
        return spec.reason
    return BlockedStep(spec, src, dst)
