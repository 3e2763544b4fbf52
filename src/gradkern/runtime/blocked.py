"""k launches of one step over ping-pong buffers as one temporally blocked pass (docs/checkpointed-loops.md,
"Temporal blocking of recomputed steps"), for the program layer, which sees launches, never bodies.

`blocked_step(kernel, bound, src, dst)` asks the pipeline (blocking.py) for the step's blocked form, once per
signature and pair of parameters, and answers a `BlockedStep` or the reason there is none. `BlockedStep.run`
takes the k launches as they were prepared (each a `Bound`, launch i + 1 the same call with the two buffers
swapped) and leaves both buffers exactly as the k launches would: state k in the one launch k wrote, state
k - 1 in the other. The blocked kernel reads one buffer and writes the other, so it computes k - 1 steps
(k even: then launch k runs as prepared) or k - 2 (k odd: launch 1 runs first, then the blocked pass from
the buffer it wrote, then launch k): every element either buffer ends with is computed by the same
operations on the same operands as in the k launches, so the result is the same to the bit. A 2-D launch's
tiles are bands of whole rows (`_tile`, docs/checkpointed-loops.md "2-D steps").
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..backends import backend
from ..blocking import BlockedSpecialization, specialize_blocked
from ..environment import env_int
from ..kernel import KernelFunction
from .call import Bound, Run
from .specialize import _cached

# points per tile: 2 scratch rows of 2048 float64 (2 x 16.5 KiB with the halo) stay in a 48 KiB L1, as fast as
# L2-sized rows of 16384 or faster (docs/checkpointed-loops.md, "The scratch"), and 0.03 states at 2**18 points
TILE = env_int("GRADKERN_TEMPORAL_TILE", 2048, minimum=1)
# launches per blocked pass at most: the halo of k·r points per tile end is computed twice, k·r/tile extra work;
# also at most tile / (2r) + 1, so that a scratch row (tile + 2(k - 1)r points) is at most 2 tiles (`scratch_bytes`)
MAX_STEPS = 32
# the least state (bytes of one buffer) for which a blocked pass pays: measured, docs/checkpointed-loops.md
MIN_BYTES = env_int("GRADKERN_TEMPORAL_BYTES", 2 << 20)
MIN_LAUNCHES = 4  # fewer: the blocked pass would compute one step or none
# a 2-D (3-D) step's tiles are bands of whole rows (planes): the rows of BAND_BYTES but at least BAND_MIN of them
# (docs/checkpointed-loops.md, "2-D steps": 64 rows of 2048 float64 as fast as 32 … 256; 3-D planes of 128 KiB:
# bands of 32 planes 1.31x the launches, of 8 planes 1.05x); a pass at most band / 4r + 1 launches (halos of at
# most half a band, so a worker's two scratch bands are at most 1.5 bands each); BAND_ROWS (tests, benchmarks)
# sets a band's rows
BAND_BYTES = env_int("GRADKERN_TEMPORAL_BAND", 1 << 20)
BAND_MIN = 32
BAND_ROWS = env_int("GRADKERN_TEMPORAL_ROWS", 0, minimum=1) or None
# the least 2-D or 3-D state for which a blocked pass pays: 64 MiB, measured on the quiet machine (2-D 2896^2
# float64: 1.23-1.36x for k = 8, 16 at one and two threads; 4096^2 1.22-1.45x; 2048^2 (32 MiB) 0.80-1.26x, even:
# the VM's L3 holds it), docs/checkpointed-loops.md "2-D steps"
MIN_BYTES_2D = env_int("GRADKERN_TEMPORAL_BYTES_2D", 64 << 20)
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
        """Whether a run of launches like `bound` is large enough to block (MIN_BYTES; 2-D: MIN_BYTES_2D, and its
        bands hold enough rows for MIN_LAUNCHES launches a pass, `_most`)."""
        a = bound.values[self.src]
        if a.ndim == 1:
            return a.nbytes >= MIN_BYTES
        # a band of fewer than 12 r rows: halos as wide as the band
        return a.nbytes >= MIN_BYTES_2D and _tile(a) // (4 * max(self.reach, 1)) + 1 >= MIN_LAUNCHES

    def run(self, launches: list[Bound]) -> None:
        """The launches, prepared and in order, run as the module doc says (at least MIN_LAUNCHES)."""
        most = _most(self.reach, launches[0].values[self.src]) if launches else MIN_LAUNCHES
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
        n, state = first.call.dim[0], values[self.src]
        workers = max(1, self.be.workers())
        tile = max(1, min(_tile(state), -(-n // workers)))
        ntiles = -(-n // tile)
        workers = min(workers, ntiles)
        shape = (2 * workers, tile + 2 * steps * self.reach, *state.shape[1:])
        self.run_((workers,), [*values, self._scratch(shape, values[self.dst].dtype), n, ntiles, tile, steps,
                               workers, *state.shape[1:]])

    def _scratch(self, shape: tuple[int, ...], dtype: Any) -> Any:
        kept = _SCRATCH.__dict__.setdefault("rows", {})
        key = (dtype, self.be.name, len(shape))
        s = kept.get(key)
        if s is None or any(have < need for have, need in zip(s.shape, shape)):
            # as large as any pass of this reach needs, whatever the state's size: a first pass on a small state
            # (a warm-up) allocates what later ones use (a 2-D band: as large as this pass's and the last one's)
            old = s.shape if s is not None else (0,) * len(shape)
            rows = max(shape[0], 2 * self.be.workers(), old[0])
            width = max(shape[1], old[1], TILE + 2 * (_most(self.reach) - 1) * self.reach if len(shape) == 2
                        else 0)
            s = kept[key] = self.be.array_module().empty((rows, width, *(max(a, c) for a, c in zip(shape[2:],
                                                                                                  old[2:]))), dtype)
        return s


def _tile(state: Any) -> int:
    """Points (2-D: rows, 3-D: planes) per tile of a pass over `state`: TILE, or for a 2-D or 3-D state BAND_ROWS
    or the rows (planes) of BAND_BYTES."""
    if state.ndim == 1:
        return TILE
    return BAND_ROWS if BAND_ROWS is not None else max(BAND_MIN, BAND_BYTES // max(1, state[0].nbytes))


def _most(reach: int, state: Any = None) -> int:
    """Launches per pass at most for a step of this reach over `state` (None: a 1-D one) (MAX_STEPS, BAND_BYTES)."""
    if state is None or state.ndim == 1:
        return max(MIN_LAUNCHES, min(MAX_STEPS, TILE // (2 * max(reach, 1)) + 1))  # 2-D, 3-D: halos of half a band
    return max(MIN_LAUNCHES, min(MAX_STEPS, _tile(state) // (4 * max(reach, 1)) + 1))


def scratch_bytes(itemsize: int, shape: tuple[int, ...] = ()) -> int:
    """The most the blocked passes allocate (their scratch rows, kept per thread) for a state of `itemsize`-byte
    elements: two rows a worker, each at most 2 TILE points (`_most`) for a step of reach up to TILE / 6; for a
    2-D or 3-D state of `shape`, nothing under MIN_BYTES_2D (never blocked), else two bands a worker of at most 1.5
    bands' rows each (`_most`, `_tile`); a checkpointed loop's memory= counts it
    (docs/checkpointed-loops.md, "The scratch")."""
    workers = max(1, backend("cpu").workers())
    if len(shape) >= 2:
        row = int(np.prod(shape[1:])) * itemsize
        if shape[0] * row < MIN_BYTES_2D:
            return 0
        return workers * 2 * (3 * max(BAND_MIN, BAND_BYTES // max(1, row)) // 2 + 1) * row
    return workers * 2 * 2 * TILE * itemsize


def _run(bound: Bound) -> None:
    for r in bound.call.runs:
        r(bound.call.dim, bound.values)


def blocked_step(kernel: KernelFunction, bound: Bound, src: int, dst: int) -> BlockedStep | str:
    """The blocked form of `kernel`'s launch `bound` reading the buffer at position `src` and writing the one at
    `dst` (module doc), or why there is none. Cached with the kernel's specialisations."""
    call, b = bound.call, bound.b
    if len(call.dim) > 3:
        return "the launch has more than 3 axes"
    if b.aliases:
        return "the launch passes one array for two parameters"
    a, d = bound.values[src], bound.values[dst]
    if a.shape != tuple(call.dim) or d.shape != tuple(call.dim):
        return "the buffers' shapes are not the launch's extent"
    params = [p.name for p in call.primal.typed.params]
    boundscheck = bool(call.primal.bounds_sites)
    spec = _cached(kernel, ("blocked", b.key, src, dst, boundscheck), lambda: specialize_blocked(
        kernel.ir, call.primal.typed, params[src], params[dst], b.backend, frozenset(b.strided), boundscheck))
    if spec.spec is None:
        return spec.reason
    return BlockedStep(spec, src, dst)
