"""A recorded launch replayed (docs/programs.md#host-cost-per-step): what a program's recorder works out
from a launch's arguments beyond what the runtime's prepared call checks (which arguments have shadows,
which views the launch writes and its reverse reads, which it overwrites whole, which the augmented primal
can save as it runs), kept per kernel, launch shape and argument objects, so that a time loop's next launch
of the same kernel on the same arrays finds it instead of working it out again.

Nothing a later launch could change is skipped. The entry is found by the arguments' identities and is used
only where every array argument is still the same object (a weak reference, so a temporary is freed) with
the same shape, strides and dtype (a NumPy array's memory cannot move: its `data` cannot be assigned, and
`resize` refuses an array something else references), no shadow was registered or removed since
(`ShadowMap.version`: what `find` answers changes only then), and the runtime prepared the same call with
the same objects as its values (`LaunchFacts.same`). The runtime validates every launch: in full
(`prepare`), or, where the facts vouch for the arguments' signature (`LaunchFacts.signed`: every flag, shadow
geometry and scalar type `signature` reads as it was), by refilling the facts' prepared call and ensuring its
checks (`call.again`; docs/programs.md#session-45-a-replayed-launch-without-its-signature-cheaper-flags). The
program's checks whose answer can change between launches run at every launch: the host-write guard, the
host-code origin of each argument, which buffers a recorded reverse still reads (versions.py).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ..annotations import Active, BatchDuplicated, Const, Duplicated
from ..runtime.arrays import is_array
from ..runtime.call import backend_name, made
from .scalars import ActiveScalar
from .shadows import mapped

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
                 "_mapped", "moved")

    def __init__(self, kernel: Any, dim: Any, args: tuple, annotated: list, active: bool, call: Any,
                 values: Any, written: tuple, reads: tuple, whole: tuple, filled: tuple, version: int,
                 arrays_at: tuple | None = None, moved: tuple | None = None):
        """`arrays_at`: contents.array_positions of the prepared call's kernel values (a step's sweep reads them)."""
        self.arrays_at, self.moved = arrays_at, moved
        self._mapped: tuple | None = None  # (derivatives, shadows.mapped of them)
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
        # what the call's signature (runtime/call.py) reads beyond the objects and their geometry, as it was: each
        # array's flags (the arguments', then their shadows'), the shadows' geometry, the plain scalars' types
        self.shadows = tuple(dx for kind, d in self.kinds if kind == 1 for dx in (d if type(d) is tuple else (d,)))
        self.shaped = tuple((dx.shape, dx.strides, dx.dtype) for dx in self.shadows)
        self.flags = tuple(a.flags.num for _, a in arrays) + tuple(dx.flags.num for dx in self.shadows)
        self.scalars = tuple((n, type(a.value if isinstance(a, ActiveScalar) else a)) for n, a in enumerate(args)
                             if not is_array(a))
        # what runtime/call.py's refill collects from the annotations `annotations` makes: the Active positions and
        # the shadows by parameter (call.refill_known)
        lanes = [(d,) if type(d) is not tuple else d for kind, d in self.kinds if kind == 1]
        self.known = (tuple(n for n, (kind, _) in enumerate(self.kinds) if kind == 0),
                      dict(zip(call.names, lanes)) if call is not None and lanes else {})
        # (binding value position, index into `refs`) of every array value: the runtime bound those objects
        self.pairs = tuple((k, j) for k, v in enumerate(values) if is_array(v)
                           for j, (_, a) in enumerate(arrays) if a is v)

    def matches(self, kernel: Any, dim: Any, args: tuple, version: int) -> bool:
        """Whether `args` are this entry's objects, as they were (see the module's docstring)."""
        if self.kernel is not kernel or self.version != version or type(dim) is not type(self.dim) or \
                dim != self.dim:
            return False
        for (n, ref), (shape, strides, dtype) in zip(self.refs, self.geometry):
            a = args[n]
            if ref() is not a or a.shape != shape or a.strides != strides or \
                    (a.dtype is not dtype and a.dtype != dtype):
                return False
        return True

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
            if args[n].flags.num != flags[k]:
                return None
            k += 1
        for dx, (shape, strides, dtype) in zip(self.shadows, self.shaped):
            if dx.flags.num != flags[k] or dx.shape != shape or dx.strides != strides or dx.dtype != dtype:
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
        """The Active scalars by position and the plain values, as `annotations` gives them."""
        scalars, plain = {}, list(args)
        for n in self.known[0]:
            a = args[n]
            scalars[n] = a
            plain[n] = a.value
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


class Replays:
    """The launch facts of one recording, by `replay_key`."""

    def __init__(self):
        self.entries: dict[tuple, LaunchFacts] = {}

    def find(self, kernel: Any, dim: Any, backend: str | None, args: tuple, version: int) -> LaunchFacts | None:
        facts = self.entries.get(replay_key(kernel, backend, args))
        return facts if facts is not None and facts.matches(kernel, dim, args, version) else None

    def keep(self, facts: LaunchFacts, args: tuple, backend: str | None) -> None:
        if len(self.entries) >= MAX_REPLAYS:
            self.entries.clear()
        self.entries[replay_key(facts.kernel, backend, args)] = facts
