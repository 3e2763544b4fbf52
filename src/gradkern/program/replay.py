"""A recorded launch replayed (docs/programs.md#host-cost-per-step): what a program's recorder works out
from a launch's arguments beyond what the runtime's prepared call checks (which arguments have shadows,
which views the launch writes and its reverse reads, which it overwrites whole, which the augmented primal
can save as it runs), kept per kernel, launch shape and argument objects, so that a time loop's next launch
of the same kernel on the same arrays finds it instead of working it out again.

Nothing a later launch could change is skipped. The entry is found by the arguments' identities and is used
only where every array argument is still the same object (a weak reference, so a temporary is freed) with
the same shape, strides and dtype (a NumPy array's memory cannot move: its `data` cannot be assigned, and
`resize` refuses an array something else references), no shadow was registered or removed since
(`ShadowMap.version`: what `find` answers changes only then; where every array argument had shadows, no
removal: a registration changes no answer `find` gave), and the runtime prepared the same call with
the same objects as its values (`LaunchFacts.same`). A launch on other host copies in the same roles (a new
`u.copy()` every step) takes the facts of the last such launch rebound to its temporaries and their shadows
(`role_key`, `LaunchFacts.rebind`: docs/programs.md#temporaries-replayed-session-47).
The runtime validates every launch: in full (`prepare`), or, where the facts vouch for the arguments'
signature (`LaunchFacts.signed`: every flag, shadow geometry and scalar type `signature` reads as it was), by
refilling the facts' prepared call and ensuring its checks (`call.again`;
docs/programs.md#session-45-a-replayed-launch-without-its-signature-cheaper-flags). The program's checks whose
answer can change between launches run at every launch: the host-write guard, the host-code origin of each
argument, which buffers a recorded reverse still reads (versions.py).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import numpy as np

from ..annotations import Active, BatchDuplicated, Const, Duplicated
from ..errors import ProgramError
from ..runtime.arrays import is_array
from ..runtime.binding import memory_owner, numpy_made
from ..runtime.call import made
from ..runtime.callkey import backend_name
from .savepool import Memory
from .scalars import ActiveScalar
from .shadows import mapped, memory_root

_SCALARS = frozenset({float, int, bool, ActiveScalar})  # never arrays: the key asks no more of them
MAX_REPLAYS = 64  # kept per recording; a program launching on fresh arrays every step starts over


def replay_key(kernel: Any, backend: str | None, args: tuple) -> tuple:
    """The arguments' identities (arrays) and kinds (scalars): an entry is looked up by it, then checked."""
    key = [id(kernel), backend]
    for a in args:
        t = type(a)
        key.append(id(a) if t is np.ndarray or (t not in _SCALARS and is_array(a)) else t)
    return tuple(key)


