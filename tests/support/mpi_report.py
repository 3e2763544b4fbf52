"""The per-rank report of an MPI case script (mpi_cases.py, mpi_cases6.py, mpi_cases_hangs.py): each case run in turn,
OUT/rank<r>.json written as {case: "ok" or its traceback}; a failing case is written and re-raised, so that under
`python -m mpi4py` the whole job aborts instead of leaving the other ranks waiting."""

from __future__ import annotations

import json
import os
import time
import traceback

import numpy as np


def refused(what: str, call, arrays: list, words: list, rank: int, error: type = Exception) -> str:
    """`call` raises `error` on this rank with a message naming `words`, and leaves `arrays` as they were; returns the
    message (MPI_HANGS_VERBOSE=1 prints it)."""
    before = [a.copy() for a in arrays]
    try:
        call()
    except error as e:
        message = str(e)
    else:
        raise AssertionError(f"{what}: not refused on rank {rank}")
    for a, b in zip(arrays, before):
        assert np.array_equal(a, b), f"{what}: an array changed on rank {rank}"
    if os.environ.get("MPI_HANGS_VERBOSE"):
        print(f"rank {rank}: {what}: {message}", flush=True)
    for word in words:
        assert word in message, f"{what}: {word!r} not in {message!r}"
    return message


def run_cases(cases: dict, out_dir: str, names: list[str], rank: int, timed: bool = False) -> None:
    """Run `cases` (name -> function) named in `names` (all when empty); `timed`: rank 0 prints each case's time."""
    report = {}
    path = os.path.join(out_dir, f"rank{rank}.json")
    for name in names or cases:
        try:
            start = time.perf_counter()
            cases[name]()
            report[name] = "ok"
            if timed and rank == 0:
                print(f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
        except Exception:  # noqa: BLE001  (reported per case; a rank that raised alone would hang the others)
            report[name] = traceback.format_exc()
            with open(path, "w") as f:
                json.dump(report, f)
            raise  # under python -m mpi4py: the whole job aborts instead of hanging
    with open(path, "w") as f:
        json.dump(report, f)
