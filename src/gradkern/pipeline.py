"""The compile pipeline, as lists of named stages (docs/architecture.md; Numba's pass
manager): each stage has a name, a one-line purpose and a function that takes
the work so far and returns what it produced. After every stage the verifier
checks each kernel the stage made, and with GRADKERN_DUMP=dir each is written
there as `<kernel>.<signature>.<nn>-<stage>.<role>.txt`.

    primal:  merge_aliases → infer_types → race_check → bounds → generate
    reverse: primal stages → unroll → versions → activity → reverse → gather → no_need → lanes → fuse → generate
    forward: primal stages → activity → tangent → lanes → primal_stores → generate

Nothing here compiles or runs: the backend object's `generate` prints source;
the runtime compiles and runs it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ._version import __version__
from .analysis.access import LaunchFacts, launch_facts
from .analysis.activity import Activity, analyze_activity
from .analysis.bounds import BoundsProof, bounds_proof
from .analysis.races import RaceCheck, array_proofs, param_bits, race_check_kernel, race_proof
from .analysis.rows import mark_rows
from .backends import Backend, Generated, backend
from .errors import ConfigurationError
from .ir import names
from .ir import nodes as ir
from .ir.indices import indices
from .ir.infer import infer_types
from .ir.printer import format_kernel
from .ir.types import Type
from .ir.verify import verify
from .transforms.aliasing import merge_aliases
from .transforms.boundscheck import Access, bounds_checked, index_skeleton
from .transforms.coefficients import by_coefficients
from .transforms.dce import eliminate_dead
from .transforms.fold import fold_reverse, without_folded
from .transforms.forward import forward_kernel
from .transforms.fuse import fuse_loops
from .transforms.gather import Gather, gather_kernel, gatherable, without_atomics_on
from .transforms.lanes import replicate_lanes, separable_stores, without_primal_stores
from .transforms.pull import pull_kernel, pull_sites, to_scratch
from .transforms.reverse import ReverseKernels, reverse_kernels
from .transforms.simplify import without_stores_to
from .transforms.split import split_interior, with_interior_of
from .transforms.unroll import unroll_offset_loops
from .transforms.versions import version_locals

# GRADKERN_GATHER_FOLD=0 keeps the reverse launch beside a gather (docs/adjoint-forms.md, section 6): for
# measuring the fold against the plan before it, and as a way back
FOLD = os.environ.get("GRADKERN_GATHER_FOLD", "1") != "0"
# GRADKERN_PULL=0 leaves atomics where a pull would take them (docs/adjoint-forms.md, section 8): for measuring
PULL = os.environ.get("GRADKERN_PULL", "1") != "0"
# GRADKERN_FUSE_LOOPS=0 keeps a reverse loop apart from its forward twin (docs/adjoint-forms.md, section 10): for
# measuring the fusion
FUSE_LOOPS = os.environ.get("GRADKERN_FUSE_LOOPS", "1") != "0"
# the role of a looped gather's unrolled twin in Work.kernels (transforms/gather.py, Gather.unrolled);
# GRADKERN_GATHER_TWIN=0 leaves a looped gather without its interior (docs/adjoint-forms.md, section 7): for measuring
UNROLLED = "gather_unrolled"
TWIN = os.environ.get("GRADKERN_GATHER_TWIN", "1") != "0"
# GRADKERN_COEFFICIENTS=0 keeps a gather's interior as replayed (docs/adjoint-forms.md, section 11): for measuring
COEFFICIENTS = os.environ.get("GRADKERN_COEFFICIENTS", "1") != "0"


@dataclass(frozen=True)
class Request:
    """What to build: one kernel for one signature, mode and activity pattern."""

    kernel: ir.Kernel  # untyped, from the frontend
    types: dict[str, Type]
    launch_ndim: int
    backend: str
    aliases: tuple[tuple[str, str], ...] = ()  # (parameter, the earlier one it is exactly)
    strided: frozenset[str] = frozenset()  # array parameters passed with strides (where the backend cares)
    active_arrays: frozenset[str] = frozenset()
    active_scalars: frozenset[str] = frozenset()
    strided_shadows: frozenset[tuple[str, int]] = frozenset()  # (primal, lane) of non-contiguous shadows
    no_need: frozenset[str] = frozenset()  # DuplicatedNoNeed arrays
    lanes: int = 1  # k of vector mode
    primal_stores: bool = True  # forward: False leaves the primal's stores to another launch (lane groups)
    # GRADKERN_BOUNDSCHECK=1 when the specialisation was made: every access checked (transforms/boundscheck.py)
    boundscheck: bool = field(default_factory=lambda: os.environ.get("GRADKERN_BOUNDSCHECK", "") not in ("", "0"))


@dataclass
class Work:
    """The pipeline's state: the kernels made so far by role, and the facts found."""

    request: Request
    kernels: dict[str, ir.Kernel] = field(default_factory=dict)
    race_check: RaceCheck | None = None
    bounds: BoundsProof | None = None
    activity: Activity | None = None
    reverse: ReverseKernels | None = None
    tangents: dict[str, str] = field(default_factory=dict)  # primal parameter -> its tangent parameter
    adjoint_forms: dict[str, str] = field(default_factory=dict)
    gather: Gather | None = None
    notes: str = ""  # a stage's facts as text, for the dump


