"""Compiling ahead in worker processes (docs/compile-time.md, finding 7).

Numba compiles under one lock per process, so a gradient's kernels compile one after another. But the
generated modules are files in the cache directory, and Numba's disk cache is shared: a worker process can
compile a function there, and the main process loads it at the launch. A run (runtime/call.py `Run`) that is
known before it runs is submitted here (`submit`): the reverse runs of an augmented primal as soon as its
tape exists (a program's whole reverse sweep is known by the time recording ends), the later runs of a
fused `gk.autodiff`. At its first launch a run `settle`s its job: done, it loads from the cache; still
pending, the main process compiles it itself; running in a worker, the main process compiles other pending
jobs meanwhile (those needed soonest: the newest), then waits. Workers take the oldest pending job, which a
reverse sweep needs last.

GRADKERN_COMPILE_WORKERS sets the number of workers (default: the usable cores minus one, at most 4; 0
turns compiling ahead off). A worker is a fresh interpreter (backends/compile_worker.py), started at the
first submitted job and kept for the process's life. A worker that fails or dies costs nothing but the
time it took: the launch compiles what it needs in the main process, as without workers.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..backends import backend as backend_object
from ..backends import cache_warning, start_compile_worker
from ..environment import env_int

MAX_WORKERS = 4


def workers() -> int:
    """How many worker processes compile ahead (GRADKERN_COMPILE_WORKERS; 0: none)."""
    if os.environ.get("GRADKERN_COMPILE_WORKERS", "").strip():
        return max(0, env_int("GRADKERN_COMPILE_WORKERS", 0, minimum=None))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(MAX_WORKERS, cores - 1)


class Job:
    """One function to compile ahead: its request, the backend that compiles it here, its state
    ("pending", "sent" to a worker, "here": taken by the main process, "done") and the worker's outcome."""

    __slots__ = ("ahead", "backend", "rank", "state", "done", "outcome")

    def __init__(self, ahead: Any, backend: str, rank: int):
        self.ahead, self.backend, self.rank = ahead, backend, rank
        self.state = "pending"
        self.done = threading.Event()
        self.outcome: Any = None


_lock = threading.Condition()
_jobs: dict[tuple, Job] = {}
_pending: list[Job] = []  # in submission order
_workers: list = []  # backends.start_compile_worker() objects
_count = [0]
_broken = [0]  # workers that never became ready: after two, no more are started
stats = {"submitted": 0, "compiled": 0, "loaded": 0, "failed": 0, "here": 0, "waited": 0}


def submit(backend: str, code: Any, entry: Any, dim: tuple[int, ...], values: list) -> Job | None:
    """Queue the compile of what a launch of `code` over `dim` with `values` runs, unless there are no
    workers or nothing to compile (Backend.ahead). Returns the job the launch settles, or None."""
    n = workers()
    if n == 0:
        return None
    request = backend_object(backend).ahead(code, entry, dim, values)
    if request is None:
        return None
    key = (request.module, request.function, request.signature)
    with _lock:
        job = _jobs.get(key)
        if job is not None:
            return job if job.state != "done" else None
        _count[0] += 1
        job = _jobs[key] = Job(request, backend, _count[0])
        _pending.append(job)
        stats["submitted"] += 1
        _lock.notify()
        while len(_workers) < n and _broken[0] < 2:
            _start_worker()
    return job


def settle(job: Job) -> None:
    """Make sure `job` is compiled (or given up) before its launch: see the module's docstring. The
    CacheWarnings of a worker's compile are issued here, at the launch, as the launch would have."""
    _settle(job)
    outcome, job.outcome = job.outcome, None
    if outcome is not None and outcome[0] == "ok":
        for message in outcome[2]:
            cache_warning(message)


def _settle(job: Job) -> None:
    with _lock:
        mine = job.state == "pending"
        if mine:
            _pending.remove(job)
            job.state = "here"
    if mine:
        _compile_here(job)
        return
    while not job.done.is_set():
        with _lock:
            other = _pending.pop() if _pending else None
            if other is not None:
                other.state = "here"
        if other is None:
            stats["waited"] += 1
            job.done.wait()
            return
        _compile_here(other)


def wait_idle(timeout: float | None = None) -> bool:
    """Wait until no job is pending or in a worker (benchmarks, tests); False if `timeout` passed first
    or no worker is left to take the pending ones."""
    with _lock:
        jobs = [j for j in _jobs.values() if j.state != "done"]
    for job in jobs:
        with _lock:
            if job.state == "pending" and not _workers:
                return False
        if not job.done.wait(timeout):
            return False
    return True


def _compile_here(job: Job) -> None:
    try:
        backend_object(job.backend).compile_here(job.ahead)
        stats["here"] += 1
    except Exception:
        pass  # the launch compiles it again and raises what it raises
    finally:
        _finish(job, None)


def _finish(job: Job, outcome: Any) -> None:
    with _lock:
        job.state, job.outcome = "done", outcome
        if outcome is not None:
            stats[outcome[1] if outcome[0] == "ok" else "failed"] += 1
    job.done.set()


def _start_worker() -> None:
    """Start one worker process and the thread that feeds it (called holding the lock)."""
    worker = start_compile_worker()
    _workers.append(worker)
    threading.Thread(target=_serve, args=(worker,), name="gradkern-compile-worker", daemon=True).start()


def _serve(worker: Any) -> None:
    """Feed one worker the oldest pending job until it or the process ends. A job whose worker fails is
    done with nothing compiled (its launch compiles it); a dead worker is not replaced."""
    if not worker.ready():
        with _lock:
            _broken[0] += 1
        _retire(worker)
        return
    while True:
        with _lock:
            while not _pending:
                _lock.wait()
            job = _pending.pop(0)
            job.state = "sent"
        answer = worker.ask(job.ahead)
        if answer is None:
            _finish(job, ("error", "the worker ended"))
            _retire(worker)
            return
        _finish(job, answer)


def _retire(worker: Any) -> None:
    with _lock:
        if worker in _workers:
            _workers.remove(worker)
    worker.retire()


def _forget() -> None:
    """In a forked child: the parent's workers and their threads are not this process's."""
    global _lock
    _lock = threading.Condition()
    _jobs.clear()
    _pending.clear()
    _workers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
