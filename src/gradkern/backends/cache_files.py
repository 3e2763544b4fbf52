"""Files of gradkern's disk cache, written and healed the same way by every
backend that keeps compiled code on disk (numba_cache.py, hostcuda.py).

Every write is a temporary file moved in place with `os.replace`, so several
processes may share a cache; a file that is not what gradkern wrote is damage:
discarded and rebuilt, with one `CacheWarning` naming it (docs/caching.md).
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import sys
import threading
import warnings
from pathlib import Path

from ..errors import CacheWarning

SEAL = b"\0gradkern-blake2b-256\0"  # a sealed file: its payload, SEAL, then the payload's BLAKE2b digest
DIGEST = 32
_GRADKERN = str(Path(__file__).resolve().parent.parent) + os.sep
# Far above any file gradkern writes (Numba data files and hostcuda libraries are kilobytes to a few megabytes):
# a larger one is damage, not read (a sparse file of terabytes would exhaust memory).
MAX_BYTES = 1 << 30


def _regular(mode: int, path: Path) -> None:
    """OSError unless `mode` is a regular file's."""
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "a directory where a file should be", str(path))
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
            else "a socket" if stat.S_ISSOCK(mode) else "a special file"
        raise OSError(errno.EINVAL, f"{kind} where a regular file should be", str(path))


def read_file(path: Path) -> bytes:
    """The bytes of the regular file at `path` (a symbolic link followed). Anything else there raises OSError
    without being read: a FIFO (an open for reading blocked the process forever), a device (a link to
    /dev/zero read until memory ran out), a directory (IsADirectoryError), a file past MAX_BYTES; what is no
    regular file is never opened (a device's driver would run its open: a tape rewinds, a watchdog arms, a
    terminal becomes the process's controlling one), only looked at. Every cache
    file is read through here (docs/caching.md#damaged-entries); FileNotFoundError when there is none."""
    _regular(os.stat(path).st_mode, path)  # before the open: opening a device runs its driver's open
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        mode, size = info.st_mode, info.st_size
        _regular(mode, path)  # again: it may have been replaced since
        if size > MAX_BYTES:
            raise OSError(errno.EFBIG, f"{size} bytes, more than any cache file gradkern writes", str(path))
        with os.fdopen(fd, "rb") as f:
            fd = -1  # closed with f
            # at most what fstat said and a byte more (a file still growing reads short of its end, damage the
            # checksums find): read(MAX_BYTES + 1) allocated a GiB for every cache file it read
            return f.read(size + 1)
    finally:
        if fd >= 0:
            os.close(fd)


def write_exact(path: Path, data: bytes) -> None:
    """Write `data` to `path` unless it is already there, byte for byte; anything
    else there is damage, replaced. Raises OSError when it cannot be."""
    try:
        if read_file(path) == data:
            return
        damage = "not the source gradkern wrote"
    except FileNotFoundError:
        damage = None
    except IsADirectoryError:
        damage = "a directory where a file should be"
    except OSError as e:
        damage = f"{type(e).__name__}: {e}"
    if damage is not None:
        discard(path)
    replace_with(path, lambda tmp: tmp.write_bytes(data))
    if damage is not None:
        warn_damaged(path, damage)


def seal(payload: bytes) -> bytes:
    """`payload` followed by its checksum (docs/caching.md#checksums): what a cache file holds. A trailer, not
    a header, so that a library sealed this way is still an ELF file the dynamic loader maps from byte 0."""
    return payload + SEAL + hashlib.blake2b(payload, digest_size=DIGEST).digest()


def unseal(data: bytes) -> bytes:
    """The payload of `seal`'s bytes; ValueError when they are not whole (a byte changed, added or cut)."""
    end = len(data) - DIGEST - len(SEAL)
    if end < 0 or data[end:end + len(SEAL)] != SEAL:
        raise ValueError(f"it has no gradkern checksum ({len(data)} bytes)")
    if hashlib.blake2b(memoryview(data)[:end], digest_size=DIGEST).digest() != data[-DIGEST:]:
        raise ValueError(f"its checksum does not match its {end} bytes")
    return data[:end]


def replace_with(path: Path, write) -> None:
    """Call `write(tmp)` on a temporary path beside `path`, then move it in place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def make_folders(directory: Path, owned: int) -> None:
    """Make `directory`, whose last `owned` components are gradkern's (the version folder `v<version>` of the cache
    directory and those below it, docs/caching.md#damaged-entries): one of them that is no folder (a file, a
    link to nowhere or to itself) is damage, removed and made afresh with one CacheWarning. The folders above
    them are the user's (GRADKERN_CACHE_DIR and its parents): one that cannot be made raises OSError, touched."""
    folders = [directory.parents[k] for k in reversed(range(owned - 1))] + [directory]
    folders[0].parent.mkdir(parents=True, exist_ok=True)
    for folder in folders:
        try:
            folder.mkdir(exist_ok=True)
        except FileExistsError:  # something that is no folder (mkdir's exist_ok takes folders only)
            discard(folder)
            folder.mkdir()
            warn_damaged(folder, "a file where a folder should be")


def discard(path: Path) -> None:
    """Remove a file or a directory tree; another process may have removed it first."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _inside(file: str) -> bool:
    """Whether a frame's file belongs to gradkern or to Numba (whose cache machinery calls back into gradkern)."""
    path = str(Path(file).resolve())
    if path.startswith(_GRADKERN):
        return True
    numba = sys.modules.get("numba")
    origin = getattr(numba, "__file__", None)
    return origin is not None and path.startswith(str(Path(origin).resolve().parent) + os.sep)


def warn(message: str, prefix: str = "gradkern cache: ") -> None:
    """Warn once, at the user's line: the innermost frame outside gradkern and Numba. (A compile worker's
    warnings, already prefixed, are issued again in the main process with `prefix=""`.)"""
    frame, level = sys._getframe(0), 1
    while frame is not None and _inside(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"{prefix}{message}", CacheWarning, stacklevel=level)


def warn_damaged(path: Path, what: str) -> None:
    warn(f"{path} was damaged ({what}); discarded and rebuilt")
