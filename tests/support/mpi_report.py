"""The per-rank report of an MPI case script (mpi_cases.py, mpi_cases6.py, mpi_cases_hangs.py): each case run in turn,
OUT/rank<r>.json written as {case: "ok" or its traceback}; a failing case is written and re-raised, so that under
`python -m mpi4py` the whole job aborts instead of leaving the other ranks waiting."""

from __future__ import annotations

import json
import os
import time
import traceback


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
