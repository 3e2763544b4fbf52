"""The disk cache of generated Numba modules, and how it heals.

Each generated module lives at `<directory>/gradkern_gen_<hash>.py`; Numba's
`cache=True` keeps its machine code beside it, in
`__pycache__/<module>.<entry>-<line>.pyXY.nbi` (the index) and `.<n>.nbc`
(data). A killed process, a full disk or a stray tool can leave any of these
damaged. The rules:

* a damaged entry (a source file that is not what gradkern wrote, an index or
  data file whose checksum does not match (cache_files.seal), that does not load
  or cannot be replaced, a directory or a dangling link where a file goes, a file
  where a folder goes) is discarded and rebuilt, with one `CacheWarning` naming
  the file;
* a cache directory that cannot be created or written falls back to memory
  (Numba without its disk cache) for the rest of the process, with one
  `CacheWarning` naming the directory.

Several processes may share a cache: every write is a temporary file moved in
place with `os.replace`, a data file is named by its signature and written
before the index that points to it, and a discard tolerates files another
process removed first, so the worst a race costs is one more compile. (Numba
numbers data files in the order the index it read lists them: two processes
that both read the index before either saved it would put two signatures' code
in one file, and the index left behind could name the other signature's code,
failing every later process that loads it.)
"""

from __future__ import annotations

import ast
import contextlib
import glob
import hashlib
import importlib.util
import io
import linecache
import marshal
import os
import pickle
import sys
import tempfile
import uuid
from pathlib import Path
from types import CodeType, ModuleType

from numba.core.caching import FunctionCache, IndexDataCacheFile
from numba.core.dispatcher import Dispatcher

from .base import Ahead
from .cache_files import discard, make_folders, read_file, replace_with, seal, unseal, warn, warn_damaged, write_exact

_memory_only: set[Path] = set()  # directories found unusable in this process

# What this process's disk-cached functions did, one "<module>.<function>" per signature: loaded from the
# cache, or compiled afresh (a miss or a damaged entry). A warm cache compiles nothing, whatever the
# process's PYTHONHASHSEED, since generated source depends only on the kernel and its signature
# (docs/caching.md; tests/backends/test_determinism.py reads these).
loaded: list[str] = []
compiled: list[str] = []


def load_module(name: str, source: str, directory: Path) -> ModuleType:
    """Execute the generated module `name` from `directory/name.py`, writing
    the file if it is missing or damaged; its njit functions load Numba's disk
    cache, healing damaged entries. Falls back to a module kept in memory
    when the directory is unusable."""
    if directory not in _memory_only:
        path = directory / f"{name}.py"
        try:
            _prepare(directory)
            write_exact(path, source.encode("utf-8"))
        except OSError as e:
            _memory_only.add(directory)
            warn(f"cannot use the cache directory {directory} ({e}); compiled code is kept in memory "
                  "for the rest of this process (set GRADKERN_CACHE_DIR to a writable directory)")
        else:
            mod = _execute(name, _code(source, path), str(path))
            for value in vars(mod).values():
                if isinstance(value, Dispatcher) and isinstance(value._cache, FunctionCache):
                    value._cache = _HealingCache(value.py_func)
            return mod
    filename = f"<gradkern {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return _execute(name, compile(_without_disk_cache(source), filename, "exec"), None)


def _code(source: str, path: Path) -> CodeType:
    """The code object of the generated module at `path`: compiled once, then kept sealed (cache_files.seal) as
    `__pycache__/<module>.<python>.code`, the marshalled code after a header naming this Python's bytecode
    (importlib's MAGIC_NUMBER), the module's path (its functions' co_filename, where Numba looks for their
    cache) and the source's digest; another header is a miss, a file that does not unseal or unmarshal is
    damage (rebuilt, one CacheWarning). Compiling a large module's text again cost more than loading Numba's
    code for it (53 ms for a 4,700-line gradient; docs/caching.md, "The pipeline's output")."""
    file = path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.code"
    header = b"".join((importlib.util.MAGIC_NUMBER, str(path).encode("utf-8", "surrogateescape"), b"\0",
                       hashlib.blake2b(source.encode("utf-8"), digest_size=32).digest()))
    try:
        payload = unseal(read_file(file))
        if payload[:len(header)] == header:
            return marshal.loads(payload[len(header):])
    except FileNotFoundError:
        pass
    except (OSError, ValueError, EOFError, TypeError) as e:  # what a damaged file raises (unseal: ValueError)
        discard(file)
        warn_damaged(file, f"{type(e).__name__}: {e}")
    code = compile(source, str(path), "exec")
    try:
        data = seal(header + marshal.dumps(code))
        replace_with(file, lambda tmp: tmp.write_bytes(data))
    except OSError:  # the next process compiles the text again
        pass
    return code