@dataclass(frozen=True)
class Stage:
    name: str
    purpose: str
    run: Callable[[Work], None]
    typed: bool = True  # whether its output is typed IR, which the verifier checks


# ---- primal stages -----------------------------------------------------------------------------------------------

def _merge_aliases(w: Work) -> None:
    w.kernels["primal"] = merge_aliases(w.request.kernel, dict(w.request.aliases))


def _infer_types(w: Work) -> None:
    w.kernels["primal"] = infer_types(w.kernels["primal"], w.request.types)


def _race_check(w: Work) -> None:
    typed = w.kernels["primal"]
    proofs = array_proofs(typed)
    widths = param_bits(typed)
    proof = race_proof(typed, proofs)
    if proof is not None and proof.holds_always(widths):
        w.notes = "race-free: proved statically"
        return
    if proof is not None:  # launches where its index arithmetic may wrap are checked at run time
        w.notes = f"race-free where {len(proof.checks)} index operations do not wrap (checked at each launch)"
    rc = race_check_kernel(typed, w.request.launch_ndim, proofs, widths)
    w.notes += f"; the run-time check tracks {', '.join(rc.tracked) or 'nothing'}"
    w.race_check = rc
    w.kernels["race_check"] = rc.kernel
    if rc.parallel is not None and "parallel" in backend(w.request.backend).race_check_forms:
        w.kernels["race_note"], w.kernels["race_look"] = rc.parallel


def _bounds(w: Work) -> None:
    if w.request.boundscheck:
        w.notes = "every access checked by the generated code (GRADKERN_BOUNDSCHECK=1)"
        return
    w.bounds = proof = bounds_proof(w.kernels["primal"])
    positions = sum(p is not None for s in proof.sites for p in s.positions)
    w.notes = (f"{positions} affine index positions in {len(proof.sites)} accesses, their bounds decided at each "
               f"launch; {proof.unaffine} not affine (checked only with GRADKERN_BOUNDSCHECK=1)")


PRIMAL_STAGES = (
    Stage("merge_aliases", "exactly aliased array parameters become one (docs/launches.md)", _merge_aliases,
          typed=False),
    Stage("infer_types", "types from the launch signature; every cast explicit", _infer_types),
    Stage("race_check", "the exact run-time race check, unless the access analysis proves the launch race-free",
          _race_check),
    Stage("bounds", "the affine accesses whose bounds each launch proves (docs/launches.md)", _bounds),
)


# ---- derivative stages -------------------------------------------------------------------------------------------

def _unroll(w: Work) -> None:
    unrolled = unroll_offset_loops(w.kernels["primal"])
    if unrolled is not w.kernels["primal"]:
        w.kernels["unrolled"] = unrolled


def _versions(w: Work) -> None:
    w.kernels["versioned"] = version_locals(w.kernels.get("unrolled", w.kernels["primal"]))


def _derivative_input(w: Work) -> ir.Kernel:
    """The kernel the derivative stages transform: the primal, with versioned locals in reverse mode."""
    return w.kernels.get("versioned", w.kernels["primal"])