class LaunchFacts:
    """One launch's bookkeeping facts, by position: `written` and `reads` index the binding's values (the
    views the launch may write, those its reverse reads), `whole` those overwritten whole (record.overwritten_whole),
    `filled` the (name, position) pairs the augmented primal can save as it runs, () where it cannot, `moved` the
    (destination, source) positions where the launch's reverse is a pure move (record.moved_positions), else None."""

    __slots__ = ("kernel", "dim", "refs", "geometry", "kinds", "active", "call", "pairs", "written", "reads",
                 "whole", "filled", "version", "flags", "shadows", "shaped", "scalars", "known", "arrays_at",
                 "_mapped", "removed", "rebound", "covered", "slots", "moved", "_scalars", "names")

    def __init__(self, kernel: Any, dim: Any, args: tuple, annotated: list, active: bool, call: Any,
                 values: Any, written: tuple, reads: tuple, whole: tuple, filled: tuple, version: int,
                 arrays_at: tuple | None = None, removed: int = 0, temporaries: Any = None, fresh: tuple = (),
                 moved: tuple | None = None):
        """`arrays_at`: contents.array_positions of the prepared call's kernel values (a step's sweep reads them);
        `removed`: the shadow map's count of removals; `temporaries`: the shadow map where the facts may be rebound
        to other temporaries (`slots`), `fresh` the entries this launch registered; `moved`: a pure move's
        (destination, source) value positions (record.moved_positions)."""
        self.arrays_at, self.moved = arrays_at, moved
        self.kernel, self.dim, self.active, self.call, self.version = kernel, dim, active, call, version
        self.written, self.reads, self.whole, self.filled = written, reads, whole, filled
        arrays = [(n, a) for n, a in enumerate(args) if is_array(a)]
        self.refs = tuple((n, weakref.ref(a)) for n, a in arrays)
        self.geometry = tuple((a.shape, a.strides, a.dtype) for _, a in arrays)
        # per argument: 0 an Active scalar, 1 an array with shadows (their tuple), 2 Const
        kinds: list = []
        for a, ann in zip(args, annotated):
            if isinstance(a, ActiveScalar):
                kinds.append((0, None))
            elif isinstance(ann, (Duplicated, BatchDuplicated)):
                kinds.append((1, ann.dval if isinstance(ann, Duplicated) else tuple(ann.dvals)))
            else:
                kinds.append((2, None))
        self.kinds = tuple(kinds)
        self.removed, self.rebound, self._scalars = removed, False, None
        self.names: tuple | None = None  # the names of a step's `cleared` and `moved` (record.py), once known
        self._objects(args)
        self.scalars = tuple((n, type(a.value if isinstance(a, ActiveScalar) else a)) for n, a in enumerate(args)
                             if not is_array(a))
        # (binding value position, index into `refs`) of every array value: the runtime bound those objects
        self.pairs = tuple((k, j) for k, v in enumerate(values) if is_array(v)
                           for j, (_, a) in enumerate(arrays) if a is v)
        # every array argument had shadows: a registration since changes none of them (`matches`)
        self.covered = active and all(self.kinds[n][0] == 1 for n, _ in arrays)
        self.slots = _slots(args, self.kinds, values, temporaries, fresh) if temporaries is not None else None

    def _objects(self, args: tuple) -> None:
        """What the facts read of the objects `refs` and `kinds` name: see __init__'s comments."""
        # what the call's signature (runtime/call.py) reads beyond the objects and their geometry, as it was: each
        # array's flags (the arguments', then their shadows'), the shadows' geometry, the plain scalars' types
        self.shadows = tuple(dx for kind, d in self.kinds if kind == 1 for dx in (d if type(d) is tuple else (d,)))
        self.shaped = tuple((dx.shape, dx.strides, dx.dtype) for dx in self.shadows)
        self.flags = tuple(_flag_word(args[n]) for n, _ in self.refs) + tuple(_flag_word(dx) for dx in self.shadows)
        # what runtime/call.py's refill collects from the annotations `annotations` makes: the Active positions and
        # the shadows by parameter (call.refill_known)
        call = self.call
        lanes = [(d,) if type(d) is not tuple else d for kind, d in self.kinds if kind == 1]
        self.known = (tuple(n for n, (kind, _) in enumerate(self.kinds) if kind == 0),
                      dict(zip(call.names, lanes)) if call is not None and lanes else {})
        self._mapped: tuple | None = None  # (derivatives, shadows.mapped of them)

    def matches(self, kernel: Any, dim: Any, args: tuple, version: int, removed: int = -1,
                rebinding: bool = False) -> bool:
        """Whether `args` are this entry's objects, as they were (see the module's docstring), at the shadow map's
        `version` and count of removals (`removed`: where the facts are `covered`, registrations since do not
        matter); `rebinding`: but for its temporaries' (`slots`), whose geometry alone is compared here (`rebind`
        checks the rest)."""
        if self.kernel is not kernel or type(dim) is not type(self.dim) or dim != self.dim:
            return False
        if self.version != version and not (self.covered and self.removed == removed):
            return False
        slotted = self.slots[0] if rebinding else ()
        for (n, ref), (shape, strides, dtype) in zip(self.refs, self.geometry):
            a = args[n]
            if (ref() is not a and n not in slotted) or a.shape != shape or a.strides != strides or \
                    (a.dtype is not dtype and a.dtype != dtype):
                return False
        return True

    def rebind(self, args: tuple, shadows: Any, mapped: bool) -> bool:
        """These facts, of a launch on other temporaries of the same roles (`slots`), made the facts of `args`:
        each temporary the whole array placed in a save-pool mapping, laid out as recorded; one the launch
        shadowed first has no shadow yet and gets one as `_annotations` gives it (`mapped`), any other has the
        one internal shadow registered in its mapping, laid out and mapped as recorded; the temporaries' and
        their shadows' allocations are none of the other values' and differ from each other (so that, with
        the other values the same objects, the launch's arrays are disjoint as the facts' call's signature
        says) (docs/programs.md#temporaries-replayed-session-47). `matches(rebinding=True)` found the rest
        the same. False where one is not so (the launch is then worked out in full; a shadow made here stays
        registered, as `_annotations` would have made it)."""
        positions, made, laid, js, owners = self.slots
        seen, roots, found = [], [], []
        for n, fresh, (was_mapped, shape, strides, dtype) in zip(positions, made, laid):
            a = args[n]
            if type(a) is not np.ndarray:
                return False
            root = a.base
            if type(root) is Memory:
                root = a
            elif type(root) is not np.ndarray or type(root.base) is not Memory or root.shape != a.shape or \
                    root.strides != a.strides or root.dtype != a.dtype:
                return False
            memory = root.base
            if id(memory) in owners or id(memory) in seen:
                return False
            seen.append(id(memory))
            roots.append(root)
            if fresh:
                if shadows.in_memory.get(id(memory)):
                    return False
                found.append(None)
                continue
            inside = shadows.in_memory.get(id(memory))
            if not inside or len(inside) != 1:
                return False
            e = inside[0]
            if not e.internal or e.released or e.primal is not root or len(e.shadow) != 1:
                return False
            dx = e.shadow[0]
            if not _laid(dx, was_mapped, shape, strides, dtype, owners, seen):
                return False
            found.append(dx)
        for k, n in enumerate(positions):
            if made[k]:
                dx = shadows.internal(args[n], mapped)[0]
                if not _laid(dx, *laid[k], owners, seen):
                    return False
                found[k] = dx
        kinds, refs, new = list(self.kinds), list(self.refs), {}
        for n, j, root, dx in zip(positions, js, roots, found):
            kinds[n] = (1, dx)
            refs[j] = (n, weakref.ref(args[n]))
            new[n] = id(root)
        self.kinds, self.refs = tuple(kinds), tuple(refs)
        self.shadows = tuple(dx for kind, d in kinds if kind == 1 for dx in (d if type(d) is tuple else (d,)))
        lanes = [(d,) if type(d) is not tuple else d for kind, d in kinds if kind == 1]
        self.known = (self.known[0], dict(zip(self.call.names, lanes)))  # a new dict: a step's Bound holds the old
        self._mapped = None
        if self.arrays_at is not None:  # the kernel values are the arguments (a signed call's: no aliases)
            self.arrays_at = tuple((k, new.get(k, i)) for k, i in self.arrays_at)
        self.version, self.removed, self.rebound = shadows.version, shadows.removed, True
        return True

    def settle(self, args: tuple) -> None:
        """The runtime prepared the facts' call for `args`, to which `rebind` bound them (`same`): their flags,
        as the launch takes them (unlocked), are what a later `signed` launch on them compares."""
        self.flags = tuple(_flag_word(args[n]) for n, _ in self.refs) + tuple(_flag_word(dx) for dx in self.shadows)
        self.rebound = False

    def same(self, call: Any, values: Any) -> bool:
        """Whether the runtime prepared this entry's call and bound the arguments themselves as its values."""
        if call is not self.call:
            return False
        refs = self.refs
        return all(values[k] is refs[j][1]() for k, j in self.pairs)

    def signed(self, args: tuple, dim: Any, backend: str | None) -> Any:
        """The prepared call whose signature `args` have, `matches` having found them this entry's objects with
        their geometry: the call `prepare` kept for these objects' signature (`call.key`), where every flag,
        shadow geometry and scalar type the signature reads is as it was; None otherwise (prepare them)."""
        call = self.call
        if call is None or call.key is None or call.key[3] != backend_name(backend) or \
                (type(dim) is tuple and not all(type(n) is int for n in dim)):
            return None
        flags = self.flags
        k = 0
        for n, _ in self.refs:
            if _flag_word(args[n]) != flags[k]:
                return None
            k += 1
        for dx, (shape, strides, dtype) in zip(self.shadows, self.shaped):
            if _flag_word(dx) != flags[k] or dx.shape != shape or dx.strides != strides or dx.dtype != dtype:
                return None
            k += 1
        for n, t in self.scalars:
            a = args[n]
            v = a.value if type(a) is ActiveScalar else a
            if type(v) is not t or (t is int and not -2**63 <= v < 2**63):
                return None
        return call

    def mapped(self, derivatives: dict) -> list:
        """shadows.mapped(derivatives), kept for the facts' own shadows by parameter (`known[1]`, which a signed
        replay's call takes as they are): whether a shadow is in a zero mapping of its own is fixed when it is
        made (`_zero_pages`), and the dict holds the same objects."""
        kept = self._mapped
        if kept is not None and kept[0] is derivatives:
            return kept[1]
        found = mapped(derivatives)
        if derivatives is self.known[1]:
            self._mapped = (derivatives, found)
        return found

    def plain(self, args: tuple) -> tuple[dict, tuple]:
        """The Active scalars by position and the plain values, as `annotations` gives them. The dict of the
        Active scalars is the last launch's where they are the same objects (a launch's step only reads it: one
        object fewer per step for the garbage collector,
        docs/programs.md#session-48-fewer-objects-and-passes-per-step)."""
        plain, kept = list(args), self._scalars
        same = kept is not None
        for n in self.known[0]:
            a = args[n]
            if same and kept.get(n) is not a:
                same = False
            plain[n] = a.value
        if same:
            return kept, tuple(plain)
        scalars = {}
        for n in self.known[0]:
            scalars[n] = args[n]
        self._scalars = scalars
        return scalars, tuple(plain)

    def arrays(self, args: tuple) -> list:
        """The array arguments, in order (`matches` found them the entry's)."""
        return [args[n] for n, _ in self.refs]

    def annotations(self, args: tuple) -> tuple[list, dict, tuple, bool]:
        """As ProgramRecorder._annotations: the annotated arguments, the Active scalars by position, the plain
        values, whether the launch is active."""
        annotated, scalars, plain = [], {}, []
        for n, (a, (kind, dx)) in enumerate(zip(args, self.kinds)):
            if kind == 0:
                annotated.append(made(Active, val=a.value))
                scalars[n] = a
                plain.append(a.value)
                continue
            plain.append(a)
            if kind == 1:
                annotated.append(made(Duplicated, val=a, dval=dx) if type(dx) is not tuple else
                                 made(BatchDuplicated, val=a, dvals=dx))
            else:
                annotated.append(Const(a))
        return annotated, scalars, tuple(plain), self.active


