"""Shadows renamed in a program's sweep (docs/programs.md, "Renamed shadows"): a copy's reverse
(`gk.copy`, host code's `u_old = u.copy()`, any kernel that is a pure move) adds the copy's shadow into its
source's and clears the copy's.
Where the source's shadow is known to hold +0.0 everywhere (a launch that overwrote the source whole has just
had its reverse, which cleared it) and the copy's shadow is a temporary's that the copy made, the sweep instead
lets the copy's shadow memory stand for the source's shadow from then on (0 + g is g: the same floats) and keeps
the source's old memory, zero, for the next temporary's shadow in place of a population. The earlier steps'
reverses get the same views of the memory that stands for a shadow (the prepared call's derivatives, nothing
recompiled), as contents.py hands them saves in place of primals.

The user's shadow buffers stay the user's: their memory is never lent to another shadow, and the memory that
stands for one is written into it once, when the sweep ends or before a step whose reverse reads the shadows by
other means (a custom rule's reverse, a checkpointed loop's segments).

What the sweep knows without reading kernel bodies: which parameters a launch overwrites whole (their shadows
hold +0.0 after its reverse: the reverse clears a consumed output's shadow), and which launches are pure moves,
whose reverse is exactly add-then-clear (the access facts' `moved`, analysis/moves.py; record.moved_positions).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .savepool import Memory
from .shadows import _address, _Keep, _view_at, give_back, memory_root, populate

KEPT_ZEROS = 2  # zero memories kept for the next temporaries' shadows; more are given back


def enabled() -> bool:
    """GRADKERN_SHADOW_RENAME=0 turns the renaming off (docs/environment.md), read at each sweep."""
    return os.environ.get("GRADKERN_SHADOW_RENAME", "1") != "0"


def _memory(v: Any) -> Any:
    """The array whose memory a shadow view `v` lies in (a view made by shadows._view_at has its owner)."""
    b = v.base
    if type(b) is _Keep:
        v = b.owner
    return memory_root(v)


def _alike(a: Any, b: Any) -> bool:
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype


def _mapped(a: Any) -> bool:
    """A temporary's shadow in a mapping of its own (shadows._zero_pages): giving it back twice is harmless."""
    return type(a) is np.ndarray and type(a.base) is Memory


