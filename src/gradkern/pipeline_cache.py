"""The pipeline's output kept on disk (docs/caching.md, "The pipeline's output"), so that a warm cache's first
call in a fresh process loads its specialisation instead of running the frontend's IR through the analyses,
transforms and backend printing again (0.4-2 s of CPU for a large gradient, session 51).

`specialization(kind, args, build, directory)` returns what `build()` (one of pipeline.specialize,
specialize_reverse, specialize_forward on `args`) returns: from `directory` where an entry of its key is
there and whole, else built and stored. The key is a digest of everything the output is a function of:

* `args` whole, by value (the frontend's IR of the kernel with its location, the types, the launch rank, the
  backend, strides, aliases, activity, lanes), written by a deterministic pickler (sets by sorted content,
  dataclasses by their fields: a memo in an object's __dict__ is no field), the kernel's part once per process;
* every GRADKERN_* environment variable but those that choose no code (`_NOT_CODE`);
* gradkern's Python files (their paths, sizes and times of change, once per process), the gradkern and Python
  versions, where Numba is installed and when, and this cache's FORMAT;
* every module-level constant (a number, string, bool or a tuple of them) of the modules the pipeline runs
  (`_SCANNED`), by value: the options tests and benchmarks set (pipeline.FOLD, numba_loops.OUTLINE_STATEMENTS).
  Anything else at module level must be the object the module had when this module was imported, and a public
  table (DERIVATIVES) must hold the same items, and the modules' classes the same methods: a function, class
  or method replaced, a rule replaced in place (a test's monkeypatch) makes the call bypass the disk (no read,
  no write).

A file is `seal(pickle((FORMAT, key, value)))`; one that does not unseal, unpickle or carry its key is damage:
discarded, rebuilt and rewritten with one CacheWarning naming it, as every gradkern cache file
(backends/cache_files.py). What an entry leaves out is rebuilt lazily by the full pipeline: a reverse
specialisation's roles not yet printed (each stored when first printed), a bounds-checked variant.
"""

from __future__ import annotations

import contextlib
import copyreg
import dataclasses
import functools
import gc
import hashlib
import importlib
import importlib.util
import io
import os
import pickle
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

from . import pipeline
from ._version import __version__
from .backends.cache_files import discard, make_folders, read_file, replace_with, seal, unseal, warn_damaged

FORMAT = "gradkern-specs-1"
# GRADKERN_PIPELINE_CACHE=0 runs the pipeline at every first call of a process (for measuring, and a way back)
ENABLED = os.environ.get("GRADKERN_PIPELINE_CACHE", "1") != "0"
# GRADKERN_* variables that choose no generated code: where files go, how many compile workers run
_NOT_CODE = frozenset({"GRADKERN_CACHE_DIR", "GRADKERN_COMPILE_WORKERS", "GRADKERN_PIPELINE_CACHE"})
# the packages whose modules the pipeline runs (their module-level names are part of the key or must be unchanged)
_SCANNED = ("gradkern.analysis.", "gradkern.transforms.", "gradkern.ir.", "gradkern.backends.")
_SCANNED_MODULES = frozenset({"gradkern.pipeline", "gradkern.intrinsics", "gradkern.environment", "gradkern.backends",
                              "gradkern.ir", "gradkern.analysis", "gradkern.transforms"})
# each backend's printing modules beyond those the pipeline imports: part of its key, imported (as printing would)
# and recorded when its first key is made (not at `import gradkern`: 45 ms, mostly for backends a process never uses)
_PRINTERS = {"cpu": ("printer", "numba_cpu", "numba_choice", "numba_loops", "numba_plan", "numba_syntax",
                     "numba_names"),
             "cuda": ("printer", "cuda"), "hostcuda": ("printer", "cuda", "hostcuda"), "interp": ("interp",)}