def _slots(args: tuple, kinds: tuple, values: Any, shadows: Any, fresh: tuple) -> tuple | None:
    """The temporaries of a launch that a later launch may rebind (`LaunchFacts.rebind`): (their positions, whether
    this launch gave each its shadow, (whether its shadow is mapped, its shape, strides and dtype), their indices
    in the facts' `refs`, the ids of the other values' and their shadows' allocations), or None where some array
    in a save-pool mapping is not such a temporary or none is: each a whole host copy (`_temporary`), bound as
    itself, with one internal shadow registered in its mapping, of one lane, whose buffer no other value of
    the launch shares."""
    positions, made, laid = [], [], []
    roots = [id(memory_root(v)) for v in values if is_array(v)]
    for n, a in enumerate(args):
        if _temporary(a) is None:
            continue
        root = memory_root(a)
        kind, dx = kinds[n]
        inside = shadows.in_memory.get(id(root.base))
        if type(a) is not np.ndarray or kind != 1 or type(dx) is tuple or root.shape != a.shape or \
                root.strides != a.strides or root.dtype != a.dtype or roots.count(id(root)) != 1 or \
                sum(v is a for v in args) != 1 or len(values) != len(args) or values[n] is not a or \
                not inside or len(inside) != 1:
            return None
        e = inside[0]
        if not e.internal or e.primal is not root or len(e.shadow) != 1 or e.shadow[0] is not dx:
            return None
        positions.append(n)
        made.append(any(e is f for f in fresh))
        laid.append((type(dx.base) is Memory, dx.shape, dx.strides, dx.dtype))
    if not positions:
        return None
    others = [a for n, a in enumerate(args) if is_array(a) and n not in positions]
    others += [dx for n, (kind, d) in enumerate(kinds) if kind == 1 and n not in positions
               for dx in (d if type(d) is tuple else (d,))]
    owners = [_owner(x) for x in others]
    if any(o is None for o in owners):
        return None
    js = tuple(next(j for j, m in enumerate(m for m, a in enumerate(args) if is_array(a)) if m == n)
               for n in positions)
    return tuple(positions), tuple(made), tuple(laid), js, frozenset(id(o) for o in owners)


