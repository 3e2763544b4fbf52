"""Run the exact race check of a specialisation before a launch writes anything,
and refuse a racy launch with `gk.RaceError` naming both accesses."""

from __future__ import annotations

import math

import numpy as np

from ..analysis.races import PARALLEL_TRACKS, RACE_LENGTH, TRACKS
from ..backends import backend
from ..errors import LaunchError, RaceError
from ..pipeline import Specialization
from .arrays import array_module, is_array
from .binding import Binding
from .execute import run_spec


def launch_bounds(spec: Specialization, b: Binding) -> tuple[dict, dict]:
    """The integer scalar arguments and the array shapes of a launch, by parameter."""
    scalars, shapes = {}, {}
    for p, v in zip(spec.typed.params, b.kernel_values):
        if is_array(v):
            shapes[p.name] = tuple(v.shape)
        elif p.type.is_int or p.type.is_bool:
            scalars[p.name] = int(v)
    return scalars, shapes


def needs_race_check(spec: Specialization, b: Binding) -> bool:
    """Whether this launch runs the exact run-time check: there is no static
    proof, or the index arithmetic the proof relies on may wrap at it. A launch
    of one thread has no other thread to race with: it needs none (a wave
    code's point-source injection `u[i, j] += amp`, launched over 1)."""
    rc = spec.race_check
    if math.prod(b.dim) <= 1:
        return False
    return rc is not None and (rc.proof is None or not rc.proof.holds(b.dim, *launch_bounds(spec, b)))


def check_exclusive_rows(spec: Specialization, b: Binding, kernel_name: str, arrays) -> None:
    """Refuse a gradient whose shadows of `arrays` are accumulated with plain
    adds because their flattened rows `tid * s + r` are the thread's own, when
    at this launch those rows may wrap around int64 and meet another thread's;
    or because their segments `range(p[t], p[t + 1])` are (analysis/access.py),
    when at this launch p is not non-decreasing, so that segments may overlap."""
    facts = spec.facts
    for name, exact in facts.row_exactness:
        if name in arrays and not exact.holds(b.dim, *launch_bounds(spec, b)):
            raise LaunchError(
                f"kernel '{kernel_name}': at this launch the flattened index of '{name}' (tid * stride + r) may "
                f"overflow int64, so its rows may not be the threads' own and the plain accumulation into its "
                f"shadow would race; no buffer was changed", hint="launch fewer threads or use smaller strides")
    names = [p.name for p in spec.typed.params]
    for name, pointer, axis in facts.segments:
        if name in arrays:
            _check_non_decreasing(array_module(b.backend), b.kernel_values[names.index(pointer)], b.dim[axis],
                                  kernel_name, name, pointer)


def _check_non_decreasing(xp, p, threads: int, kernel_name: str, name: str, pointer: str) -> None:
    """p[0] <= p[1] <= ... <= p[threads] (as far as p reaches: a shorter p is the bounds check's to refuse)."""
    n = min(threads, p.shape[0] - 1)
    if n < 1:
        return
    drops = xp.flatnonzero(p[1:n + 1] < p[:n])
    if drops.size:  # on the GPU: this launch's one read-back
        t = int(drops[0])
        raise LaunchError(
            f"kernel '{kernel_name}': '{pointer}' decreases at this launch ({pointer}[{t}] > {pointer}[{t + 1}]), so "
            f"the ranges {pointer}[t] .. {pointer}[t + 1] of different threads may overlap and the plain "
            f"accumulation into the shadow of '{name}' would race; no buffer was changed",
            hint=f"'{pointer}' must be non-decreasing, as a CSR row pointer is")