runs: dict[str, int] = {}  # pipeline runs of this process by kind ("primal", "reverse", "forward"): tests count them
loads: dict[str, int] = {}  # specialisations loaded from disk by kind
_unusable: set[Path] = set()  # directories a write failed in (the Numba cache warns about the directory once)
_lock = threading.Lock()


# ---- the key -----------------------------------------------------------------------------------------------------

class _KeyPickler(pickle.Pickler):
    """A pickler whose bytes depend on values alone: dataclasses by their fields (no memo kept in __dict__), sets
    and dicts in sorted order (`_canon`: not PYTHONHASHSEED's). Its memo of objects met before stays on (the
    frontend shares objects alike in every process; a class named once: a third of the bytes, 9 ms, not 13, for
    the largest ported kernel); a difference in sharing would make another key, a miss, never a wrong hit."""

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        names = _fields(t)
        if names is not None:
            d = obj.__dict__
            # a set or dict directly in a field sorted; one deeper inside a tuple is pickled as it iterates (a
            # key that differs between processes: a miss, never a wrong hit), at half the cost of a full walk
            return t, tuple([_canon(v) if type(v) in _UNORDERED else v for v in map(d.__getitem__, names)])
        return NotImplemented


class _Set:
    """What a set stands for in a key's bytes (never made)."""


class _Dict:
    """What a dict stands for in a key's bytes (never made)."""


def _canon(v: Any) -> Any:
    """`v` with its sets and dicts (outside dataclasses, which the pickler reduces) as sorted tuples."""
    t = type(v)
    if t is tuple or t is list:
        return tuple([_canon(x) for x in v]) if any(type(x) in _CONTAINERS for x in v) else v
    if t is set or t is frozenset:
        items = [_canon(x) for x in v]
        return _Set, tuple(sorted(items) if all(type(x) is str for x in items) else sorted(items, key=_bytes))
    if t is dict:
        return _Dict, tuple(sorted(((_canon(k), _canon(x)) for k, x in v.items()), key=lambda kv: _bytes(kv[0])))
    return v


_CONTAINERS = (tuple, list, set, frozenset, dict)
_UNORDERED = (set, frozenset, dict)


def _bytes(obj: Any) -> bytes:
    f = io.BytesIO()
    p = _KeyPickler(f, protocol=5)
    p.fast = False
    p.dump(_canon(obj))
    return f.getvalue()


