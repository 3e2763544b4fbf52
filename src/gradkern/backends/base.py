"""What every backend object implements, and what it returns (backends/__init__.py
holds the registry)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LaunchError
from ..ir import nodes as ir


@dataclass(frozen=True)
class LaunchInfo:
    """What one backend alone reads when it runs the code it generated. Each backend has its own kind
    (numba_cpu.CpuLaunch: privatised targets, siblings, the mixed plan; cuda.CudaLaunch: the argument
    layout, which hostcuda shares; interp.InterpLaunch: the kernel as printed) and reads no other's."""


@dataclass(frozen=True)
class Generated:
    """A backend's output for one typed kernel: its source (None for the interpreter), the entry
    function's name, and `info`, what only that backend reads when running it (`LaunchInfo`)."""

    source: str | None = None
    entry: str | None = None
    info: LaunchInfo | None = None


@dataclass(frozen=True)
class Ahead:
    """One function to compile ahead of its first launch, in a worker process (runtime/compile_pool.py):
    the generated module `module` in `directory`, its function `function`, the argument types the launch
    will pass (`signature`, picklable). docs/compile-time.md, finding 7."""

    directory: str
    module: str
    function: str
    signature: tuple


class Backend:
    """The interface every backend object implements."""

    name: str = ""
    #: the CPU loops print an interior without edge tests (transforms/split.py)
    splits_interior: bool = False
    #: the pipeline marks which atomic adds land at `tid[0] + c` on array axis 0 (analysis/rows.py)
    private_rows: bool = False
    #: prints a kernel's deferred statements (ir.Deferred) row-lagged inside chunks whose rows run in order,
    #: so the pipeline folds a gather's reverse into it (transforms/fold.py); a GPU has no such order
    row_lagged: bool = False
    #: array strides are part of the specialisation (C-contiguous arrays index without them)
    strides_in_key: bool = False
    #: whether the generated code loads every element as a whole aligned value (C++ and the GPU: an array whose
    #: elements are not aligned to their size is undefined behaviour there, refused at binding; Numba's code
    #: takes it, typed unaligned: docs/errors.md#hostile-inputs)
    aligned_only: bool = False
    #: forms of the exact run-time race check this backend gets, the one it runs first
    race_check_forms: tuple[str, ...] = ("serial",)
    #: vector mode runs its k lanes as launches of at most this many lanes, the primal once (0: all k in one
    #: launch). A CPU thread streaming every lane's shadows at once misses in cache and does not vectorise: the
    #: 2-D heat step's 8-lane gather streams 16 arrays, whose equally aligned rows collide in the same cache sets
    #: on a 2-core AMD EPYC (benchmarks/kernels/batch.py). Where a gather exists and nothing is taped, the groups'
    #: gathers are followed by one fused launch of all lanes (runtime/reverse.py)
    lane_group: int = 0
    #: prints a temporally blocked step (transforms/temporal.py): a loop of tiles per worker thread, whose
    #: scratch rows stay in that thread's cache; a GPU would want one tile per thread block (not built)
    blocks_steps: bool = False

    def workers(self) -> int:
        """How many threads a launch of this backend runs on (a blocked step's workers)."""
        return 1

    def keeps_interior(self, k: ir.Kernel) -> bool:
        """Whether `k`, split into an interior (`k.interior` set), is worth printing so: every copy of
        a body is compiled, so a backend prints the interior only where it pays (docs/compile-time.md)."""
        return True

    def generate(self, k: ir.Kernel, launch_ndim: int, *, parallel: bool, strided: frozenset[str],
                 header: str) -> Generated:
        raise NotImplementedError

    def compile(self, code: Generated, cache: Path) -> Any:
        """The callable that runs `code` (None where nothing is compiled)."""
        raise NotImplementedError

    def run(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
            values: list) -> None:
        """Run over `dim` with the values of `typed`'s parameters, in order."""
        raise NotImplementedError

    def launcher(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
                 values: list) -> Any:
        """A callable `launch(values)` that does what `run(typed, code, entry, parallel, dim, values)` does for
        values of the same kinds and geometry as `values`, with what `run` decides from them decided once (a
        program's sweep replays one prepared call step after step: runtime/reverse.py); None where `run` must
        decide at each launch."""
        return None

    def ahead(self, code: Generated, entry: Any, dim: tuple[int, ...], values: list) -> Ahead | None:
        """What a worker process can compile ahead so that `run(..., dim, values)` finds it compiled, or
        None: compiled already (in this process or on disk), kept in memory, or nothing to compile."""
        return None

    def compile_here(self, ahead: Ahead) -> None:
        """Compile `ahead` in this process (the compile pool gives the main process pending work)."""

    def array_module(self) -> Any:
        """Where this backend's buffers (tapes, counters, accumulators) live."""
        raise NotImplementedError

    def private_bytes(self, code: Generated, sizes: dict[str, int], dim: tuple[int, ...]) -> int:
        """Bytes of per-chunk private copies a launch allocates (`sizes`: bytes per array)."""
        return 0

    def summation(self, code: Generated, accumulator: str, parallel: bool) -> str:
        """How a launch sums an Active scalar's per-thread derivatives into `accumulator` (gk.inspect says)."""
        if not parallel:
            return "one float64 sum, thread after thread (a serial launch)"
        return "each thread's float64 sum added once into the accumulator by an atomic add"


def check_launch_ndim(launch_ndim: int) -> None:
    if not 1 <= launch_ndim <= 3:
        raise LaunchError(f"a launch has 1 to 3 dimensions, got {launch_ndim}")