def _activity(w: Work) -> None:
    r = w.request
    w.activity = analyze_activity(_derivative_input(w), set(r.active_arrays), set(r.active_scalars))
    w.notes = str(w.activity)


def _reverse(w: Work) -> None:
    rk = reverse_kernels(_derivative_input(w), w.activity, w.request.launch_ndim)
    w.reverse = rk
    w.adjoint_forms = dict(rk.adjoint_forms)
    w.kernels.update(fused=rk.fused, augmented_primal=rk.augmented_primal, reverse=rk.reverse)
    if rk.count is not None:
        w.kernels["count"] = rk.count


def _gather(w: Work) -> None:
    rk = w.reverse
    source = w.kernels["reverse"]
    plan = gatherable(source, set(rk.shadows.values()))
    if not plan:
        _pull(w)
        return
    taped, sums = rk.static_slots != (0, 0), frozenset(rk.sums.values())
    w.gather = gather_kernel(source, plan, taped=taped, sums=sums)
    w.notes = f"gathered {', '.join(w.gather.arrays)}: offsets {list(w.gather.offsets)}, reach {w.gather.reach}"
    for role in ("fused", "reverse"):
        w.kernels[role] = without_atomics_on(w.kernels[role], set(plan))
    w.adjoint_forms.update({primal: "gather" for primal, sh in rk.shadows.items() if sh in plan})
    r = w.request
    accumulators = frozenset(rk.accumulators.values())
    # the reverse's remaining work folded into the gather where its backend runs chunks of rows in order
    # (docs/adjoint-forms.md, section 6); bounds-checked code keeps the reverse launch
    folded = fold_reverse(source, w.kernels["reverse"], plan, taped, sums, accumulators) \
        if backend(r.backend).row_lagged and not r.boundscheck and FOLD else None
    if folded is not None:
        w.gather = folded
        w.kernels["fused"] = without_folded(w.kernels["fused"], folded, accumulators)
        w.notes += (f"; the reverse folded in: clears {', '.join(folded.folded) or 'nothing'}, updates "
                    f"{', '.join(folded.stores_kept) or 'nothing'} in its own copy, sums its Active scalars")
    w.kernels["gather"] = w.gather.kernel
    if w.gather.unrolled is not None and TWIN:  # its interior printed on the CPU (docs/adjoint-forms.md, section 7)
        w.kernels[UNROLLED] = w.gather.unrolled


def _pull(w: Work) -> None:
    """Where no replay gather takes a shadow's atomic adds, a pull may (transforms/pull.py): one lane (each
    lane's scratch would need slots of its own) and a tape of a size known at compile time (the scratch slots
    follow it)."""
    rk = w.reverse
    if w.request.lanes != 1 or rk.static_slots is None or not PULL:
        return
    sites = pull_sites(w.kernels["reverse"], set(rk.shadows.values()))
    if not sites:
        return
    first = rk.static_slots[0]
    phase1 = {role: to_scratch(w.kernels[role], sites, first, rk.tape_float) for role in ("fused", "reverse")}
    if any(k is None for k in phase1.values()):
        return
    w.gather = pull_kernel(w.kernels["reverse"], sites, first, rk.tape_float)
    w.reverse = replace(rk, static_slots=(first + len(sites), rk.static_slots[1]))
    w.kernels.update(phase1, gather=w.gather.kernel)
    w.adjoint_forms.update({primal: "pull" for primal, sh in rk.shadows.items() if sh in w.gather.arrays})
    w.notes = (f"pulled {', '.join(w.gather.arrays)}: {len(sites)} sites in tape slots {first} on, offsets "
               f"{list(w.gather.offsets)}, reach {w.gather.reach}")


def _no_need(w: Work) -> None:
    read = {e.array for e in ir.all_exprs(w.kernels["primal"].body) if isinstance(e, ir.Load)}
    unread = set(w.request.no_need) - read
    if unread:
        w.kernels["fused"] = without_stores_to(w.kernels["fused"], unread)


def _lanes_reverse(w: Work) -> None:
    if w.request.lanes == 1:
        return
    seeds = set(w.reverse.shadows.values()) | set(w.reverse.accumulators.values())
    for role in ("fused", "reverse", "gather", UNROLLED):
        if role in w.kernels:
            w.kernels[role] = replicate_lanes(w.kernels[role], seeds, w.request.lanes)


