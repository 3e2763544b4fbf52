"""Per-signature call plans: what a launch or derivative call of a signature seen before does again.

A call whose signature (binding._signature / annotate._signature: the kernel, dim, backend, each argument's
type, and each array's dtype, shape, strides and flags, with no two arrays sharing memory) was validated,
specialised and checked before keeps a plan in that signature's cache entry: the specialisations to run,
how their arguments are laid out, and the bounds and race checks' outcome where it depends on nothing
the signature leaves open but the integer (and bool) scalars. A hit then converts the scalars, repeats the
checks of the call's values (`_signature`'s int64 range and overlap tests, a finite Active value), and
runs; a miss, or a value check that fails, takes the full path, which raises the same error a first call
would. Plans hold no arrays of the caller's. A plan is valid for one generation of its kernel's
specialisation cache (kernel.SpecCache): emptying that cache drops every plan built from it.
"""

from __future__ import annotations

from math import isfinite
from typing import Any

from ..annotations import Active, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed
from ..backends import backend as backend_object
from ..ir.types import Array
from ..kernel import KernelFunction
from ..pipeline import Specialization
from .binding import Binding, scalar_values
from .execute import entry_of, run_spec
from .race_check import needs_race_check

MAX_PASSED = 256  # remembered integer-scalar tuples per plan whose checks passed


class Runner:
    """Runs one specialisation as execute.run_spec does, its backend object and compiled entry looked up
    once (a bounds-checked specialisation, GRADKERN_BOUNDSCHECK=1, goes through run_spec)."""

    __slots__ = ("spec", "run", "typed", "code", "entry", "parallel")

    def __init__(self, spec: Specialization):
        self.spec = spec
        self.run = None if spec.bounds_sites else backend_object(spec.backend).run
        self.typed, self.code, self.parallel = spec.typed, spec.code, spec.parallel
        self.entry = None if spec.bounds_sites else entry_of(spec)

    def __call__(self, dim: tuple[int, ...], values: list) -> None:
        if self.run is None:
            run_spec(self.spec, dim, values)
        else:
            self.run(self.typed, self.code, self.entry, self.parallel, dim, values)


def int_positions(spec: Specialization) -> tuple[int, ...]:
    """Positions of the integer and bool scalar parameters among the kernel's values: with the signature,
    what the bounds proof, the race proof and the row-exactness facts of a launch depend on."""
    return tuple(n for n, p in enumerate(spec.typed.params)
                 if not isinstance(p.type, Array) and (p.type.is_int or p.type.is_bool))


def checks_settled(spec: Specialization, b: Binding, plain_adds: frozenset[str] = frozenset()) -> bool:
    """Whether the checks that just passed for binding `b` (check_bounds, check_races and, for a gradient
    whose shadows of `plain_adds` take plain adds, check_exclusive_rows) pass at every call with its
    signature and integer scalars: the bounds proof proved every affine access inside (no exact check ran)
    and no exact race check is needed; no array is read in segments (their pointers' values decide)."""
    if 0 in b.dim:
        return True
    proof = spec.bounds
    if proof is not None and proof.verdicts.get(proof.key(b.dim, b.kernel_values)) is not True:
        return False
    if needs_race_check(spec, b):
        return False
    facts = spec.facts
    # row exactness (passed) is a function of the dim, the shapes and the integer scalars
    return not any(name in plain_adds for name, _, _ in facts.segments)


class Checks:
    """The bounds and race checks' outcome per tuple of integer scalar values (positions `ints`), for
    one signature: a tuple recorded here passed them and needs no check again."""

    __slots__ = ("ints", "passed")

    def __init__(self, ints: tuple[int, ...]):
        self.ints = ints
        self.passed: set = set()

    def key(self, values) -> tuple:
        return tuple([values[n] for n in self.ints]) if self.ints else ()

    def settled(self, values) -> bool:
        return (tuple([values[n] for n in self.ints]) if self.ints else ()) in self.passed

    def record(self, values) -> None:
        if len(self.passed) >= MAX_PASSED:
            self.passed.clear()
        self.passed.add(self.key(values))


def made(cls: type, **fields: Any) -> Any:
    """An instance of dataclass `cls` with these fields, made without its __init__: a frozen dataclass's
    __init__ sets each field through object.__setattr__, a cost a call pays for every such record. Only
    for dataclasses without __post_init__ and with every field given (or defaulted on the class)."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def valid(plan: Any, kernel: KernelFunction) -> bool:
    """A plan built for `kernel` from the current generation of its specialisation cache."""
    return plan is not None and plan.kernel is kernel and plan.generation == kernel._specs.generation


def planned_call(template: Any, args: tuple) -> tuple[Binding, list, list] | None:
    """A planned derivative call's binding, primal values and derivative buffers (a tuple of lanes per
    differentiated argument) from its annotated `args`, whose signature `template` was made for; None when
    an Active value is not finite (the full path then raises what a first call would)."""
    primals, derivatives = [], []
    for a in args:
        t = type(a)
        if t is Duplicated or t is DuplicatedNoNeed:
            derivatives.append((a.dval,))
            primals.append(a.val)
        elif t is Active:
            if not isfinite(a.val):
                return None
            primals.append(a.val)
        elif t is Const:
            primals.append(a.val)
        elif t is BatchDuplicated:
            derivatives.append(tuple(a.dvals))
            primals.append(a.val)
        else:
            primals.append(a)
    tb = template[0]
    b = made(Binding, dim=tb.dim, types=tb.types, values=tuple(scalar_values(template, primals)), backend=tb.backend,
             names=tb.names, aliases=(), strided=tb.strided)
    return b, primals, derivatives