def check_races(spec: Specialization, b: Binding, kernel_name: str) -> None:
    """Raise RaceError if, at these arguments, a thread touches an element that
    another thread writes. Reads the arguments only (or scratch copies)."""
    rc = spec.race_check
    if 0 in b.dim or not needs_race_check(spec, b):
        return
    names = [p.name for p in spec.typed.params]
    values = list(b.kernel_values)
    key = None
    if rc.data_independent:  # the verdict is a function of shapes and scalars: check each combination once
        key = (b.dim, tuple(v.shape if is_array(v) else v.item() for v in values))
        if key in rc.race_free:
            return
    xp = array_module(b.backend)
    if spec.race_parallel is not None and backend(b.backend).race_check_forms[0] == "parallel":
        race = _parallel_check(spec, b, values, xp)
        if race is None:
            if key is not None:
                rc.race_free.add(key)
            return
        _refuse(kernel_name, rc, b, *race)
    for name in rc.copies:
        values[names.index(name)] = values[names.index(name)].copy()
    for name in rc.tracked:
        shape = values[names.index(name)].shape
        values += [xp.full(shape, -1, np.int64) for _ in TRACKS]
    race = xp.zeros(RACE_LENGTH, np.int64)
    values.append(race)
    values += list(b.dim[1:])
    run_spec(spec.race_check_source, b.dim, values)
    race = race.tolist()  # on the GPU: the launch's one status read-back
    if not race[0]:
        if key is not None:
            rc.race_free.add(key)
        return
    _refuse(kernel_name, rc, b, *(int(v) for v in race[1:]))


def _parallel_check(spec: Specialization, b: Binding, values: list, xp) -> tuple[int, int, int, int] | None:
    """The two-launch device check: note every access's stamp, then let each access
    look for another thread's stamp it must not share. Returns (site, other site,
    thread, other thread) of one race, or None; reads back one number when race-free."""
    rc = spec.race_check
    names = [p.name for p in spec.typed.params]
    tracks = []
    for name in rc.tracked:
        shape = values[names.index(name)].shape
        tracks += [xp.full(shape, -1, np.int64) for _ in PARALLEL_TRACKS]
    extents = list(b.dim[1:])
    note, check = spec.race_parallel
    run_spec(note, b.dim, [*values, *tracks, *extents])
    total = 1
    for n in b.dim:
        total *= n
    site, other = xp.full(total, -1, np.int64), xp.full(total, -1, np.int64)
    run_spec(check, b.dim, [*values, *tracks, site, other, *extents])
    if int(site.max()) < 0:
        return None
    thread = int(site.argmax())
    stamp = int(other[thread])
    nsites = max(len(rc.sites), 1)
    return int(site[thread]), stamp % nsites, thread, stamp // nsites


def _refuse(kernel_name: str, rc, b: Binding, site: int, other_site: int, thread: int, other_thread: int):
    a, o = rc.sites[site], rc.sites[other_site]
    t1 = tuple(int(x) for x in np.unravel_index(thread, b.dim))
    t2 = tuple(int(x) for x in np.unravel_index(other_thread, b.dim))
    raise RaceError(
        f"kernel '{kernel_name}' races: thread {t1} {_verb(a.kind)} {a.text} ({a.loc}) and thread {t2} "
        f"{_verb(o.kind)} {o.text} ({o.loc}), the same element{_aliased(b, a.text, o.text)}; no buffer was changed",
        hint="write the result to a separate array (double buffering), or accumulate with gk.atomic_add; where the "
             "code ported synchronises its threads between the two accesses (__syncthreads(), grid.sync()), end the "
             "launch there and launch the rest (docs/launches.md#races)")


def _aliased(b: Binding, *texts: str) -> str:
    """Where a site's array stands for parameters passed the same array, which ones: the sites print the merged
    kernel, so the source's `d_in[i]` reads `d_out[i]` when d_out and d_in were one array (docs/launches.md)."""
    groups = {}
    for merged, kept in b.aliases:
        groups.setdefault(kept, []).append(merged)
    return "".join(f" ({' and '.join(repr(m) for m in merged)} passed the same array as '{kept}', named '{kept}' here)"
                   for kept, merged in groups.items() if any(t.startswith(kept + "[") for t in texts))


def _verb(kind: str) -> str:
    return {"read": "reads", "write": "writes", "atomic_add": "atomically adds to"}[kind]
