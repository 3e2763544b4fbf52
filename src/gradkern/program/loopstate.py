"""The state of a checkpointed loop (docs/checkpointed-loops.md#how-it-works), found
by recording its first forward, and the checks its recomputed steps pass.

The **state** is the buffers the loop's steps write that are still alive when
its first forward ends, except those touched only by one step the forward
taped (a step's own temporaries, kept alive by its tape). The **persistent**
buffers are all those the loop took that outlived its first forward. Each
step's launches are kept as its signature: kernel, extent, and which
persistent buffers each launch took.

A recomputed step must do what it did: the same kernels on the same
persistent buffers, writing no persistent buffer outside the state;
otherwise ProgramError names the step and the array.
"""

from __future__ import annotations

import linecache
import weakref
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ProgramError
from ..runtime.arrays import is_array
from .derived import user_frame, where
from .scalars import ActiveScalar
from .shadows import ShadowMap, _address, memory_root

_PARTIAL = "found while the reverse recomputed it: the shadows may hold a partial gradient"
_FUNCTION_OF_T = ("a step must be a function of t and the loop's state: choose ping-pong buffers (or rows of one "
                  "array) from t (`a, b = (u, v) if t % 2 == 0 else (v, u)`), not from a swap or an index kept outside "
                  "the step (`bufs[0], bufs[1] = b, a`, `cur = 1 - cur` in a nonlocal), which a recomputed step finds "
                  "in its last position; the same for any host value an earlier step changed: derive a flag toggled "
                  "each step from t (miniWeather's `direction_switch = not direction_switch`: `t % 2 == 0`), and "
                  "rebuild a list that depends on the state (a neighbour list kept for k steps) in the step that uses "
                  "it: rebuild it in every step from the step's own state; a step defined inside an outer loop reads "
                  "that loop's variables as they are when the reverse recomputes it (Python looks a closure's names "
                  "up when it runs): bind them when it is defined, as defaults (`def step(t, bufs=bufs)`) "
                  "(docs/checkpointed-loops.md#how-it-works)")

_KEPT = ("keep outputs between checkpointed loops: run the loop in segments of k steps and copy the state after "
         "each (`for s in range(n // k): gk.checkpointed_loop(step, k, ...); kept.append(u.copy())`), or keep them "
         "in a plain loop (store-all)")


def _line_text(frame: Any) -> str:
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
    return f" (`{line}`)" if line else ""


class StepSeries:
    """A small code per step, from step `start` on, set in ascending step order; 0 where none was set. Compact
    (docs/checkpointed-loops.md#how-it-works): a byte or int array while the first forward records it, and
    once `settle`d a head and one repeated period when the codes are periodic (a loop's steps repeat a few
    patterns), so a loop of 10**6 steps holds a few bytes for it through its reverse, not an object per step."""

    __slots__ = ("codes", "start", "length", "head", "period")

    def __init__(self, start: int):
        self.codes, self.start, self.length = array("B"), start, 0  # bytes until a code needs more
        self.head, self.period = 0, 0  # settled periodic: codes[:head] once, then codes[head:head + period] repeated

    def set(self, t: int, code: int) -> None:
        """The code of step t (t >= every step set before)."""
        i = t - self.start
        if code > 255 and self.codes.typecode == "B":
            self.codes = array("I", self.codes)
        if i >= len(self.codes):
            self.codes.extend([0] * (i - len(self.codes)))
            self.codes.append(code)
        else:
            self.codes[i] = code
        self.length = max(self.length, i + 1)

    def renumber(self, numbers: list[int]) -> None:
        """Each code c becomes numbers[c]."""
        self.codes = array(self.codes.typecode, [numbers[c] for c in self.codes])

    def settle(self, heads: tuple[int, ...] = (0, 1, 2), periods: int = 32) -> None:
        """Keep a head and one period when the codes repeat with a period of at most `periods` steps after a
        head of `heads` steps; otherwise the array as it is."""
        if not len(self.codes):
            return
        codes = np.frombuffer(self.codes, dtype=self.codes.typecode)
        for head in heads:
            for period in range(1, periods + 1):
                if head + 2 * period > len(codes):
                    break
                if np.array_equal(codes[head + period:], codes[head:-period]):
                    kept = array(self.codes.typecode, codes[:head + period].tolist())
                    self.codes, self.head, self.period = kept, head, period
                    return

    def __getitem__(self, t: int) -> int:
        i = t - self.start
        if i < 0 or i >= self.length:
            return 0
        if self.period and i >= self.head:
            i = self.head + (i - self.head) % self.period
        return self.codes[i]

    def first_from(self, t: int) -> int:
        """The first non-zero code at a step from t on, 0 if none."""
        i = max(t - self.start, 0)
        if i >= self.length:
            return 0
        if not self.period:  # the array as recorded
            later = np.flatnonzero(np.frombuffer(self.codes, dtype=self.codes.typecode)[i:self.length])
            return int(self.codes[i + later[0]]) if len(later) else 0
        end = min(self.length, max(i, self.head) + self.period)  # one period after the head holds every code
        for j in range(i, end):
            code = self.codes[j if j < self.head else self.head + (j - self.head) % self.period]
            if code:
                return code
        return 0