class ShadowRenames:
    """Which memory stands for which shadow in a sweep (id of the shadow -> (shadow, memory)), the memories
    known to hold +0.0 everywhere, and zero memories free for the next temporary's shadow."""

    def __init__(self, user: list):
        """`user`: the shadow arrays the user passed (never lent to another shadow)."""
        self.user = {id(s) for s in user}
        self.stands: dict[int, tuple[Any, Any]] = {}
        self.zero: dict[int, Any] = {}  # by id, each kept alive while listed (an id is not reused meanwhile)
        self.free: list = []

    def derivatives(self, derivatives: dict) -> dict | None:
        """A prepared call's derivatives with every shadow that another memory stands for replaced by the same
        view of that memory, or None when none is."""
        stands = self.stands
        if not stands:
            return None
        out = None
        for name, lanes in derivatives.items():
            for n, v in enumerate(lanes):
                entry = stands.get(id(v))
                if entry is None and type(v.base) is _Keep:
                    entry = stands.get(id(v.base.owner))
                if entry is None:
                    continue
                root, memory = entry
                if out is None:
                    out = dict(derivatives)
                got = list(out[name])
                got[n] = memory if v is root else _view_at(memory, _address(v) + (_address(memory) - _address(root)), v)
                out[name] = tuple(got)
        return out

    def reversed(self, derivatives: dict, cleared: tuple) -> None:
        """A launch's reverse ran with `derivatives` (as it took them): every memory it took may hold anything
        now, except the shadows of the parameters it overwrote whole (`cleared`), which it cleared."""
        zero = self.zero
        if zero:
            for lanes in derivatives.values():
                for v in lanes:
                    b = v.base  # an array is its own memory without a base array (docs/programs.md#host-cost-per-step)
                    zero.pop(id(v) if b is None or type(b) is Memory else id(_memory(v)), None)
        for name in cleared:
            lanes = derivatives.get(name)
            if lanes is not None and len(lanes) == 1 and (lanes[0].base is None or type(lanes[0].base) is Memory):
                zero[id(lanes[0])] = lanes[0]

    def moved(self, step: Any) -> bool:
        """Rename in place of a copy's reverse (`step.moved`: its destination's and source's parameters) where
        the source's shadow holds +0.0 and the destination's is a temporary's that this copy made, in a mapping
        of its own, the source's the user's or such a temporary's, both whole C-ordered NumPy arrays laid out
        alike. Returns whether it did."""
        bound = step.prepared
        if step.moved is None or bound is None:
            return False
        dst_name, src_name = step.moved
        d = bound.derivatives
        if dst_name not in d or src_name not in d or len(d[dst_name]) != 1 or len(d[src_name]) != 1:
            return False
        dst, src = d[dst_name][0], d[src_name][0]
        if not _mapped(dst) or dst is src or type(src) is not np.ndarray or not _alike(dst, src) \
                or not dst.flags.c_contiguous or _memory(src) is not src \
                or not (_mapped(src) or id(src) in self.user) or not any(e.shadow[0] is dst for e in step.made):
            return False
        stands = self.stands
        src_now = stands[id(src)][1] if id(src) in stands else src
        # a mapping never populated (or given back) is zero: no reverse wrote it (each populates what it takes)
        untouched = src_now is src and _mapped(src) and not src.base.traced
        if id(src_now) not in self.zero and not untouched:
            return False
        dst_now = stands.pop(id(dst))[1] if id(dst) in stands else dst
        stands[id(src)] = (src, dst_now)  # dst_now holds g = what src's shadow would hold: 0 + g
        self.zero.pop(id(dst_now), None)
        if not untouched and (src_now is not src or id(src) not in self.user):  # zero memory: for the next
            self._keep_zero(src_now)  # temporary's shadow
        return True

    def populate(self, shadows: list) -> None:
        """Before a reverse takes mapped temporaries' shadows: one never populated gets a free zero memory laid
        out alike to stand for it (no population); the others are populated (shadows.populate)."""
        rest = []
        for t in shadows:
            if id(t) in self.stands or t.base.traced:
                continue
            for k, z in enumerate(self.free):
                if _alike(z, t):
                    self.stands[id(t)] = (t, self.free.pop(k))
                    break
            else:
                rest.append(t)
        if rest:
            populate(rest)

    def release(self, entries: list) -> None:
        """The temporaries' shadows in `entries` are no longer read (shadows.release): the memory that holds one
        is kept for the next temporary where it is known zero, else given back, unless it stands for another."""
        for e in entries:
            if not e.internal or e.released:
                continue
            e.released = True
            for s in e.shadow:
                if not self.stands and not _mapped(s):  # nothing stands for it: as shadows.release
                    self.zero.pop(id(s), None)
                    give_back(s)
                    continue
                now = self.stands.pop(id(s))[1] if id(s) in self.stands else s
                if now is not s and not self._in_use(s):
                    give_back(s)  # its own memory, never populated
                if self._in_use(now):
                    continue
                if id(now) in self.zero and _mapped(now):
                    self._keep_zero(now)
                else:
                    self.zero.pop(id(now), None)
                    give_back(now)

    def settle(self, final: bool = False) -> None:
        """Every shadow's memory holds its contents again (before a step whose reverse reads shadows by other
        means; `final`: the sweep ended, so only the user's shadows are written); what stood for them and the
        free zero memories given back. A memory that stands for one shadow may be another's own (a
        temporary's, lent when it stood elsewhere): its contents are copied before that one is written."""
        pairs = [(r, m) for r, m in self.stands.values() if not final or id(r) in self.user]
        written = {id(r) for r, _ in pairs}
        for root, data in [(r, m.copy() if id(m) in written else m) for r, m in pairs]:
            if id(root) not in self.user:
                populate([root])
            root[...] = data
        for m in [m for _, m in self.stands.values()] + self.free:
            if id(m) not in written:
                give_back(m)
        self.stands, self.free, self.zero = {}, [], {}

    def _in_use(self, memory: Any) -> bool:
        return any(m is memory for _, m in self.stands.values()) or any(z is memory for z in self.free)

    @staticmethod
    def wanted(steps: list) -> bool:
        """Whether a sweep of `steps` has a copy it may rename, one into a temporary whose shadow is mapped
        (else it keeps no books: about 3 us a launch on small arrays)."""
        return any(getattr(s, "moved", None) is not None and s.mapped for s in steps)

    def _keep_zero(self, memory: Any) -> None:
        if len(self.free) < KEPT_ZEROS:
            self.zero[id(memory)] = memory
            self.free.append(memory)
        else:
            self.zero.pop(id(memory), None)
            give_back(memory)