def _fuse(w: Work) -> None:
    if not FUSE_LOOPS:
        return
    fused, loops = fuse_loops(w.kernels["fused"])
    if loops:
        w.kernels["fused"] = fused
        w.notes = f"fused the reverse loops over {', '.join(loops)} into their forward twins"


def _tangent(w: Work) -> None:
    fk = forward_kernel(w.kernels["primal"], w.activity)
    w.kernels["tangent"] = fk.kernel
    w.tangents = dict(fk.tangents)


def _lanes_forward(w: Work) -> None:
    if w.request.lanes > 1:
        w.kernels["tangent"] = replicate_lanes(w.kernels["tangent"], set(w.tangents.values()), w.request.lanes)


def _primal_stores(w: Work) -> None:
    if not w.request.primal_stores:
        w.kernels["tangent"] = without_primal_stores(w.kernels["tangent"], w.kernels["primal"])


_ACTIVITY = Stage("activity", "which values carry derivatives, from the annotations", _activity)
REVERSE_STAGES = PRIMAL_STAGES + (
    # the loop's accesses become constant offsets of the thread index: thread-own or gathered, not atomic
    Stage("unroll", "short constant loops whose variable indexes arrays, unrolled (docs/adjoint-forms.md)",
          _unroll),
    # a straight-line reassignment then defines a new value instead of destroying one: no tape for it
    Stage("versions", "every top-level redefinition of a local gets a name of its own", _versions),
    _ACTIVITY,
    Stage("reverse", "augmented primal, reverse, their fusion, and the tape-count skeleton", _reverse),
    Stage("gather", "affine-stencil adjoints gathered by their owners instead of scattered by atomics", _gather),
    Stage("no_need", "the fused kernel drops stores to DuplicatedNoNeed arrays it never reads", _no_need),
    Stage("lanes", "vector mode: the adjoint work once per lane, the primal work shared", _lanes_reverse),
    Stage("fuse", "a reverse loop fused into its forward twin where no result can change (docs/adjoint-forms.md)",
          _fuse),
)
FORWARD_STAGES = PRIMAL_STAGES + (
    _ACTIVITY,
    Stage("tangent", "the tangent kernel (forward mode)", _tangent),
    Stage("lanes", "vector mode: the tangent work once per lane, the primal work shared", _lanes_forward),
    Stage("primal_stores", "a group of lanes run apart from the primal drops its stores", _primal_stores),
)


def run_stages(stages: tuple[Stage, ...], request: Request) -> Work:
    """Run `stages` in order; verify and dump what each one made."""
    w = Work(request)
    tag = _signature_tag(request)
    for n, stage in enumerate(stages):
        before = dict(w.kernels)
        w.notes = ""
        stage.run(w)
        for role, k in w.kernels.items():
            if before.get(role) is not k:
                if stage.typed:
                    verify(k, f"{stage.name} ({role})")
                _dump(request.kernel.name, tag, f"{n:02d}-{stage.name}.{role}", format_kernel(k))
        if w.notes:
            _dump(request.kernel.name, tag, f"{n:02d}-{stage.name}", w.notes + "\n")
    return w


# ---- the generate stage: a backend prints each kernel ------------------------------------------------------------

@dataclass(frozen=True)
class Specialization:
    """A typed kernel with its access facts and its backend's generated code."""

    typed: ir.Kernel
    facts: LaunchFacts
    backend: str
    launch_ndim: int
    code: Generated = Generated()
    parallel: bool = True
    # the exact run-time race check, when the access analysis cannot prove the launch race-free
    race_check: RaceCheck | None = None
    race_check_source: Specialization | None = None
    # the race check as two parallel launches (note, look), where the backend runs that form
    race_parallel: tuple[Specialization, Specialization] | None = None
    # with bounds checks: the access sites; the code takes the out-of-bounds flag after `typed`'s parameters
    bounds_sites: tuple[Access, ...] = ()
    # without them: the affine accesses each launch proves in bounds, and the bounds-checked
    # variant of this kernel (built on first call) that decides the launches the proof does not
    bounds: BoundsProof | None = None
    bounds_checked: Callable[[], Specialization] | None = field(default=None, compare=False, repr=False)

    @property
    def source(self) -> str | None:
        return self.code.source

    @property
    def entry(self) -> str | None:
        return self.code.entry


