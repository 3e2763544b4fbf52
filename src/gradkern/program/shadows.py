"""Shadows follow memory (docs/programs.md): a launch argument that is an
annotated array, or any view inside one, gets the same view of its shadow; an
array nothing annotates gets a zero shadow for its whole buffer when a
derivative step first writes it (a temporary, a captured array, a `Const`).

A view is mapped by translation: the element at primal address p + d sits in
the shadow at address q + d, which holds when the shadow is laid out like the
primal (same strides) and the view's elements are elements of the primal
(the primal is contiguous, or the view is the primal itself, or, asked element
by element, every element of the view is an element of the annotated arrays it
touches: views of one buffer sharing no element are annotated separately,
docs/programs.md#interleaved-views)."""

from __future__ import annotations

import mmap
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..annotations import Annotation, BatchDuplicated, Const, Duplicated
from ..errors import AliasingError, ProgramError
from ..runtime.arrays import byte_bounds, is_cupy_array, module_of, shares_elements
from .savepool import MAPPABLE, PAGE, POOL, Memory

HUGE = 2 << 20  # a transparent huge page
MAPPED = 1 << 20  # temporaries' shadows from this many bytes up are mappings of their own (`_zero_pages`)


@dataclass
class _Entry:
    primal: Any
    shadow: tuple  # one shadow per lane (vector mode: k)
    lo: int
    hi: int
    internal: bool  # allocated by the program (freed with it), not the user's
    released: bool = False  # an internal entry's shadows given back (`release`)
    name: str = ""  # the program's parameter (internal: "a temporary")
    starts: Any = None  # its elements' addresses, sorted (`_by_elements`, made when first asked)


def _data_fixed() -> bool:
    """Whether this NumPy refuses to re-point an array's memory (`a.data = ...`, allowed with a warning before
    NumPy 2): then a view's address is fixed for its lifetime (`resize` refuses an array that does not own
    its memory)."""
    v = np.zeros(1)[:]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v.data = np.zeros(1).data
    except (AttributeError, TypeError):
        return True
    return False


_FIXED = _data_fixed()
_ADDRESSES: dict[int, tuple[Any, int]] = {}  # id(view) -> (weak reference to it, its address)


def _address(x: Any) -> int:
    """The address of `x`'s first element; a NumPy view's is kept (reading it costs a microsecond, and the
    sweep asks for the same views' at every step: docs/programs.md#host-cost-per-step)."""
    if not isinstance(x, np.ndarray):
        return x.data.ptr
    if x.base is None or not _FIXED:  # an owner can be resized elsewhere
        return x.ctypes.data
    entry = _ADDRESSES.get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1]
    ptr = x.ctypes.data
    if len(_ADDRESSES) >= 4096:
        _ADDRESSES.clear()
    _ADDRESSES[id(x)] = (weakref.ref(x), ptr)
    return ptr


def _same_geometry(a: Any, b: Any) -> bool:
    """The same memory, shape, strides and dtype (the address last: reading it costs microseconds). A NumPy view
    whose base is the other, a contiguous array, needs no address: a view NumPy made of an array (its `base`)
    lies inside the array's memory (slicing, `view`, `reshape` and `np.ndarray(buffer=...)` stay inside it; an
    `as_strided` view's base is no ndarray), and with the same shape, strides and dtype it spans as many bytes
    as the contiguous array has, so it starts where the array does (docs/programs.md#host-cost-per-step)."""
    if a is b:
        return True
    if tuple(a.shape) != tuple(b.shape) or tuple(a.strides) != tuple(b.strides) or a.dtype != b.dtype:
        return False
    if type(a) is np.ndarray and type(b) is np.ndarray:
        inner, outer = (a, b) if a.base is b else (b, a) if b.base is a else (None, None)
        if inner is not None and (outer.flags.c_contiguous or outer.flags.f_contiguous):
            return True
    return _address(a) == _address(b)


def _starts(x: Any) -> np.ndarray:
    """The addresses of `x`'s elements (C order), from its geometry: nothing is read."""
    out = np.full((), _address(x), np.int64)
    for n, step in zip(x.shape, x.strides):
        out = out[..., None] + np.arange(n, dtype=np.int64) * step
    return out.ravel()