def _flag_word(a: Any) -> Any:
    """An array's flags as one comparable value: NumPy's bit word; CuPy's flags have no `num`, and only
    contiguity of theirs reaches a signature (runtime/call.py)."""
    if isinstance(a, np.ndarray):
        return a.flags.num
    f = a.flags
    return (f.c_contiguous, f.f_contiguous)


def _owner(x: Any) -> Any:
    """The allocation of a NumPy array the runtime keys (binding.numpy_made, memory_owner), or None."""
    return memory_owner(x, x.flags.num) if numpy_made(x) else None


def _laid(dx: Any, was_mapped: bool, shape: tuple, strides: tuple, dtype: Any, owners: frozenset,
          seen: list) -> bool:
    """A rebound temporary's shadow is laid out and mapped as recorded, in an allocation of its own (`seen`:
    the ids of those of the slots so far, which it joins)."""
    o = _owner(dx)
    if o is None or (type(dx.base) is Memory) != was_mapped or dx.shape != shape or dx.strides != strides or \
            dx.dtype != dtype or id(o) in owners or id(o) in seen:
        return False
    seen.append(id(o))
    return True


def _temporary(a: Any) -> Any:
    """The save-pool mapping (savepool.Memory) of a NumPy array in one (a host copy, hostcode.py), or None."""
    if not isinstance(a, np.ndarray):
        return None
    root = memory_root(a)
    memory = getattr(root, "base", None)
    return memory if type(memory) is Memory else None