@functools.cache
def _fields(cls: type) -> tuple[str, ...] | None:
    """The field names of dataclass `cls` (None for any other class)."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


_MEMO = "_gk_key_digest"  # a kernel's digest kept in its __dict__ (no field: as ir/indices.py keeps its memo)


def _kernel_digest(k: Any) -> bytes:
    found = k.__dict__.get(_MEMO)
    if found is None:
        found = k.__dict__[_MEMO] = hashlib.blake2b(_bytes(k), digest_size=32).digest()
    return found


_CONSTANT = (int, float, str, bool, bytes, type(None))


def _constant(v: Any) -> bool:
    return isinstance(v, _CONSTANT) or (type(v) in (tuple, frozenset) and all(_constant(x) for x in v))


# the pipeline's modules (_SCANNED), recorded when this module is imported (a backend's printers when its first key
# is made): name -> (module, its module-level names that are no constants, with their objects then). What else loads
# later (numba_cache.py) only compiles and runs code: no part of the key
_snapshot: dict[str, tuple[Any, dict[str, Any]]] = {}
_common: list[str] = []  # the modules recorded at import, in the key of every backend
# the public tables among them (a dict, list or set whose name has no leading underscore: DERIVATIVES, FUNCTIONS),
# copied then: changed in place (a rule replaced), they bypass the disk too. A private one is a cache (_modules)
_tables: list[tuple[Any, Any]] = []


# per module, its classes with their methods then (functions, static/class methods, properties): a method
# replaced on a class (a test's monkeypatch of CudaSyntax.index) bypasses the disk too
_methods: dict[str, list[tuple[type, dict[str, Any]]]] = {}
_CODE = (FunctionType, staticmethod, classmethod, property)


def _code_of(cls: type) -> dict[str, Any]:
    return {k: v for k, v in vars(cls).items() if isinstance(v, _CODE)}


def _record(name: str, module: Any) -> None:
    _snapshot[name] = (module, {k: v for k, v in vars(module).items() if not _constant(v)})
    _methods[name] = [(c, _code_of(c)) for c in vars(module).values()
                      if isinstance(c, type) and c.__module__ == name]
    _tables.extend((v, type(v)(v)) for k, v in vars(module).items()
                   if type(v) in (dict, list, set) and not k.startswith("_"))


def _modules(backend: str) -> list[str]:
    names = [f"gradkern.backends.{m}" for m in _PRINTERS.get(backend, ())]
    for name in names:
        if name not in _snapshot:
            _record(name, importlib.import_module(name))
    return _common + names


def _ours(v: Any) -> bool:
    """Whether function or class `v` comes from gradkern, the standard library or an installed package (a printer
    recorded late may have been patched before: a test's replacement is defined in the test's file)."""
    if isinstance(v, FunctionType):
        file = v.__code__.co_filename
    elif isinstance(v, type):
        file = getattr(sys.modules.get(v.__module__), "__file__", None)
        if file is None:  # a builtin class
            return True
    else:
        return True
    return file.startswith(_INSTALLED)


def _method_ours(cls: type, f: Any) -> bool:
    """`_ours` for a method of `cls`; the methods `dataclasses` writes for it (compiled from "<string>") are."""
    generated = isinstance(f, FunctionType) and f.__code__.co_filename == "<string>" \
        and f.__qualname__.startswith(cls.__qualname__ + ".")
    return generated or _ours(f)


_INSTALLED = tuple({str(Path(__file__).resolve().parent) + os.sep,
                    *(str(Path(p).resolve()) + os.sep for k, p in sysconfig.get_paths().items()
                      if k in ("stdlib", "platstdlib", "purelib", "platlib"))})


def _options(backend: str) -> bytes | None:
    """The module-level constants of the pipeline's modules (and `backend`'s printers) by value; None where
    anything else at module level is not what it was when recorded (replaced: the output may differ from what
    the key says) or, in a printer, is a function defined outside gradkern."""
    out = []
    for name in _modules(backend):
        module, objects = _snapshot[name]
        late = name not in _common
        for k, v in vars(module).items():
            if _constant(v):
                out.append((name, k, v))
            elif objects.get(k, _Set) is not v and not k.startswith("__") and type(v) is not ModuleType:
                return None  # (a submodule imported since is set on its package)
            elif late and not _ours(v):
                return None
        for cls, code in _methods[name]:
            now = _code_of(cls)
            if len(now) != len(code) or any(code.get(k, _Set) is not v for k, v in now.items()):
                return None
            if late and not all(_method_ours(cls, getattr(v, "__func__", v)) for v in now.values()
                                if not isinstance(v, property)):
                return None
    for table, copy in _tables:
        if len(table) != len(copy) or (any(table.get(k, _Set) is not v for k, v in copy.items())
                                       if type(copy) is dict else table != copy):
            return None
    return _bytes(tuple(out))


def tree_digest(root: Path) -> bytes:
    """A digest of the Python files under `root`: their paths, sizes and times of change, as Python checks a
    .pyc against its source (reading them all cost 14 ms on the loaded machine, beside 2 ms)."""
    h = hashlib.blake2b(digest_size=32)
    for path in sorted(root.rglob("*.py")):
        info = path.stat()
        h.update(f"{path.relative_to(root)}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return h.digest()


@functools.cache
def _sources() -> bytes:
    """A digest of every gradkern module's source and the versions the output depends on (once per process)."""
    h = hashlib.blake2b(tree_digest(Path(__file__).resolve().parent), digest_size=32)
    # Numba's version, as where it is installed and when (importlib.metadata's lookup cost 27 ms; the generated
    # source does not depend on it, and Numba's own cache checks its version itself)
    found = importlib.util.find_spec("numba")
    numba = (found.origin, os.stat(found.origin).st_mtime_ns) if found is not None and found.origin else None
    h.update(repr((FORMAT, __version__, sys.version_info[:3], numba)).encode())
    return h.digest()


