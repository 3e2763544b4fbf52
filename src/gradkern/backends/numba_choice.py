"""The CPU backend's code shape chosen by measurement (docs/performance.md#parallel-or-serial-by-measurement).

Whether a launch's parallel loop beats the same loop run by one thread depends on the machine and its load,
not on the kernel alone: on a 2-core VM a memory-bound stencil over 2^21 points ran faster serially than in
parallel (issue 33's measurement), and with other processes busy a parallel launch waited at its barrier,
15x the serial time (benchmarks/kernels/serial_choice.py). So an entry with a serial twin (numba_loops.py)
that a program launches many times at one size is timed both ways: after WARM launches of its parallel form,
it alternates the two for TRIALS timed launches each (the first of each untimed: the twin may compile),
keeps the serial form only where its median is below MARGIN times the parallel one's (with 3 trials and no
margin, a quiet run kept the serial form of a step that ran 2.1 ms so and 1.6 ms in parallel), and times
them again every EVERY launches, so a choice made under load is revisited when the load goes. Both forms
compute every value identically (the same chunks, the same order within each, the chunks' partial sums
combined alike), so the choice changes no result. GRADKERN_CHOOSE_SERIAL=0 keeps every large launch parallel.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any

ENABLED = os.environ.get("GRADKERN_CHOOSE_SERIAL", "1") != "0"
WARM = 8  # launches of one entry and size before any trial: one-off launches never compile the twin
TRIALS = 5  # timed launches of each form per trial
MARGIN = 0.9  # the serial form is kept only when its median is below this fraction of the parallel one's
EVERY = 512  # launches between trials


@dataclass
class _Choice:
    entry: Any  # kept so that the id in the key stays this entry's
    launches: int = 0
    serial: bool = False
    times: dict[bool, list[float]] = field(default_factory=lambda: {False: [], True: []})


class SerialChoice:
    """Per entry and launch size (threads, to a power of two): run the parallel entry or its serial twin."""

    def __init__(self):
        self._choices: dict[tuple[int, int], _Choice] = {}

    def pick(self, entry: Any, threads: int) -> tuple[bool, _Choice | None]:
        """(run serially?, the record to `report` this launch's time to, or None when it is not timed)."""
        key = (id(entry), threads.bit_length())
        choice = self._choices.get(key)
        if choice is None or choice.entry is not entry:
            choice = self._choices[key] = _Choice(entry)
        choice.launches += 1
        if choice.launches <= WARM:
            return False, None
        phase = (choice.launches - WARM - 1) % EVERY
        if phase >= 2 * (TRIALS + 1):
            return choice.serial, None
        serial = phase % 2 == 1
        return serial, choice if phase >= 2 else None

    @staticmethod
    def report(choice: _Choice, serial: bool, seconds: float) -> None:
        """A timed trial launch took `seconds`; once both forms have TRIALS, the faster is kept."""
        choice.times[serial].append(seconds)
        if all(len(t) >= TRIALS for t in choice.times.values()):
            choice.serial = statistics.median(choice.times[True]) < MARGIN * statistics.median(choice.times[False])
            choice.times = {False: [], True: []}

    def chosen(self) -> dict[tuple[int, int], bool]:
        """(id of the entry, threads' bit length) -> serial?, for every entry past its first trial."""
        return {k: c.serial for k, c in self._choices.items() if c.launches > WARM + 2 * (TRIALS + 1)}


CHOICE = SerialChoice()
