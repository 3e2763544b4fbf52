"""The blocked form of a step kernel (docs/checkpointed-loops.md, "Temporal blocking of recomputed steps"):
the pipeline's answer to "k launches of this step over ping-pong buffers as one pass", printed by the
backend, or the reason it cannot be given. The transform is transforms/temporal.py; the runtime runs it
(runtime/blocked.py); nothing here compiles or runs."""

from __future__ import annotations

from dataclasses import dataclass

from .backends import backend
from .ir import nodes as ir
from .ir.verify import verify
from .pipeline import Request, Specialization, _generate
from .transforms.temporal import blocked_kernel


@dataclass(frozen=True)
class BlockedSpecialization:
    """The blocked kernel's specialisation and the step's reach, or (spec None) why the step is refused."""

    spec: Specialization | None
    reach: int = 0
    reason: str = ""


def specialize_blocked(kernel: ir.Kernel, typed: ir.Kernel, src: str, dst: str, backend_name: str,
                       strided: frozenset[str] = frozenset(), boundscheck: bool = False) -> BlockedSpecialization:
    """The blocked form of `typed` (the step's typed primal; `kernel`: its untyped IR, for names in the
    generated code) from `src` to `dst`, on backend `backend_name`."""
    if not backend(backend_name).blocks_steps:
        return BlockedSpecialization(None, reason=f"the {backend_name} backend prints no blocked step (a GPU would "
                                     "want a tile per thread block: not built)")
    if boundscheck:
        return BlockedSpecialization(None, reason="bounds-checked launches (GRADKERN_BOUNDSCHECK=1) run one by one")
    found = blocked_kernel(typed, src, dst)
    if found.kernel is None:
        return BlockedSpecialization(None, reason=found.reason)
    k = verify(found.kernel, "temporal blocking")
    request = Request(kernel, {}, 1, backend_name, strided=strided)
    return BlockedSpecialization(_generate(request, k, "blocked", strided=strided), found.reach)