def _generate(request: Request, k: ir.Kernel, role: str, parallel: bool = True,
              strided: frozenset[str] = frozenset(), shadows: frozenset[str] = frozenset(),
              unrolled: ir.Kernel | None = None) -> Specialization:
    """Access facts and backend source for one typed kernel. Every launch runs
    in parallel (race freedom proved, or checked exactly first); only the race
    check itself runs serially. `unrolled`: a looped gather's unrolled twin, whose interior it takes."""
    be: Backend = backend(request.backend)
    facts = launch_facts(k)
    printed = verify(eliminate_dead(version_locals(k)), "versioned locals, dead assignments removed")
    sites: tuple[Access, ...] = ()
    if request.boundscheck:
        printed, sites = bounds_checked(printed)
        printed = verify(printed, "bounds checks")
        if role == "bounds_check":  # the runtime's exact check, not a launch: the checks alone
            printed = verify(index_skeleton(printed), "bounds checks alone")
    printed = replace(printed, thread_indices=frozenset(indices(printed).tid_copies))
    tag = _signature_tag(request)
    if parallel and be.splits_interior:
        split = split_interior(printed)
        if unrolled is not None and not request.boundscheck:
            twin = verify(eliminate_dead(version_locals(unrolled)), "the unrolled twin")
            twin = split_interior(replace(twin, thread_indices=frozenset(indices(twin).tid_copies)))
            taken = with_interior_of(printed, twin)
            split = verify(taken, "the unrolled twin's interior") if taken.interior is not None else split
        if split.interior is not None and be.keeps_interior(split):
            printed = verify(split, "interior splitting")
            if role == "gather" and COEFFICIENTS:  # each shared partial once (docs/adjoint-forms.md, section 11)
                printed = verify(by_coefficients(printed, set(shadows)), "the interior by its coefficients")
            _dump(request.kernel.name, tag, f"generate.{role}.interior", format_kernel(printed))
    if parallel and be.private_rows:  # which atomic adds land in rows relative to the thread's own
        printed = verify(mark_rows(printed), "atomic add rows marked")
    origin = request.kernel
    loc = f"{Path(origin.loc.file).name}:{origin.loc.line}" if origin.loc else "?"
    header = f"Generated by gradkern {__version__} from kernel '{origin.name}' ({loc}). Do not edit."
    strided = frozenset(p.name for p in k.params if p.name in strided)
    code = be.generate(printed, request.launch_ndim, parallel=parallel, strided=strided, header=header)
    if code.source is not None:
        _dump(request.kernel.name, tag, f"generate.{role}.{be.name}", code.source)
    return Specialization(k, facts, be.name, request.launch_ndim, code, parallel=parallel, bounds_sites=sites)


def _primal_specialization(w: Work) -> Specialization:
    r = w.request
    spec = _generate(r, w.kernels["primal"], "primal", strided=r.strided)
    if w.bounds is not None:
        typed = w.kernels["primal"]
        checked = functools.cache(lambda: _generate(replace(r, boundscheck=True), typed, "bounds_check",
                                                    strided=r.strided))
        spec = replace(spec, bounds=w.bounds, bounds_checked=checked)
    rc = w.race_check
    if rc is None:
        return spec
    parallel = None
    if "race_note" in w.kernels:
        parallel = tuple(_generate(r, w.kernels[role], role, strided=r.strided) for role in ("race_note", "race_look"))
    return replace(spec, race_check=rc, race_parallel=parallel,
                   race_check_source=_generate(r, rc.kernel, "race_check", parallel=False, strided=r.strided))


def specialize(kernel: ir.Kernel, types: dict[str, Type], launch_ndim: int, backend_name: str,
               strided: frozenset[str] = frozenset(), aliases: tuple = ()) -> Specialization:
    """The primal pipeline for one signature: no compilation, no device needed.
    `strided`: array parameters that are not C-contiguous (where the backend cares)."""
    request = Request(kernel, types, launch_ndim, backend_name, tuple(aliases), frozenset(strided))
    return _primal_specialization(run_stages(PRIMAL_STAGES, request))


REVERSE_ROLES = ("fused", "augmented_primal", "reverse", "count", "gather")


