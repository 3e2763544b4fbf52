"""Every generated source of a corpus of calls, as JSON on stdout, so that
tests/backends/test_determinism.py can compare the text that processes with different
PYTHONHASHSEED values generate (docs/caching.md: generated code is a function of
the kernel and its signature only).

Run as `python tests/support/determinism_sources.py [--boundscheck] [--sample] [--reverse-order]`. The calls are
tests/support/signatures.py's: the corpus (primal, each dtype), every reverse-mode case
(the test suites' and the kernel library's) as a primal launch, in reverse mode
(fused, split augmented primal and reverse, count, gather), in forward mode and,
on a sample, in vector mode with BatchDuplicated in both modes, and the racy
kernels (their race checks); each on the CPU (Numba Python) and in CUDA C.
Beside what `gk.inspect` reports, the primal's bounds-checked variant and its
parallel race check (note, look) are printed. `--boundscheck` generates
everything as GRADKERN_BOUNDSCHECK=1 does (every access checked); `--sample`
only the calls of SAMPLE; `--reverse-order` makes the calls in the opposite
order (a source must not depend on what the process generated before)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/: support.* as under pytest


def _extra_sources(kernel, sig, backend_name: str) -> dict[str, str]:
    """The primal roles `gk.inspect` leaves out: the bounds-checked variant a launch
    builds when its bounds proof fails, and the race check as two parallel launches."""
    from gradkern.annotations import primal
    from gradkern.runtime.binding import bind, default_dim
    from gradkern.runtime.launch import check_kernel
    from gradkern.runtime.specialize import primal_specialization

    k = check_kernel(kernel)
    values = tuple(primal(a) for a in sig.args)
    dim = sig.dim if sig.dim is not None else default_dim(k.ir, values)
    b = bind(k.ir, dim, values, backend_name, inspect_only=True)
    spec = primal_specialization(k, b)
    out = {}
    if spec.bounds_checked is not None:
        out["bounds_check"] = spec.bounds_checked().source
    for role, s in zip(("race_note", "race_look"), spec.race_parallel or ()):
        out[role] = s.source
    return {r: s for r, s in out.items() if s is not None}


# --sample: calls that together print every role (the race check's parallel pair of the racy kernels, the
# count kernels of taped loops, gathers, vector mode) and the kernels that tape restored locals
SAMPLE = ("corpus/axpy_guard-", "corpus/histogram-", "racy/", "reverse/heat_2d", "reverse/loop_sin", "tape/",
          "gather/periodic_partial", "local/local_overwrite", "library/nbody_forces")


def collect(sample: bool = False, reverse_order: bool = False) -> dict[str, str]:
    import gradkern as gk
    from support.signatures import all_signatures

    sources: dict[str, str] = {}
    calls = [(n, sig) for n, sig in enumerate(all_signatures()) if not sample or sig.label.startswith(SAMPLE)]
    for n, sig in reversed(calls) if reverse_order else calls:
        for backend_name in ("cpu", "cuda"):
            try:
                found = gk.inspect(sig.kernel, *sig.args, dim=sig.dim, mode=sig.mode, backend=backend_name)
            except gk.GradkernError as e:  # a signature a backend refuses: the refusal must be the same too
                sources[f"{n}:{sig.label}/{backend_name}/error"] = f"{type(e).__name__}: {e}"
                continue
            for role, text in sorted(found.sources.items()):
                sources[f"{n}:{sig.label}/{backend_name}/{role}"] = text
            if sig.mode is None:
                for role, text in sorted(_extra_sources(sig.kernel, sig, backend_name).items()):
                    sources[f"{n}:{sig.label}/{backend_name}/{role}"] = text
    return sources


if __name__ == "__main__":
    if "--boundscheck" in sys.argv[1:]:
        os.environ["GRADKERN_BOUNDSCHECK"] = "1"
    json.dump(collect("--sample" in sys.argv[1:], "--reverse-order" in sys.argv[1:]), sys.stdout, sort_keys=True)
