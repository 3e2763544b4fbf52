"""The deadline on gradkern.mpi's waits (docs/distributed.md#a-deadline-on-every-wait): the hangs no check can see,
each caught on the rank that waits after a 2 s deadline (tests/support/mpi_cases_deadline.py, on 2 ranks, on the
interpreter: no kernel compiled per rank), and control communicators freed with their last grid. The deadline is the
thing under test, so each hanging job takes ~2 s of wall time asleep (its polls back off): CI runs two (the making of
a control, and a halo's message with a program's end), the others are marked `full`. In-process: the setting's
refusals, and a wait that passes its deadline on one rank (0.2 s). Skipped, with the reason, without mpi4py or
mpiexec."""

from __future__ import annotations

import numpy as np
import pytest

from .test_mpi import job_failures, pytestmark  # noqa: F401  (the same skips: no mpi4py, no mpiexec)

ENV = {"GRADKERN_BACKEND": "interp", "GRADKERN_MPI_TIMEOUT": "60"}


@pytest.mark.parametrize("cases", [
    ("controls_freed", "checks_first_extra_exchange"),
    ("allreduce_loop_no_grid",),
    pytest.param(("no_call_on_one_rank",), marks=pytest.mark.full),
    pytest.param(("rank_sets",), marks=pytest.mark.full),
    pytest.param(("loop_outside_program",), marks=pytest.mark.full),
], ids=lambda cases: "+".join(cases))
def test_hangs_caught_after_the_deadline(tmp_path, cases):
    """Every case passes on both ranks: each rank that waits raises DistributedError within the deadline, naming
    where it waits; the job then ends (a hang would fail at the timeout instead)."""
    failures = job_failures(2, "mpi_cases_deadline.py", tmp_path, 90, ENV, list(cases))
    assert not failures, "\n".join(failures)


def test_the_setting_refuses_what_is_not_a_number_of_seconds():
    MPI = pytest.importorskip("mpi4py.MPI")  # noqa: F841  (initialised before gradkern.mpi, as a script would)
    import gradkern.mpi as gkm
    before = gkm.get_timeout()
    for bad in (-1.0, float("nan"), float("inf"), "2", True):
        with pytest.raises(gkm.DistributedError, match="seconds must be a number of seconds > 0"):
            gkm.set_timeout(bad)
        assert gkm.get_timeout() == before  # nothing changed
    assert gkm.set_timeout(None) == before and gkm.get_timeout() is None
    assert gkm.set_timeout(0) is None and gkm.get_timeout() is None  # 0: no deadline, as GRADKERN_MPI_TIMEOUT=0
    assert gkm.set_timeout(before) is None and gkm.get_timeout() == before


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    pytest.importorskip("mpi4py.MPI")
    from gradkern import ConfigurationError
    from gradkern.mpi import deadline
    for bad in ("soon", "-3", "nan"):
        with pytest.raises(ConfigurationError, match=f"GRADKERN_MPI_TIMEOUT must be .* got '{bad}'"):
            deadline._parse(bad, deadline.ENV)
    assert deadline._parse("off", deadline.ENV) is None and deadline._parse(" 2.5 ", deadline.ENV) == 2.5


def test_a_wait_past_its_deadline_raises_and_breaks_its_owner():
    """A receive nobody sends (one process): DistributedError naming the wait, its owner marked broken and every
    later call on it refused; the abandoned request kept for MPI (then cancelled here, to leave the process clean)."""
    MPI = pytest.importorskip("mpi4py.MPI")
    import gradkern.mpi as gkm
    from gradkern.mpi import deadline

    class Owner:
        broken = None

    comm, owner, got = MPI.COMM_SELF.Dup(), Owner(), np.zeros(3)
    previous = gkm.set_timeout(0.2)  # the thing under test: a deadline that passes
    try:
        with pytest.raises(gkm.DistributedError, match=r"rank \d+ waited 0\.\d s in a receive nobody sends; the "
                                                       r"other ranks did not arrive within the deadline \(0\.2 s\)"):
            deadline.wait([comm.Irecv(got, source=0, tag=7)], owner, lambda: "a receive nobody sends")
    finally:
        gkm.set_timeout(previous)
    assert owner.broken and "a receive nobody sends" in owner.broken
    with pytest.raises(gkm.DistributedError, match="grid.exchange on this rank: an earlier wait"):
        deadline.refuse_if_broken(owner, "grid.exchange")
    requests, kept = deadline._abandoned.pop()
    assert kept == () and len(requests) == 1
    requests[0].Cancel()
    requests[0].Wait()
    comm.Free()