def key(kind: str, args: tuple) -> str | None:
    """The digest naming `kind`'s output for `args` (module doc), or None where it may not be cached."""
    if not ENABLED or os.environ.get("GRADKERN_DUMP"):  # a dump is written by the stages as they run
        return None
    options = _options(args[3])  # the backend's name: the third of each pipeline's arguments after the kernel
    if options is None:
        return None
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("GRADKERN_") and k not in _NOT_CODE))
    try:
        rest = _bytes((kind, args[1:], env))
    except (pickle.PicklingError, TypeError, AttributeError):  # something the key cannot hold by value
        return None
    h = hashlib.blake2b(digest_size=32)
    for part in (_sources(), _kernel_digest(args[0]), rest, options):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


# ---- the entries -------------------------------------------------------------------------------------------------

class _Table(dict):
    """The stored pickler's reducers by class: a dataclass by its fields alone (a memo in its __dict__, such as
    ir/indices.py's, is not stored), a callable field (bounds_checked, make) or a lock as None."""

    def __missing__(self, cls: type) -> Any:
        names = _fields(cls)
        if names is None:
            raise KeyError(cls)

        def reduce(obj: Any) -> tuple:
            d = obj.__dict__
            return copyreg.__newobj__, (cls,), {n: _stored_field(d[n]) for n in names}
        self[cls] = reduce
        return reduce


def _stored_field(v: Any) -> Any:
    if callable(v) and not isinstance(v, type) or isinstance(v, type(_lock)):
        return None
    return v


def _dumps(value: Any) -> bytes:
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=5)
    p.dispatch_table = _Table()
    p.dump(value)
    return f.getvalue()


def _path(directory: Path, digest: str) -> Path:
    return directory / f"{digest}.spec"


def _store(directory: Path, digest: str, value: Any) -> None:
    """Write the entry (atomically); a directory that cannot be written keeps nothing for the process."""
    if directory in _unusable:
        return
    try:
        data = seal(_dumps((FORMAT, digest, value)))
    except Exception:  # noqa: BLE001  something that cannot be pickled: not stored, the call goes on
        return
    try:
        # v<version>/specs: gradkern's folders, healed where no folder (a file, a link to itself: one CacheWarning);
        # a mkdir alone failed on them for good and the process, and every one after it, ran the pipeline silently
        make_folders(directory, owned=2)
        path = _path(directory, digest)
        if path.is_dir() and not path.is_symlink():
            discard(path)
        replace_with(path, lambda tmp: tmp.write_bytes(data))
    except OSError:  # the Numba cache warns about this directory once; the pipeline just runs again
        _unusable.add(directory)


def _load(kind: str, directory: Path, digest: str) -> Any:
    """The stored value of `digest`, or None: none there (a miss), or damage (discarded, one CacheWarning)."""
    path = _path(directory, digest)
    try:
        data = read_file(path)
    except (FileNotFoundError, NotADirectoryError):  # none there, or a cache directory that cannot be used
        return None
    except OSError as e:
        try:
            os.lstat(path)
        except OSError:  # the entry is not what failed: the directory is (the Numba cache warns about it once)
            return None
        return _damaged(path, f"{type(e).__name__}: {e}")
    try:
        fmt, stored_key, value = pickle.loads(unseal(data))
    except Exception as e:  # a truncated, flipped or foreign file: whatever unpickling it raises
        return _damaged(path, f"{type(e).__name__}: {e}")
    if fmt != FORMAT or stored_key != digest:
        return _damaged(path, "another key's entry")
    if not _whole(kind, value):  # sealed and keyed, yet not what the pipeline returns: a crafted or foreign value
        return _damaged(path, f"a {type(value).__name__} where a {_KINDS[kind].__name__} goes")
    return value