MAX_CHECKED = 64  # check_launch's answers kept; a loop launching on fresh arrays every step starts over
TAKEN, TAKEN_DEAD = 1, 2  # a step took a buffer; and its first launch taking it overwrote it whole unread
_NONE = StepSeries(0)  # no step: what a buffer outside the state keeps once the forward is over


@dataclass
class _Seen:
    """A buffer the loop's launches took."""

    ref: Any  # weak reference (a temporary a step drops is freed)
    uses: StepSeries  # by step of the first forward: TAKEN, TAKEN_DEAD or 0 (not taken)
    steps: int = 0  # how many steps took it
    last: int = -1  # the last step that took it
    written: int = -1  # the last step that wrote it, -1: none


def views(arrays: list, roots: list, starts: dict) -> tuple:
    """Where each array lies in its buffer, as a recomputed step must repeat it: None for the whole buffer, else
    (byte offset, shape, strides). Another row of one (2, n) allocation is another view of the same buffer
    (docs/checkpointed-loops.md#how-it-works). `starts` keeps the buffers' addresses by id (with a weak
    reference): a stale one, of an owner NumPy resized, offsets every later view alike, so it can only refuse."""
    out = []
    for a, r in zip(arrays, roots):
        if a is r or _whole(a, r):
            out.append(None)
            continue
        entry = starts.get(id(r))
        if entry is None or entry[0]() is not r:
            if len(starts) >= 4096:
                starts.clear()
            entry = starts[id(r)] = (weakref.ref(r), _address(r))
        out.append((_address(a) - entry[1], tuple(a.shape), tuple(a.strides)))
    return tuple(out)


def _whole(a: Any, r: Any) -> bool:
    """Whether `a` views all of `r`, told without an address (a microsecond or more each): NumPy's view of a
    contiguous owner with its shape, strides and dtype starts where it does (shadows._same_geometry)."""
    return (a.base is r and a.shape == r.shape and a.strides == r.strides and a.dtype == r.dtype and
            (r.flags.c_contiguous or r.flags.f_contiguous))


def _view_text(view: tuple | None) -> str:
    return "the whole buffer" if view is None else f"shape {view[1]} at byte offset {view[0]}"


def scalars(values: Any) -> tuple:
    """A launch's scalar arguments as a recomputed step must repeat them: numbers by value (NaN equal to NaN),
    other objects by type. Bit for bit: a step recomputed from its snapshot makes the same host arithmetic, and a
    scalar that differs (a random draw, a value read outside the state) takes another trajectory."""
    out = []
    for v in values:
        if is_array(v):
            continue
        if isinstance(v, (bool, int, float, complex, np.generic)) and not isinstance(v, np.void):
            x = v.item() if isinstance(v, np.generic) else v
            out.append(("nan",) if x != x else x)
        else:
            out.append(type(v).__name__)
    return tuple(out)


def _values(vals: tuple) -> str:
    return ", ".join("nan" if v == ("nan",) else repr(v) for v in vals) or "none"