def role_key(kernel: Any, backend: str | None, args: tuple) -> tuple | None:
    """`replay_key` with every array in a save-pool mapping (a host copy) named by its role, not its identity:
    None where there is none."""
    key, any_temporary = [id(kernel), backend], False
    for a in args:
        t = type(a)
        if t in _SCALARS:
            key.append(t)
            continue
        if t is np.ndarray:  # `_temporary` inline where the base is the root (a view NumPy made of it)
            b = a.base
            if b is None or (type(b) is np.ndarray and b.base is None):
                key.append(id(a))
                continue
            if type(b) is Memory or (type(b) is np.ndarray and type(b.base) is Memory):
                key.append(_TEMPORARY)
                any_temporary = True
                continue
        if _temporary(a) is not None:
            key.append(_TEMPORARY)
            any_temporary = True
        else:
            key.append(id(a) if is_array(a) else t)
    return tuple(key) if any_temporary else None


_TEMPORARY = "a temporary"  # never a type or an id


class Replays:
    """The launch facts of one recording, by `replay_key`, and those that may be rebound to other temporaries by
    `role_key`. `GRADKERN_REPLAY` (docs/environment.md): `objects` only the first, `off` neither."""

    def __init__(self):
        self.entries: dict[tuple, LaunchFacts] = {}
        self.roles: dict[tuple, LaunchFacts] = {}
        mode = os.environ.get("GRADKERN_REPLAY", "on")
        if mode not in ("on", "objects", "off"):
            raise ProgramError(f"GRADKERN_REPLAY must be on, objects or off, got {mode!r}")
        self.on, self.temporaries = mode != "off", mode == "on"

    def find(self, kernel: Any, dim: Any, backend: str | None, args: tuple, shadows: Any,
             mapped: bool = True) -> LaunchFacts | None:
        """The facts of these objects, or of other temporaries of the same roles rebound to them (`mapped`: as a
        temporary's shadow is made, `ShadowMap.internal`); None: work them out."""
        if not self.on:
            return None
        facts = self.entries.get(replay_key(kernel, backend, args))
        if facts is not None and facts.matches(kernel, dim, args, shadows.version, shadows.removed):
            return facts
        if not self.temporaries or not self.roles:
            return None
        key = role_key(kernel, backend, args)
        facts = self.roles.get(key) if key is not None else None
        if facts is None or not facts.matches(kernel, dim, args, shadows.version, shadows.removed, True) or \
                not facts.rebind(args, shadows, mapped):
            return None
        return facts

    def keep(self, facts: LaunchFacts, args: tuple, backend: str | None) -> None:
        if len(self.entries) >= MAX_REPLAYS:
            self.entries.clear()
            self.roles.clear()
        self.entries[replay_key(facts.kernel, backend, args)] = facts
        if facts.slots is not None:
            key = role_key(facts.kernel, backend, args)
            if key is not None:
                self.roles[key] = facts