def _execute(name: str, code, file: str | None) -> ModuleType:
    """Run compiled module code as module `name`. Compiled from the text in
    hand (or its sealed code object, `_code`), not imported: no `.pyc` is written or read."""
    mod = ModuleType(name)
    if file is not None:
        mod.__file__ = file
    sys.modules[name] = mod
    exec(code, mod.__dict__)
    return mod


def _without_disk_cache(source: str) -> ast.Module:
    """The module with `cache=False` in its decorators: Numba refuses `cache=True`
    for a function whose source file does not exist."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "cache":
            node.value = ast.copy_location(ast.Constant(False), node.value)
    return tree


def _prepare(directory: Path) -> None:
    """Make `directory` and its `__pycache__` folders Numba can write into.
    A file where one of them goes is cache damage: removed. Raises OSError
    when the directory cannot be used."""
    make_folders(directory / "__pycache__", owned=3)  # v<version>/numba/__pycache__
    # Numba probes the same way; failing it, Numba would cache outside gradkern's directory
    tempfile.TemporaryFile(dir=directory / "__pycache__").close()


class _Damaged(Exception):
    """A cache file that exists but does not load."""

    def __init__(self, path: str, cause: BaseException):
        super().__init__(path, cause)
        self.path = path
        self.cause = cause


_FORMAT = "gradkern-nbc-3"  # what a data file holds: (_FORMAT, entry name, key, code); see _HealingCacheFile.load



class _HealingCacheFile(IndexDataCacheFile):
    """Numba's index and data files, except that one that exists but does not
    load raises `_Damaged` naming it (Numba lets the unpickling error escape,
    and takes a directory in place of a data file for a miss, then fails to
    write it), and that processes sharing them cannot mix up signatures (`save`)."""

    def __init__(self, cache_path, filename_base, source_stamp):
        super().__init__(cache_path, filename_base, source_stamp)
        self._filename_base = filename_base
        # an index of an earlier format (no checksum) reads as another Numba version's: a miss, silently
        self._version = f"{self._version} {_FORMAT}"

    def save(self, key, data):
        """Write the data file of `key` (the signature and target), then the index
        entry naming it. The file's name comes from the key, not from the index
        this process read, so a process that raced another one never points an
        index entry at code compiled for another signature; an index entry the
        other process overwrote costs one compile later. The data file holds the
        entry's name and key beside the code, which `load` checks."""
        data_name = self._name_of(key)
        self._save_data(data_name, (_FORMAT, self._filename_base, key, data))
        overloads = self._load_index()
        if overloads.get(key) != data_name:
            overloads[key] = data_name
            self._save_index(overloads)

    def load(self, key):
        """The code saved for `key`, or None (a miss). An index entry naming a file other than the key's (an
        entry of an older format) is a miss; a data file holding another entry's or signature's code (a file
        copied over it) is damage: loaded, it would run code compiled for other types or another kernel."""
        data_name = self._load_index().get(key)
        if data_name is None or data_name != self._name_of(key):
            return None
        try:
            stored = self._load_data(data_name)
        except OSError:  # removed since the index was read: Numba compiles afresh
            return None
        if not (isinstance(stored, tuple) and len(stored) == 4 and stored[0] == _FORMAT
                and stored[1] == self._filename_base and stored[2] == key):
            raise _Damaged(self._data_path(data_name), ValueError("it holds the code of another function or "
                                                                  "signature"))
        return stored[3]

    def _name_of(self, key) -> str:
        digest = hashlib.sha256(f"{_FORMAT} {key!r}".encode()).hexdigest()[:16]
        return f"{self._filename_base}.{digest}.nbc"

    def _load_index(self):
        """Numba's `_load_index`, the (stamp, overloads) pickle read through its checksum; a file that exists
        but is not whole raises `_Damaged` naming it."""
        try:
            with io.BytesIO(read_file(self._index_path)) as f:
                version = pickle.load(f)
                if version != self._version:
                    return {}  # another Numba version's (or an earlier format's): a miss
                stamp, overloads = pickle.loads(unseal(f.read()))
        except FileNotFoundError:
            return {}
        except Exception as e:
            raise _Damaged(self._index_path, e) from e
        return overloads if stamp == self._source_stamp else {}

    def _save_index(self, overloads):
        payload = seal(self._dump((self._source_stamp, overloads)))
        with self._open_for_write(self._index_path) as f:
            pickle.dump(self._version, f, protocol=-1)
            f.write(payload)

    def _load_data(self, name):
        path = self._data_path(name)
        try:
            data = read_file(path)
        except FileNotFoundError:
            raise  # removed since the index was read: Numba compiles afresh
        except Exception as e:
            raise _Damaged(path, e) from e
        try:
            return pickle.loads(unseal(data))
        except Exception as e:
            raise _Damaged(path, e) from e

    def _save_data(self, name, data):
        payload = seal(self._dump(data))
        with self._open_for_write(self._data_path(name)) as f:
            f.write(payload)

    @contextlib.contextmanager
    def _open_for_write(self, filepath):
        """Numba's write through a temporary file moved in place, except that the temporary file is removed
        whatever interrupts the write: Numba removes it on an Exception only, so a KeyboardInterrupt left
        `<file>.tmp.<uuid>` in the cache for good (docs/caching.md#damaged-entries)."""
        tmp = f"{filepath}.tmp.{uuid.uuid4().hex[:16]}"
        try:
            with open(tmp, "wb") as f:
                yield f
            os.replace(tmp, filepath)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


