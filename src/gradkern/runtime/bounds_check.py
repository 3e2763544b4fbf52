"""Refuse a launch that would touch an element outside its array (docs/launches.md),
before anything is written, with `gk.LaunchError` naming the access, a thread
and the array's shape.

At each launch the specialisation's bounds proof (analysis/bounds.py) decides
the affine accesses from the dim, the integer scalars and the shapes; its
verdict is cached per launch key, so a repeated launch pays a dict lookup. It
refuses the launch at once when it finds a thread that surely leaves an
array. Where it proves neither way, the exact check runs:
the bounds-checked kernel (the code GRADKERN_BOUNDSCHECK=1 generates) on
scratch copies of the arrays the kernel writes. It refuses the launch if some
access leaves its array, and lets it run otherwise (the proof was too weak, or
a data-dependent guard keeps the access inside). The derivative kernels make
the primal's accesses, on shadows of the primal's shapes, so the check of the
primal kernel covers every mode.
"""

from __future__ import annotations

from ..analysis.bounds import Outside
from ..pipeline import Specialization
from .arrays import is_array
from .binding import Binding
from .execute import out_of_bounds, outside_error, run_flagged

MAX_KEYS = 4096  # cached verdicts per specialisation: a program that varies its shapes without end starts over


def _verdict(spec: Specialization, b: Binding) -> bool | Outside:
    """The bounds proof's verdict on this launch (BoundsProof.decide), cached per launch key; True where
    nothing needs proving (GRADKERN_BOUNDSCHECK=1 checks in the generated code, or no thread runs)."""
    proof = spec.bounds
    if proof is None or 0 in b.dim:
        return True
    key = proof.key(b.dim, b.kernel_values)
    verdict = proof.verdicts.get(key)
    if verdict is None:
        if len(proof.verdicts) >= MAX_KEYS:
            proof.verdicts.clear()
        verdict = proof.verdicts[key] = proof.decide(b.dim, b.kernel_values)
    return verdict


def needs_bounds_check(spec: Specialization, b: Binding) -> bool:
    """Whether the proof leaves this launch to the exact check (the bounds-checked kernel is built and run:
    `gk.inspect(...).bounds_check`). False also where the proof names a thread outside: the launch is refused."""
    return _verdict(spec, b) is False


def check_bounds(spec: Specialization, b: Binding) -> None:
    """Raise LaunchError if this launch would touch an element outside its array.
    Reads the arguments only (the exact check runs on scratch copies)."""
    verdict = _verdict(spec, b)
    if verdict is True:
        return
    proof, values = spec.bounds, b.kernel_values
    if isinstance(verdict, Outside):
        site = verdict.site
        shape = tuple(values[[p.name for p in spec.typed.params].index(site.array)].shape)
        raise outside_error(spec.typed.name, verdict.thread, f"{site.kind} {site.text}", site.loc, site.array, shape,
                            f"index {verdict.index} on axis {verdict.axis} at dim={_dim(b.dim)}; no buffer was changed")
    full = None
    if proof.data_independent:  # the exact check's verdict is a function of the dim, shapes and scalars
        full = (b.dim, tuple(v.shape if is_array(v) else v for v in values))
        if full in proof.exact:
            return
    _exact_check(spec, b)
    if full is not None:
        if len(proof.exact) >= MAX_KEYS:
            proof.exact.clear()
        proof.exact.add(full)


def _dim(dim: tuple[int, ...]):
    return dim[0] if len(dim) == 1 else dim


def _exact_check(spec: Specialization, b: Binding) -> None:
    """Run the bounds-checked kernel on scratch copies of the written arrays."""
    checked = spec.bounds_checked()
    names = [p.name for p in spec.typed.params]
    values = list(b.kernel_values)
    for name in spec.facts.written:
        n = names.index(name)
        values[n] = values[n].copy()
    found = run_flagged(checked, b.dim, values)
    if found is not None:
        raise out_of_bounds(checked, b.dim, values, *found, f"at dim={_dim(b.dim)}; no buffer was changed")