def _describe(x: Any) -> str:
    return f"a view of shape {tuple(x.shape)} and strides {tuple(x.strides)}"


def _whole_buffer(written: Any, name: str) -> ProgramError:
    return ProgramError(f"a launch writes {_describe(written)} with active inputs, whose buffer holds the annotated "
                        f"'{name}': its derivative needs a shadow of the whole buffer, which would hold that "
                        "argument's elements twice", hint="annotate the written view too, gk.Duplicated with the same "
                        "view of the shadow buffer (docs/programs.md#interleaved-views), or copy it out")


def memory_root(x: Any) -> Any:
    """The array that owns `x`'s memory (`x` itself when it owns it)."""
    b = getattr(x, "base", None)
    if b is None:
        return x
    if type(b) is np.ndarray and b.base is None:  # the common case: a view of its owner (asked per launch)
        return b
    while getattr(x, "base", None) is not None and (isinstance(x.base, np.ndarray) or is_cupy_array(x.base)):
        x = x.base
    return x


def _held(primal: Any) -> Any:
    """The savepool.Memory `primal` lies in (a host copy lent by the save pool, or a view of one), or None."""
    root = memory_root(primal)
    memory = getattr(root, "base", None)
    return memory if type(memory) is Memory else None


def _zero_pages(root: np.ndarray) -> np.ndarray:
    """A zero array laid out like `root` (C-ordered) and starting at its offset within a page, in a mapping
    of its own (savepool.Memory), its first element in the first huge page: zero without a pass over it, and
    holding memory only from `populate` (the sweep's first reverse that takes it) until `release`
    (docs/programs.md, "Program shapes")."""
    memory = Memory(-(-(root.nbytes + PAGE) // HUGE) * HUGE + HUGE)
    memory.zero, memory.size = True, root.nbytes  # populated: the array's pages, no more
    skip = -memory.address % HUGE + root.ctypes.data % PAGE
    return np.ndarray(root.shape, root.dtype, buffer=memory, offset=skip, strides=root.strides)


_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14


def mapped(derivatives: dict) -> list:
    """The temporaries' shadows in mappings of their own (`_zero_pages`) among a prepared call's shadows
    (`Bound.derivatives`: a tuple of lanes by parameter), whole or through views."""
    found = []
    for lanes in derivatives.values():
        for v in lanes:
            base = getattr(v, "base", None)
            if type(base) is np.ndarray or type(base) is _Keep:  # a view of a shadow
                v = base if type(base) is np.ndarray else base.owner
                base = getattr(v, "base", None)
            if type(base) is Memory and base.zero and not any(v is f for f in found):
                found.append(v)
    return found


def populate(shadows: list) -> None:
    """Map the pages of mapped shadows writable (zeroed huge pages) before a reverse adds into them: the kernel's
    zeroing happens here, not at the reverse's first touches (whatever a kernel does with a read of the huge zero
    page before a write: some split it into 4 kB pages), and tracemalloc counts the memory from here. Pages
    already there stay as they are; a kernel without MADV_POPULATE_WRITE faults them at first touch instead."""
    for s in shadows:
        memory = s.base
        if memory.traced:  # populated already (and not released)
            continue
        lo = (s.ctypes.data - memory.address) // PAGE * PAGE
        try:
            memory.madvise(_POPULATE_WRITE, lo, min(len(memory) - lo, s.nbytes + PAGE))
        except OSError:
            pass
        memory.trace(True)


def release(entries: list) -> None:
    """The shadows of temporaries (internal entries) are no longer read: a mapping's pages go back to the
    system (reading them again would read zeros), a pooled buffer to the save pool; once each."""
    for e in entries:
        if e.internal and not e.released:
            e.released = True
            for s in e.shadow:
                give_back(s)


def give_back(s: Any) -> None:
    """A temporary's shadow memory no longer read: a mapping's pages go back to the system, a pooled buffer to
    the save pool."""
    if isinstance(s, np.ndarray) and type(s.base) is Memory:
        s.base.madvise(mmap.MADV_DONTNEED)
        s.base.trace(False)
    else:
        POOL.give(s)


class _Keep:
    """An __array_interface__ exporter that keeps the memory's owner alive."""

    def __init__(self, interface: dict, owner: Any):
        self.__array_interface__ = interface
        self.owner = owner


def _view_at(shadow: Any, address: int, like: Any) -> Any:
    """The array with `like`'s shape, strides and dtype at `address`, inside `shadow`'s memory."""
    if is_cupy_array(shadow):
        import cupy
        ptr = shadow.data + (address - shadow.data.ptr)
        return cupy.ndarray(tuple(like.shape), like.dtype, ptr, strides=tuple(like.strides))
    return np.asarray(_Keep({"shape": tuple(like.shape), "typestr": like.dtype.str, "data": (address, False),
                             "strides": tuple(like.strides), "version": 3}, shadow))


class ShadowMap:
    """The shadows of a program's arrays, by memory: a tuple of one per lane
    (`lanes` > 1 in vector mode)."""

    def __init__(self, lanes: int = 1):
        self.entries: list[_Entry] = []
        self.annotated: list[_Entry] = []  # the entries of the program's arguments (not internal)
        self.lanes = lanes
        self.version = 0  # changed by every registration and removal: what `find` answers may change then
        self.removed = 0  # changed by every removal (a registration changes no answer `find` gave: replay.py)
        # id(savepool.Memory) -> the entries whose primal lies in that mapping (a host copy's temporary: replay.py)
        self.in_memory: dict[int, list[_Entry]] = {}
        # (`removed` when made, {a view's address, shape, strides, dtype: (shadow, shift) by lane}): what
        # `_by_elements` found for views it mapped, which only a removal changes
        self.mapped: tuple[int, dict] = (0, {})

    def register(self, name: str, primal: Any, shadow: tuple, internal: bool = False) -> None:
        lo, hi = byte_bounds(primal)
        memory = _held(primal)
        # an array in a save-pool mapping overlaps only arrays in it, whose entries `in_memory` holds (the mapping
        # is reached only through its placed array and NumPy's views of it: programs.md, "Temporaries replayed")
        for e in self.entries if memory is None else self.in_memory.get(id(memory), ()):
            if not (lo < e.hi and e.lo < hi):
                continue
            if _same_geometry(e.primal, primal):
                if not (internal or e.internal) and not all(_same_geometry(s, t) for s, t in zip(e.shadow, shadow)):
                    raise AliasingError(f"'{name}' and '{e.name}' are the same array but their shadows are "
                                        "different buffers", hint="pass the same shadow for both (docs/programs.md)")
            elif internal or e.internal:  # a temporary's shadow covers its whole buffer
                raise _whole_buffer(primal, e.name if internal else name)
            elif shares_elements(e.primal, primal):  # exactly, as a launch's (runtime/arrays.py)
                raise ProgramError(f"'{name}' overlaps another annotated array, sharing elements with '{e.name}' "
                                   "without being the same array; a program's shadows follow memory, so each "
                                   "element needs one shadow",
                                   hint="annotate the whole array once and pass views of it, or pass views that "
                                   "share no element (docs/programs.md#interleaved-views)")
            else:  # interleaved views sharing no element: their shadows must not share one either
                for s, t in zip(shadow, e.shadow):
                    if shares_elements(s, t):
                        raise AliasingError(f"'{name}' and '{e.name}' are views of one array sharing no element, "
                                            "but their shadows share memory", hint="pass the same views of one "
                                            "shadow buffer, e.g. dP[:, 0] and dP[:, 1] for P[:, 0] and P[:, 1]")
        entry = _Entry(primal, shadow, lo, hi, internal, name=name)
        self.entries.append(entry)
        if not internal:
            self.annotated.append(entry)
        self.version += 1
        if memory is not None:
            self.in_memory.setdefault(id(memory), []).append(entry)

    def find(self, a: Any) -> tuple | None:
        """The shadows of array `a` (views of an annotated array's shadows), or None when it uses no annotated
        array's element (docs/programs.md#interleaved-views)."""
        lo, hi = byte_bounds(a)
        near = None  # the entries whose byte range `a` overlaps without lying inside a contiguous one
        for e in self.entries:
            if e.released:  # a temporary's shadow given back after the reverse of the step that made it: the
                continue  # steps before that one (a checkpointed loop's recomputed ones) saw no shadow there
            p = e.primal
            # the same memory, shape, strides and dtype (its byte bounds already known: no address read)
            if p is a or (lo == e.lo and hi == e.hi and p.shape == a.shape and p.strides == a.strides
                          and p.dtype == a.dtype):
                return e.shadow
            if lo >= e.lo and hi <= e.hi and lo < hi and (p.flags.c_contiguous or p.flags.f_contiguous):
                return self._translate(e, a)
            if lo < e.hi and e.lo < hi:
                near = [e] if near is None else near + [e]
        return None if near is None else self._by_elements(a, near)

    def _by_elements(self, a: Any, near: list) -> tuple | None:
        """`a` among entries whose byte ranges it overlaps (interleaved views, or a view of a strided entry): the
        entries whose elements it uses; none: None; one or several holding every element of `a`: the same view of
        their shadows (several: views of one shadow buffer at one offset from their primals); else refused."""
        key = (_address(a), tuple(a.shape), tuple(a.strides), a.dtype.str)
        if self.mapped[0] != self.removed:  # a removal may change an answer; a registration changes none given
            self.mapped = (self.removed, {})
        hit = self.mapped[1].get(key)
        if hit is not None:
            return tuple(_view_at(s, key[0] + shift, a) for s, shift in hit)
        used = [e for e in near if shares_elements(a, e.primal)]
        if not used:
            return None
        names = " and ".join(f"'{e.name}'" for e in used)
        for e in used:
            if e.primal.dtype != a.dtype:
                raise ProgramError(f"a launch argument views the annotated '{e.name}' of dtype {e.primal.dtype} as "
                                   f"{a.dtype}", hint="pass views with the array's own dtype")
        lanes = list(zip(*(e.shadow for e in used)))  # by lane, the used entries' shadows
        # several entries: one view of their shadows where those are the same views of one shadow buffer
        alike = len(used) == 1 or all(s.strides == e.primal.strides for lane in lanes for e, s in zip(used, lane))
        shifts = [{self._shift(e.primal, s, a) for e, s in zip(used, lane)} if alike else None for lane in lanes]
        starts, held = _starts(a), np.zeros(a.size, bool)
        for e in used:
            if e.starts is None:
                e.starts = np.sort(_starts(e.primal))
            held |= e.starts[np.minimum(np.searchsorted(e.starts, starts), e.starts.size - 1)] == starts
        if not held.all():
            raise ProgramError(f"a launch argument ({_describe(a)}) uses elements of the annotated {names} and "
                               "memory no annotated argument's elements hold", hint="pass views of the annotated "
                               "arrays' elements, or annotate the array they are views of (docs/programs.md"
                               "#interleaved-views)")
        out = []
        for shift, shadows in zip(shifts, lanes):
            # one shift: each element of `a`, an element of some entry, maps to that entry's shadow element (the
            # shadows then lie in one buffer where the entries interleave; the entries keep each alive)
            if shift is None or len(shift) > 1:
                raise ProgramError(f"a launch argument ({_describe(a)}) uses elements of {names}, whose shadows are "
                                   "not the same views of one shadow buffer", hint="pass the same views of one "
                                   "shadow laid out like the array (dP[:, 0] and dP[:, 1] for P[:, 0] and P[:, 1]),"
                                   " or launch on each view")
            out.append((shadows[0], shift.pop()))
        if not any(e.internal for e in used):  # a temporary's entry may be released (`find` skips it then)
            if len(self.mapped[1]) >= 256:
                self.mapped[1].clear()
            self.mapped[1][key] = tuple(out)
        return tuple(_view_at(s, key[0] + shift, a) for s, shift in out)

    def _translate(self, e: _Entry, a: Any) -> tuple:
        return tuple(_view_at(s, _address(a) + self._shift(e.primal, s, a), a) for s in e.shadow)

    @staticmethod
    def _shift(p: Any, s: Any, a: Any) -> int:
        """How far shadow `s` lies from its primal `p`, where the elements of view `a` of `p` are found in `s`."""
        if a.dtype != p.dtype:
            raise ProgramError(f"a launch argument views an annotated array of dtype {p.dtype} as {a.dtype}",
                               hint="pass views with the array's own dtype")
        if tuple(p.strides) != tuple(s.strides):
            raise ProgramError(f"a view of an annotated array (strides {tuple(p.strides)}) was launched, but its "
                               f"shadow has strides {tuple(s.strides)}: the view cannot be found in the shadow",
                               hint="allocate the shadow with zeros_like(primal)")
        return _address(s) - _address(p)

    def internal(self, a: Any, mapped: bool = False) -> tuple:
        """Zero shadows for the whole buffer of `a` (which nothing covers), and `a`'s views of them: a C-ordered
        NumPy buffer's from the save pool, zeroed, or where `mapped` (a launch recorded outside a checkpointed
        loop: its step populates and releases them) and large, in mappings of their own (`_zero_pages`)
        (docs/programs.md, "Program shapes"; `give_back` and `release` return them)."""
        root = memory_root(a)
        lo, hi = byte_bounds(root)
        for e in self.annotated:  # an annotated view of the buffer (interleaved with `a`): refused before allocating
            if lo < e.hi and e.lo < hi and not _same_geometry(e.primal, root):
                raise _whole_buffer(a, e.name)
        xp = module_of(root)
        if mapped and MAPPABLE and isinstance(root, np.ndarray) and root.flags.c_contiguous and root.nbytes >= MAPPED:
            shadows = tuple(_zero_pages(root) for _ in range(self.lanes))
        elif isinstance(root, np.ndarray) and root.flags.c_contiguous:
            shadows = tuple(POOL.empty_like(root) for _ in range(self.lanes))
            for s in shadows:
                s.fill(0)
        else:
            shadows = tuple(xp.zeros_like(root) for _ in range(self.lanes))
        if tuple(shadows[0].strides) != tuple(root.strides):
            raise ProgramError(f"an array of shape {tuple(root.shape)} and strides {tuple(root.strides)} needs a "
                               "shadow laid out like it, which zeros_like does not give",
                               hint="allocate temporaries with np.zeros/np.empty")
        self.register("a temporary", root, shadows, internal=True)
        # nothing covered `a` (the caller found none), so nothing before this entry covers its own buffer
        return shadows if a is root else self.find(a)

    def annotate(self, a: Any, written: bool, internal: bool = True, mapped: bool = False) -> Annotation:
        """A float array of an active launch or rule call as the call sees it: with its shadows, with new zero
        ones (`internal`; `mapped`: see `internal`) if the call may write it and none covers it (as a temporary
        gets), else Const."""
        dx = self.find(a)
        if dx is None and written and internal:
            dx = self.internal(a, mapped)
        if dx is None:
            return Const(a)
        return Duplicated(a, dx[0]) if self.lanes == 1 else BatchDuplicated(a, dx)

    def remove(self, gone: set[int]) -> None:
        """Forget the entries whose ids are in `gone` (a checkpointed loop's segment dropped its temporaries)."""
        kept = [e for e in self.entries if id(e) not in gone]
        if len(kept) < len(self.entries):
            self.entries = kept
            self.annotated = [e for e in kept if not e.internal]
            self.version += 1
            self.removed += 1
            self.in_memory = {}
            for e in kept:
                memory = _held(e.primal)
                if memory is not None:
                    self.in_memory.setdefault(id(memory), []).append(e)

    def give_back(self) -> None:
        """The sweep is over: the temporaries' shadows go back to the save pool (nothing outside the program
        holds them; a consumed tape is never swept again)."""
        release(self.entries)

    @property
    def internal_bytes(self) -> int:
        return sum(s.nbytes for e in self.entries if e.internal for s in e.shadow)