class _HealingCache(FunctionCache):
    """Numba's per-function disk cache that discards a damaged entry (its index
    and all its data files) and compiles afresh, with one CacheWarning.
    Installed in place of the dispatcher's `_cache` (Numba has no public hook
    for the cache class); tests/backends/test_cache.py fails if Numba's internals move."""

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = _HealingCacheFile(self._cache_path, self._impl.filename_base,
                                             self._cache_file._source_stamp)

    def load_overload(self, sig, target_context):
        name = f"{self._py_func.__module__}.{self._py_func.__qualname__}"
        try:
            found = super().load_overload(sig, target_context)
        except _Damaged as e:
            path, cause = e.path, e.cause
        except Exception as e:  # loaded but not rebuilt: the entry is unusable all the same
            path, cause = self._cache_file._index_path, e
        else:
            (compiled if found is None else loaded).append(name)
            return found
        self._discard_entry()
        warn_damaged(Path(path), f"{type(cause).__name__}: {cause}")
        compiled.append(name)
        return None  # a miss: Numba compiles, then saves a fresh entry

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
            return
        except Exception as e:  # e.g. a directory where the index or a data file goes
            cause = e
        path = getattr(cause, "filename2", None) or getattr(cause, "filename", None) or self._cache_file._index_path
        self._discard_entry()
        try:
            super().save_overload(sig, data)
        except Exception as e:
            warn(f"could not save compiled code to {path} ({e}); it is kept in memory for this process")
        else:
            warn_damaged(Path(path), f"{type(cause).__name__}: {cause}")

    def _discard_entry(self) -> None:
        """Remove the function's index and every data file it may refer to."""
        base = os.path.join(glob.escape(self._cache_path), glob.escape(self._impl.filename_base))
        for name in [*glob.glob(base + ".nbi"), *glob.glob(base + ".*.nbc")]:
            try:
                discard(Path(name))
            except OSError:
                pass  # left as it is: the save that follows reports what it cannot replace


def ahead(fn: Dispatcher, args: tuple) -> Ahead | None:
    """The request that compiles `fn` for `args`' types in a worker process (runtime/compile_pool.py), or
    None where nothing is to be gained: compiled in this process, kept in memory only, or in the disk
    cache already (loading it is the call's job). An index that does not load is left to the call, which
    heals it and warns (the worker would heal it silently)."""
    sig = tuple(fn.typeof_pyval(a) for a in args)
    if sig in fn.overloads:
        return None
    file = fn.py_func.__globals__.get("__file__")
    cache = fn._cache
    if file is None or not isinstance(cache, FunctionCache):
        return None
    try:
        index = cache._cache_file._load_index()
    except FileNotFoundError:
        index = {}
    except Exception:
        return None
    if cache._index_key(sig, fn.targetctx.codegen()) in index:
        return None
    return Ahead(str(Path(file).parent), fn.py_func.__module__, fn.py_func.__name__, sig)


def compile_ahead(request: Ahead) -> tuple[str, list[str]]:
    """Compile `request` in this (worker) process: the module is loaded from its file in the cache
    directory, the function compiled for the signature and saved by Numba's disk cache. Returns whether it
    was "compiled" or "loaded", and the CacheWarnings' messages, which the main process reissues."""
    import warnings

    from ..errors import CacheWarning

    directory = Path(request.directory)
    source = (directory / f"{request.module}.py").read_text("utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        mod = sys.modules.get(request.module) or load_module(request.module, source, directory)
        before = len(compiled)
        getattr(mod, request.function).compile(request.signature)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    return ("compiled" if len(compiled) > before else "loaded"), messages


def compile_here(request: Ahead) -> None:
    """Compile `request` in this process, where its module was loaded (numba_cpu.compile_source)."""
    getattr(sys.modules[request.module], request.function).compile(request.signature)