@dataclass(frozen=True)
class ReverseSpecialization:
    """The reverse-mode kernels of one signature and activity pattern: fused
    (autodiff), the split pair augmented_primal/reverse (autodiff_thunk and
    programs), the tape-count skeleton and the gather (computes the gathered
    shadows, before fused/reverse), where there are.

    Each role's backend code is printed on first use (`make`): `gk.autodiff`
    runs the fused kernel and a program the split pair, so neither pays for
    printing the other's (docs/compile-time.md)."""

    primal: Specialization
    kernels: ReverseKernels
    roles: frozenset[str]  # the roles of REVERSE_ROLES this specialisation has
    make: Callable[[str], Specialization] = field(compare=False, repr=False)
    gather_reach: tuple[int, ...] = ()  # per axis, how far past the launch extent the gather runs
    gather_wraps: tuple = ()  # per axis, (array, axis) of a periodic index's modulus, which the gather covers
    # the gather also does the reverse's work (transforms/fold.py): no reverse launch after it
    gather_folded: bool = False
    # the gather is a pull (transforms/pull.py): it runs after the reverse or fused kernel, not before
    gather_pulls: bool = False
    adjoint_forms: tuple[tuple[str, str], ...] = ()
    # the primal arrays whose values the split reverse (and gather) read: a program saves these before a
    # later launch overwrites them (docs/programs.md); the others' old values are never needed
    reverse_reads: frozenset[str] = frozenset()
    made: dict = field(default_factory=dict, compare=False, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def role(self, name: str) -> Specialization | None:
        """The specialisation of role `name` (None where this one has none), printed once."""
        if name not in self.roles:
            return None
        spec = self.made.get(name)
        if spec is None:
            with self.lock:
                spec = self.made.get(name)
                if spec is None:
                    spec = self.made[name] = self.make(name)
        return spec

    @property
    def fused(self) -> Specialization:
        return self.role("fused")

    @property
    def augmented_primal(self) -> Specialization:
        return self.role("augmented_primal")

    @property
    def reverse(self) -> Specialization:
        return self.role("reverse")

    @property
    def count(self) -> Specialization | None:
        return self.role("count")

    @property
    def gather(self) -> Specialization | None:
        return self.role("gather")

    def gather_extents(self, dim: tuple[int, ...], shapes: dict[str, tuple[int, ...]] | None = None) \
            -> tuple[int, ...]:
        """The gather's launch domain for a launch over `dim`: every element the stencil reaches
        (none when the launch is empty); `shapes`: the arrays' shapes by parameter name."""
        if 0 in dim:
            return dim
        wraps, shapes = self.gather_wraps or (None,) * len(dim), shapes or {}
        return tuple(max(n + r, shapes[w[0]][w[1]] if w else 0) for n, r, w in zip(dim, self.gather_reach, wraps))


def tangent_param(name: str, lane: int, lanes: int) -> str:
    """The kernel parameter of lane `lane` of a derivative parameter (vector mode renames them)."""
    return names.lane(name, lane) if lanes > 1 else name


def _derivative_strided(r: Request, derivatives: dict[str, str]) -> frozenset[str]:
    return r.strided | {tangent_param(derivatives[n], lane, r.lanes) for n, lane in r.strided_shadows
                        if n in derivatives}


def specialize_reverse(kernel: ir.Kernel, types: dict[str, Type], launch_ndim: int, backend_name: str,
                       active_arrays: set[str], active_scalars: set[str], strided: frozenset[str] = frozenset(),
                       strided_shadows: frozenset[tuple[str, int]] = frozenset(),
                       no_need: frozenset[str] = frozenset(), lanes: int = 1,
                       aliases: tuple = ()) -> ReverseSpecialization:
    """The reverse pipeline: type, analyse activity, transform, verify, print.
    `no_need`: DuplicatedNoNeed arrays, whose stores the fused kernel drops
    when the kernel never reads them (docs/shadows-and-modes.md); `lanes`: k of vector mode."""
    r = Request(kernel, types, launch_ndim, backend_name, tuple(aliases), frozenset(strided),
                frozenset(active_arrays), frozenset(active_scalars), frozenset(strided_shadows),
                frozenset(no_need), lanes)
    w = run_stages(REVERSE_STAGES, r)
    strided_all = _derivative_strided(r, w.reverse.shadows)
    shadows = frozenset(tangent_param(sh, lane, r.lanes) for sh in w.reverse.shadows.values()
                        for lane in range(r.lanes))
    kernels = {role: w.kernels[role] for role in REVERSE_ROLES if role in w.kernels}
    primal_arrays = {p.name for p in w.kernels["primal"].params if p.is_array}
    reads = {e.array for role in ("reverse", "gather") if role in w.kernels
             for e in ir.all_exprs(w.kernels[role].body + _deferred(w.kernels[role]))
             if isinstance(e, ir.Load)} & primal_arrays
    return ReverseSpecialization(_primal_specialization(w), w.reverse, frozenset(kernels),
                                 lambda role: _generate(r, kernels[role], role, strided=strided_all, shadows=shadows,
                                                        unrolled=w.kernels.get(UNROLLED) if role == "gather" else None),
                                 gather_reach=w.gather.reach if w.gather is not None else (),
                                 gather_wraps=w.gather.wraps if w.gather is not None else (),
                                 gather_folded=w.gather is not None and w.gather.reverse_folded,
                                 gather_pulls=w.gather is not None and w.gather.pulls,
                                 adjoint_forms=tuple(sorted(w.adjoint_forms.items())),
                                 reverse_reads=frozenset(reads))


def _deferred(k: ir.Kernel) -> tuple[ir.Stmt, ...]:
    return k.deferred.body if k.deferred is not None else ()


@dataclass(frozen=True)
class ForwardSpecialization:
    """The tangent kernel of one signature and activity pattern."""

    primal: Specialization
    tangent: Specialization
    tangents: dict  # primal parameter -> tangent parameter (lane 0 of vector mode)
    lanes: int = 1
    # the tangent work can run apart from the primal's stores: the kernel reads no array it writes
    separable: bool = False


def specialize_forward(kernel: ir.Kernel, types: dict[str, Type], launch_ndim: int, backend_name: str,
                       active_arrays: set[str], active_scalars: set[str], strided: frozenset[str] = frozenset(),
                       strided_tangents: frozenset[tuple[str, int]] = frozenset(), lanes: int = 1,
                       aliases: tuple = (), primal_stores: bool = True) -> ForwardSpecialization:
    """The forward pipeline: type, analyse activity, transform to forward mode (k lanes), verify, print.
    `primal_stores=False`: the tangent work alone, for a group of lanes run before the primal's own."""
    r = Request(kernel, types, launch_ndim, backend_name, tuple(aliases), frozenset(strided),
                frozenset(active_arrays), frozenset(active_scalars), frozenset(strided_tangents), lanes=lanes,
                primal_stores=primal_stores)
    w = run_stages(FORWARD_STAGES, r)
    spec = _generate(r, w.kernels["tangent"], "tangent", strided=_derivative_strided(r, w.tangents))
    return ForwardSpecialization(_primal_specialization(w), spec, w.tangents, lanes,
                                 separable_stores(w.kernels["primal"]) is not None)


# ---- dumps -------------------------------------------------------------------------------------------------------

def _signature_tag(r: Request) -> str:
    """A short tag naming the specialisation, so dumps of different signatures do not collide."""
    if not os.environ.get("GRADKERN_DUMP"):
        return ""
    key = repr((r.types, r.launch_ndim, r.backend, r.aliases, sorted(r.strided), sorted(r.active_arrays),
                sorted(r.active_scalars), sorted(r.strided_shadows), sorted(r.no_need), r.lanes, r.primal_stores))
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def _dump(kernel_name: str, tag: str, what: str, text: str) -> None:
    root = os.environ.get("GRADKERN_DUMP")
    if root:
        try:
            Path(root).mkdir(parents=True, exist_ok=True)
            (Path(root) / f"{kernel_name}.{tag}.{what}.txt").write_text(text)
        except OSError as e:  # before any launch: nothing was changed (docs/environment.md)
            raise ConfigurationError(f"environment variable GRADKERN_DUMP={root!r} names no folder the stages "
                                     f"can be written to ({e.strerror or e})",
                                     hint="set it to a folder that can be created and written, or unset it") from None
