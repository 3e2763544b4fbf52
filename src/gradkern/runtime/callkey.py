"""The key of a prepared call (docs/prepared-call.md, "One signature, one cache, one refill"): what every check
of a call depends on, read from its arguments without binding them, for NumPy and CuPy arrays alike
(docs/prepared-call.md, "CuPy arrays"). The runtime's hottest path: the common cases are inline."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..annotations import Active, Annotation, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed
from ..backends import default_name
from ..kernel import KernelFunction
from .arrays import byte_bounds, held_memory, is_cupy_array
from .binding import KEYED_SCALARS, OWNDATA, disjoint, memory_owner, numpy_made


def backend_name(backend: str | None) -> str:
    """The backend a call names, or the default one (the backend of a call's `signature`)."""
    return backend or default_name()


def signature(kernel: KernelFunction, mode: str, dim: Any, backend: str | None, args: tuple) -> tuple | None:
    """The key of a call (the only one: docs/prepared-call.md), or None where it must be prepared in full:
    a value of another kind (see `_value_key`; CuPy arrays: `_device_key`), an unknown annotation, a dim that
    is not None, an int or a tuple of ints, or any two of the call's arrays (primals and shadows) whose memory
    may overlap (aliasing is decided in full at every such call)."""
    t = type(dim)
    if dim is not None and t is not int and not (t is tuple and all(type(n) is int for n in dim)):
        return None
    sig: list = [id(kernel), mode, dim, backend_name(backend)]
    arrays: list = []
    owners: list = []
    device: list = []  # CuPy arrays' byte ranges (`_device_key`)
    ndarray = np.ndarray
    for a in args:
        t = type(a)
        if t is ndarray:  # a plain array (a launch's): `_value_key` inline
            b = a.base
            if not (b is None or (type(b) is ndarray and b.flags.owndata)):
                b = held_memory(b)  # memory of its own (program/savepool.py), or unknown
                if b is None:
                    return None
            f = a.flags.num
            o = b if b is not None else a if f & OWNDATA else None
            if o is None:
                return None
            arrays.append(a)
            owners.append(o)
            sig.append((a.dtype, a.shape, a.strides, f))
            continue
        if t in KEYED_SCALARS:  # a plain scalar: `_value_key` inline
            if t is int and not -2**63 <= a < 2**63:
                return None
            sig.append(t)
            continue
        if t is Duplicated or t is DuplicatedNoNeed:
            v, d = a.val, a.dval
            if type(v) is ndarray and type(d) is ndarray:  # the common case, `_value_key` of both inline
                vb, db = v.base, d.base
                if not (vb is None or (type(vb) is ndarray and vb.flags.owndata)):
                    vb = held_memory(vb)
                    if vb is None:
                        return None
                if not (db is None or (type(db) is ndarray and db.flags.owndata)):
                    db = held_memory(db)
                    if db is None:
                        return None
                vf, df = v.flags.num, d.flags.num
                vo = vb if vb is not None else v if vf & OWNDATA else None  # binding.memory_owner
                do = db if db is not None else d if df & OWNDATA else None
                if vo is None or do is None:
                    return None
                arrays.append(v)
                arrays.append(d)
                owners.append(vo)
                owners.append(do)
                sig.append((t, v.dtype, v.shape, v.strides, vf, d.dtype, d.shape, d.strides, df))
                continue
            k = (t, _value_key(v, arrays, device), _value_key(d, arrays, device))
        elif t is BatchDuplicated:
            dvals = a.dvals
            if type(dvals) is not tuple and type(dvals) is not list:
                return None
            k = (t, _value_key(a.val, arrays, device), *(_value_key(d, arrays, device) for d in dvals))
        elif t is Active or t is Const:
            k = (t, _value_key(a.val, arrays, device))
        elif isinstance(a, Annotation):
            return None
        else:
            k = (_value_key(a, arrays, device),)
        if any(v is None for v in k):  # `is`: a dtype compares equal to None
            return None
        sig.append(k)
    if len(owners) < len(arrays):  # arrays keyed by `_value_key`
        owners = [memory_owner(a, a.flags.num) for a in arrays]
        if any(o is None for o in owners):
            return None
    if device and not _apart(device):
        return None
    return tuple(sig) if disjoint(arrays, owners) else None


def _value_key(v: Any, arrays: list, device: list) -> Any:
    """What every check of one value depends on, or None where it must be checked in full. For an array NumPy
    made (binding.numpy_made: inside its memory), whether its elements overlap, whether it is writable and
    what it is like follow from its dtype, shape, strides and flags; a CuPy array: `_device_key`."""
    t = type(v)
    if t is np.ndarray:
        if not numpy_made(v):
            return None
        arrays.append(v)
        return v.dtype, v.shape, v.strides, v.flags.num
    if is_cupy_array(v):
        return _device_key(v, device)
    if t is int and not -2**63 <= v < 2**63:
        return None
    return t if t in KEYED_SCALARS else None


def _device_key(a: Any, device: list) -> tuple | None:
    """What every check of a CuPy array depends on (binding._check_array, _check_device, _aliases): its type,
    dtype, shape, strides, contiguity and device; None where a check that reads its address fails (it starts
    at an address that is not a multiple of its item size, or reaches outside the allocation CuPy made for it:
    the full path then raises). Its byte range joins `device`, for `_apart`. A CuPy array's pointer never
    changes, so a call replayed on the same objects (program/replay.py) needs none of this again."""
    data = getattr(a, "data", None)  # an object that looks like CuPy's array but is not (is_cupy_array): None
    lo = getattr(data, "ptr", None)
    if type(lo) is not int or lo % a.itemsize:
        return None
    flags = a.flags
    c = flags.c_contiguous
    if a.size:
        if c:
            hi = lo + a.nbytes
        else:
            lo, hi = byte_bounds(a)
        mem = data.mem
        if type(mem).__name__ != "UnownedMemory":  # foreign memory: its extent is the wrapper's word (arrays.py)
            start, size = getattr(mem, "ptr", None), getattr(mem, "size", None)
            if type(start) is not int or type(size) is not int or lo < start or hi > start + size:
                return None
        device.append((lo, hi))
    return type(a), a.dtype, a.shape, a.strides, c, flags.f_contiguous, a.device.id


def _apart(ranges: list) -> bool:
    """Whether no two of these [lo, hi) byte ranges meet: then no two arrays alias or overlap, as
    binding._aliases would find. Arrays whose ranges meet are decided in full (exact aliasing merges them,
    strided ones may interleave without sharing a byte)."""
    if len(ranges) < 2:
        return True
    ranges = sorted(ranges)
    for (_, hi), (lo, _) in zip(ranges, ranges[1:]):
        if lo < hi:
            return False
    return True
