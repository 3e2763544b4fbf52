"""Host code that writes an array out of the process while a program records (docs/host-code.md, "Files and
restarts"): `np.save(path, u)`, `np.savez`, `np.savez_compressed`, `np.savetxt`, `u.tofile(f)`, `pickle.dump(u,
f)`. What is read back (`u = np.load(path)`: a restart, as NPB's and CloverLeaf's drivers write one) is a plain
array that no launch recorded: a launch taking it dropped the derivative through everything before the save,
silently (a Jacobi loop saved and reloaded after its first step: a gradient missing that step, no error). Reading
a file is not seen (its bytes could come from anywhere), so the write is refused, before anything is written,
when the array depends on an active one; a restart kept in memory (`saved = u.copy()`, later `gk.copy(u,
saved)`) is differentiated, and `u.view(np.ndarray)` says that what is written (periodic output) needs no
derivative. gradkern's own writes (checkpoint snapshots on disk, schedule.py) are not host code."""

from __future__ import annotations

import linecache
import sys
from typing import Any

import numpy as np

from ..errors import ProgramError
from . import hostreads  # noqa: F401  (its __array_function__ first: _refuse_write counts frames from this one's)
from .derived import _NUMPY, _OURS
from .derived import user_frame as _user_frame
from .derived import where as _where
from .hostcode import TrackedArray, _arrays_in, _names, tracker

# the NumPy functions that write their arrays to a file (each dispatches on its arrays through __array_function__)
_WRITERS = ("save", "savez", "savez_compressed", "savetxt")


def _refuse_write(op: str, arrays: list, depth: int) -> None:
    """Refuse `op` writing `arrays` out of the process when one depends on an active array, inside a program,
    from host code (`depth`: how many frames up the caller is). NumPy's own calls are not host code: np.save
    of a plain view (passed, by the user's word) writes through `np.asanyarray(a).tofile(f)`, and asanyarray,
    wrapped while a program records (hostcalls.py), makes a tracked array of the plain view's active memory."""
    host = tracker()
    if host is None or not host.checking or sys._getframe(depth).f_code.co_filename.startswith((_OURS, _NUMPY)):
        return
    derived = [a for a in arrays if isinstance(a, np.ndarray) and host.derived(a)]
    if not derived:
        return
    frame = _user_frame()
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
    text = f" (`{line}`)" if line else ""
    raise ProgramError(f"`{op}` of {_names(frame, derived)} at {_where(frame)}{text} writes an array that depends "
                       "on an active one out of the program: what is read back (np.load, a restart) would be a "
                       "constant with no derivative through what came before, so nothing was written and no "
                       "shadow changed",
                       hint="keep a restart state in memory (saved = u.copy(), later gk.copy(u, saved): both "
                            "differentiated), or write u.view(np.ndarray) to say that no derivative through the "
                            "file is wanted (periodic output)")


_array_function = TrackedArray.__array_function__


def _array_function_files(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    if func.__name__ in _WRITERS:
        _refuse_write(f"np.{func.__name__}", _arrays_in(args) + _arrays_in(kwargs), 2)
    return _array_function(self, func, types, args, kwargs)


def _writer(name: str) -> Any:
    """ndarray's method `name` (tofile, pickling), refused as np.save is; otherwise TrackedArray's own."""
    method = getattr(TrackedArray, name)

    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_write(f"ndarray.{name.strip('_')}" if name == "tofile" else "pickling", [self], 2)
        return method(self, *args, **kwargs)
    write.__name__ = write.__qualname__ = name
    return write


TrackedArray.__array_function__ = _array_function_files
for _name in ("tofile", "__reduce__", "__reduce_ex__"):
    setattr(TrackedArray, _name, _writer(_name))