class LoopState:
    """What a checkpointed loop's launches take: recorded in its first forward, checked when recomputed."""

    def __init__(self, freed: Callable[[Any], None]):
        """`freed(ref)`: a buffer of the first forward, `ref` its weak reference, was freed."""
        self.freed = freed
        self.seen: dict[int, _Seen] = {}
        self.forward_taped: set[int] = set()  # steps the first forward taped (its last segment)
        self.state: dict[int, Any] = {}  # id -> buffer, once the first forward is over
        self.persistent: dict[int, Any] = {}  # id -> buffer the loop took that outlived its first forward
        self.alive: dict[int, Any] = {}  # every buffer the loop took that is alive after its first forward
        self.written_back: list = []  # those of them its steps wrote
        self.taped_only: dict[int, Any] = {}  # buffers only one step, taped in the first forward, took
        self.wanted: dict[int, Any] = {}  # id -> weak reference: buffers the first forward's launches need shadows of
        self.last_write: dict[int, int] = {}  # id(state buffer) -> the last step writing it
        self.first_use: dict[int, StepSeries] = {}  # id(state buffer) -> its uses by step (_Seen.uses)
        # each step's launches as a number (`steps`) into the distinct step signatures (`signatures`): a step
        # signature is a list of launches (kernel, extent, persistent buffer ids or None) once the forward is over
        self.steps = StepSeries(0)
        self.signatures: list = []
        self.recomputed: list = []  # the launches of the step being recomputed, as `signatures` holds them
        self._launches: dict = {}  # the first forward's distinct launches (record_launch)
        self._step_keys: dict = {}  # its distinct steps: the tuple of their launches -> number
        self._step: tuple[int, list] = (-1, [])  # the step being recorded and its launches so far
        self._checked: dict = {}  # check_launch's answers by the launch's objects: (their references, ids)
        self._starts: dict = {}  # the buffers' addresses for `views`
        self._want: list = []  # the signature of the step being recomputed (compare_last)

    # -- the first forward ------------------------------------------------------------------------------------------
    def record_launch(self, t: int, name: str, written: list, binding: Any, dead: set[int]) -> dict[int, Any]:
        """A launch (or rule call) of step t in the first forward, writing `written` and overwriting the buffers
        `dead` (ids) whole unread. Returns id -> weak reference of every buffer it takes."""
        sig, refs, arrays, roots = [], {}, [], []
        for a in binding.values:
            if not is_array(a):
                continue
            root = memory_root(a)
            arrays.append(a)
            roots.append(root)
            seen = self.seen.get(id(root))
            if seen is None or seen.ref() is not root:
                seen = self.seen[id(root)] = _Seen(weakref.ref(root, self.freed), StepSeries(t))
            if seen.last != t:  # the step's first launch taking it
                seen.uses.set(t, TAKEN_DEAD if id(root) in dead else TAKEN)
                seen.steps, seen.last = seen.steps + 1, t
            sig.append((id(root), seen))
            refs[id(root)] = seen.ref
        for a in written:
            self.seen[id(memory_root(a))].written = t
        launch = (name, tuple(binding.dim), tuple(sig), scalars(binding.values), views(arrays, roots, self._starts))
        # one object per distinct launch: steps repeat a few, and a loop may have 10**4 of them
        launch = self._launches.setdefault((name, launch[1], tuple((k, id(s)) for k, s in sig), *launch[3:]),
                                           launch)
        if self._step[0] != t:
            self._end_step()
            self._step = (t, [])
        self._step[1].append(launch)
        return refs

    def _end_step(self) -> None:
        """The step recorded so far as the number of its distinct signature (steps without launches: none)."""
        t, launches = self._step
        if t >= 0:
            key = tuple(id(launch) for launch in launches)  # the launches are interned: their ids say which
            number = self._step_keys.get(key)
            if number is None:
                number = self._step_keys[key] = len(self.signatures) + 1
                self.signatures.append(launches)
            self.steps.set(t, number)
        self._step = (-1, [])

    def wants_shadows(self, shadows: ShadowMap, written: list, args: tuple) -> None:
        """An untaped launch of the first forward that a recorded program would have taken with shadows:
        the arrays it writes that no shadow covers get one when the forward ends (if they outlive it), so
        that the launches after the loop see the shadows they would have seen without checkpoints."""
        arrays = [a for a in args if is_array(a)]
        if not (any(isinstance(a, ActiveScalar) for a in args)
                or any(shadows.find(a) is not None or self._wanted(a) for a in arrays)):
            return
        for w, a in zip(written, args):
            if w and is_array(a) and a.dtype.kind == "f" and shadows.find(a) is None:
                root = memory_root(a)
                self.wanted[id(root)] = weakref.ref(root)

    def _wanted(self, a: Any) -> bool:
        """Whether `a`'s buffer is one `wanted` names: the same object (a freed temporary's id may be another's
        now, docs/programs.md#objects-keyed-by-identity)."""
        root = memory_root(a)
        ref = self.wanted.get(id(root))
        return ref is not None and ref() is root

    def make_wanted_shadows(self, shadows: ShadowMap) -> None:
        """The shadows the first forward's untaped launches would have made, for the buffers alive now
        (between steps: a step's temporaries are gone)."""
        for ref in self.wanted.values():
            root = ref()
            if root is not None and shadows.find(root) is None:
                shadows.internal(root)
        self.wanted = {}

    def find(self) -> None:
        """After the first forward: the state, the persistent buffers, the steps' signatures."""
        self._end_step()
        for key, seen in self.seen.items():
            root = seen.ref()
            if root is None:
                continue  # a step's temporary, freed
            self.alive[key] = root
            if seen.written >= 0:
                self.written_back.append(root)
            if seen.steps == 1 and seen.last in self.forward_taped:
                self.taped_only[key] = root  # a taped step's temporary, or a buffer only that step takes
                continue
            self.persistent[key] = root
            if seen.written >= 0:
                self.state[key] = root
                self.last_write[key] = seen.written
        persistent, distinct, numbers = self.persistent, {}, [0]
        for launches in self.signatures:  # the buffers as persistent ids or None: some signatures become equal
            sig = [(name, dim, [key if key in persistent and seen.ref() is persistent[key] else None
                                for key, seen in sig], values, where) for name, dim, sig, values, where in launches]
            key = tuple((name, dim, tuple(ids), values, where) for name, dim, ids, values, where in sig)
            numbers.append(distinct.setdefault(key, (len(distinct) + 1, sig))[0])
        self.signatures = [sig for _, sig in distinct.values()]
        self.steps.renumber(numbers)
        self.steps.settle()
        self.first_use = {}
        for key in self.state:
            self.first_use[key] = self.seen[key].uses
            self.first_use[key].settle()
        for key, seen in self.seen.items():  # recorded for the above; the checks of recomputed steps use ref only
            if key not in self.state:
                seen.uses = _NONE
        self._launches, self._step_keys = {}, {}

    def changed_from(self, at: int | None) -> Iterator[tuple[int, Any, bool]]:
        """The state buffers some step from `at` on writes (all when `at` is None): (id, buffer, whether the
        first step from `at` on taking it overwrites it whole unread)."""
        for key, root in self.state.items():
            if at is None or self.last_write[key] >= at:
                yield key, root, at is not None and self.first_use[key].first_from(at) == TAKEN_DEAD

    # -- recomputation ----------------------------------------------------------------------------------------------
    def check_launch(self, t: int, name: str, written: list, binding: Any) -> None:
        """A launch (or rule call) of step t recomputed: noted for `check_step`; ProgramError if it writes a
        buffer only a taped step took or a persistent one outside the state."""
        arrays = [a for a in binding.values if is_array(a)]
        key = (name, *map(id, arrays), None, *map(id, written))
        hit = self._checked.get(key)
        # the same objects as a launch checked before (weak references): a view's buffer cannot change (`base`
        # is read-only) and the state is fixed once found, so its ids and its writes' checks are the same
        # (docs/programs.md#recomputed-steps-of-a-checkpointed-loop); the extent is compared by check_step
        if hit is not None and all(r() is a for r, a in zip(hit[0], arrays)) and \
                all(r() is w for r, w in zip(hit[1], written)):
            self.recomputed.append((name, tuple(binding.dim), hit[2], scalars(binding.values), hit[3]))
            self.compare_last(t)
            return
        ids, roots = [], []
        for a in arrays:
            root = memory_root(a)
            roots.append(root)
            known = self.seen.get(id(root))
            ids.append(id(root) if known is not None and known.ref() is root and id(root) in self.persistent
                       else None)
        where = views(arrays, roots, self._starts)
        self.recomputed.append((name, tuple(binding.dim), ids, scalars(binding.values), where))
        for a in written:
            root = memory_root(a)
            if self.taped_only.get(id(root)) is root:
                raise ProgramError(f"step {t} of the checkpointed loop, taped in the loop's first forward, is "
                                   f"recomputed by the schedule, and its launch of kernel '{name}' writes an array "
                                   f"of shape {tuple(root.shape)} that only this step takes: whether it is part of "
                                   "the state cannot be told", hint="use the default (binomial) schedule")
            if id(root) in self.persistent and id(root) not in self.state:
                raise ProgramError(f"step {t} of the checkpointed loop (launch of kernel '{name}') writes an array "
                                   f"of shape {tuple(root.shape)} that is not part of the loop's state as recorded "
                                   "(the buffers its steps write); recomputing it from a snapshot would be wrong",
                                   hint="a step must be a function of t and the state: write the same arrays in "
                                        "every step, or allocate per-step temporaries inside the step")
        self.compare_last(t)  # after the writes' checks, whose messages say more
        try:
            refs, written_refs = tuple(map(weakref.ref, arrays)), tuple(map(weakref.ref, written))
        except TypeError:  # an array that takes no weak reference: checked in full every time
            return
        if len(self._checked) >= MAX_CHECKED:
            self._checked.clear()
        self._checked[key] = (refs, written_refs, ids, where)

    def _made_by(self, key: int | None, t: int) -> bool:
        """Whether state buffer `key` is one only step t took, writing it: an array the step made and kept
        (docs/checkpointed-loops.md#how-it-works)."""
        seen = self.seen.get(key) if key in self.state else None
        return seen is not None and seen.steps == 1 and seen.last == t

    def compare_last(self, t: int) -> None:
        """ProgramError, naming the user's line, if the launch just noted differs from the one step t made at the
        same place when it was recorded: raised before it runs (check_step finds a step that launched too few)."""
        k = len(self.recomputed) - 1
        if k == 0:  # the step's record, looked up once a step
            number = self.steps[t]
            self._want = self.signatures[number - 1] if number else []
        want = self._want
        if k < len(want):
            if want[k] != self.recomputed[k]:
                self._differs(t, k, want[k], self.recomputed[k])
            return
        if k == len(want):
            raise ProgramError(f"step {t} of the checkpointed loop made more launches on recomputation than the "
                               f"{len(want)} it made when it was recorded: launch {k + 1}, '{self.recomputed[k][0]}', "
                               f"at {where(user_frame())}{_line_text(user_frame())}; {_PARTIAL}", hint=_FUNCTION_OF_T)

    def _differs(self, t: int, k: int, a: Any, b: Any) -> None:
        if a[:2] == b[:2] and any(y is None and self._made_by(x, t) for x, y in zip(a[2], b[2])):
            raise ProgramError(f"step {t} of the checkpointed loop (launch {k + 1} of the step, '{b[0]}') took "
                               "an array that the step made when it was recorded and that outlived the loop's "
                               "first forward (a copy kept outside the step: periodic output, "
                               "`kept.append(u.copy())`); recomputed, the step makes another, which the kept one's "
                               f"derivative cannot reach; {_PARTIAL}", hint=_KEPT)
        if a[:3] == b[:3] and a[3] != b[3]:
            frame = user_frame()
            raise ProgramError(f"step {t} of the checkpointed loop launched '{b[0]}' (launch {k + 1} of the step) "
                               f"with other scalar arguments than when it was recorded ({_values(a[3])} then, "
                               f"{_values(b[3])} recomputed), at {where(frame)}{_line_text(frame)}: host code that "
                               "draws random numbers or reads state outside the loop's gives a recomputed step "
                               f"another trajectory; {_PARTIAL}",
                               hint="compute a value kept across steps from t (a time `t * dt`, not `sim_time += "
                                    "dt` in a nonlocal); draw a step's random numbers from a generator seeded by t "
                                    "(np.random.default_rng((seed, t))), or keep them in an array made before the loop")
        if a[:4] == b[:4] and a[4] != b[4]:
            frame = user_frame()
            j = next(j for j, (x, y) in enumerate(zip(a[4], b[4])) if x != y)
            raise ProgramError(f"step {t} of the checkpointed loop launched '{b[0]}' (launch {k + 1} of the step) "
                               f"on another part of the same array than when it was recorded (its array argument "
                               f"{j + 1}: {_view_text(a[4][j])} then, {_view_text(b[4][j])} recomputed), at "
                               f"{where(frame)}{_line_text(frame)}; {_PARTIAL}", hint=_FUNCTION_OF_T)
        if a != b:
            frame = user_frame()
            raise ProgramError(f"step {t} of the checkpointed loop launched '{b[0]}' (launch {k + 1} of the "
                               f"step) on other arrays, or another kernel, than when it was recorded ('{a[0]}'), at "
                               f"{where(frame)}{_line_text(frame)}; {_PARTIAL}", hint=_FUNCTION_OF_T)

    def check_step(self, t: int) -> None:
        """ProgramError unless recomputed step t launched what it launched when it was recorded."""
        number = self.steps[t]
        want, got = self.signatures[number - 1] if number else [], self.recomputed
        if got == want:
            return
        for k, (a, b) in enumerate(zip(want, got)):
            self._differs(t, k, a, b)
        raise ProgramError(f"step {t} of the checkpointed loop made {len(got)} launches on recomputation, "
                           f"{len(want)} when it was recorded; {_PARTIAL}", hint=_FUNCTION_OF_T)