def _whole(kind: str, value: Any) -> bool:
    """Whether `value` has the classes `kind`'s pipeline returns (the specialisations inside it included)."""
    return type(value) is _KINDS[kind] and all(type(s) is pipeline.Specialization for s in _specs_in(value))


def _damaged(path: Path, what: str) -> None:
    try:
        discard(path)
    except OSError:  # a directory that cannot be written: the entry is rewritten (or not) after the pipeline
        pass
    warn_damaged(path, what)
    return None


_KINDS = {"primal": pipeline.Specialization, "reverse": pipeline.ReverseSpecialization,
          "forward": pipeline.ForwardSpecialization}


# ---- wiring a loaded value back up -------------------------------------------------------------------------------

def _specs_in(value: Any) -> list:
    if isinstance(value, pipeline.ReverseSpecialization):
        return [value.primal, *value.made.values()]
    if isinstance(value, pipeline.ForwardSpecialization):
        return [value.primal, value.tangent]
    return [value]


def _wire(kind: str, value: Any, build: Callable[[], Any], directory: Path, digest: str) -> Any:
    """Give a loaded (or built) value what no file holds: the lazily built parts, from one full pipeline run."""
    full = functools.cache(lambda: _built(kind, build))
    for spec in _specs_in(value):
        if spec.bounds is not None and spec.bounds_checked is None:
            object.__setattr__(spec, "bounds_checked", functools.cache(lambda: _primal_of(full()).bounds_checked()))
    if isinstance(value, pipeline.ReverseSpecialization):
        object.__setattr__(value, "lock", threading.Lock())
        _keep_roles(value, lambda role: full().role(role), directory, digest)
    return value


def _primal_of(value: Any) -> Any:
    return value if isinstance(value, pipeline.Specialization) else value.primal


def _keep_roles(rs: Any, make: Callable[[str], Any], directory: Path, digest: str) -> None:
    """Make each role of `rs` printed from now on stored with the entry (its printing is lazy: pipeline.py)."""
    def stored_make(role: str) -> Any:
        spec = make(role)
        _store(directory, digest, pipeline.ReverseSpecialization(**{
            **{f: getattr(rs, f) for f in _fields(type(rs))}, "made": {**rs.made, role: spec}}))
        return spec
    object.__setattr__(rs, "make", stored_make)


def _built(kind: str, build: Callable[[], Any]) -> Any:
    with _lock:
        runs[kind] = runs.get(kind, 0) + 1
    return build()


def specialization(kind: str, args: tuple, build: Callable[[], Any], directory: Path) -> Any:
    """`build()`'s value (the pipeline of `kind` on `args`, `args[0]` the frontend's kernel): loaded from
    `directory` where stored there, else built and stored (module doc)."""
    with _no_collection():
        digest = key(kind, args)
        value = None if digest is None else _load(kind, directory, digest)
    if digest is None:
        return _built(kind, build)
    if value is not None:
        with _lock:
            loads[kind] = loads.get(kind, 0) + 1
        return _wire(kind, value, build, directory, digest)
    value = _built(kind, build)
    if isinstance(value, pipeline.ReverseSpecialization):  # stored as its roles are printed
        _keep_roles(value, value.make, directory, digest)
    else:
        _store(directory, digest, value)
    return value


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector paused: unpickling a large specialisation makes tens of thousands of objects,
    none in a cycle, and the collections they set off (a full one scans every object the process holds: Numba's
    too) took 20-40 ms of a 60 ms load on the loaded 2-core machine."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _init() -> None:
    for name, module in sorted(sys.modules.items()):
        if module is not None and (name.startswith(_SCANNED) or name in _SCANNED_MODULES):
            _record(name, module)
            _common.append(name)


_init()
