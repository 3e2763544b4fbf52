"""The three checks every round of ported host loops runs per port (tests/program/test_ported_loops.py and
test_ported_loops3.py to test_ported_loops7.py), made by `port_tests` for a round's file: its gradient by finite
differences and the dot-product test on the interpreter, the same on Numba for a sample (the others `full`), and
its checkpointed loop's gradient against the store-all program's, on the interpreter (docs/testing.md "Test time").

The checks themselves stay in the round files that own them (`_check_against_differences` in test_ported_loops.py,
`_same_gradients` in test_ported_solvers.py) and are passed in; this module holds only the tests' shells.
`tests/support/ported_loops.py` (session 55's loops round) is a separate helper for the new round's loops."""

import numpy as np
import pytest

from support.ported_harness import numba_sampled, on_interpreter


def port_tests(specs, numba_sample, check, same, *, loop=None, checkpointable=None, ports=None):
    """The round's tests, for its file's namespace (`globals().update(port_tests(...))`).

    `specs(rng)` -> {name: (entry, spec)}: `entry(loop)` is the port's program when `loop` (the plain time loop) is
    given, else `entry` is the program. `check(program, spec, rng)` checks a gradient; `same(entry, spec)` the
    checkpointed twin against store-all: of each port's `entry` (`loop` given), or of `checkpointable[name]` for the
    names it holds. `ports`: the parameters (pytest.param for a port marked `full`), default every name.

    * test_port_gradient_matches_finite_differences: every port, on the interpreter;
    * test_port_gradient_on_numba_matches_finite_differences: `numba_sample` in CI, the others `full`;
    * test_port_checkpointed_gradient_equals_store_all: on the interpreter."""
    ports = ports if ports is not None else list(specs(np.random.default_rng(0)))

    def program(name):
        entry, spec = specs(np.random.default_rng(1))[name]
        return (entry if loop is None else entry(loop)), spec

    def port_gradient(name):
        run, spec = program(name)
        check(run, spec, np.random.default_rng(7))

    @pytest.mark.parametrize("name", ports)
    def test_port_gradient_matches_finite_differences(name, monkeypatch):
        on_interpreter(monkeypatch)
        port_gradient(name)

    @pytest.mark.parametrize("name", numba_sampled(ports, numba_sample))
    def test_port_gradient_on_numba_matches_finite_differences(name):
        port_gradient(name)

    @pytest.mark.parametrize("name", ports if checkpointable is None else sorted(checkpointable))
    def test_port_checkpointed_gradient_equals_store_all(name, monkeypatch):
        """gk.checkpointed_loop(step, nsteps, snapshots=2) around the port's loop: the store-all gradient (the same
        kernels on the same values; atomic sums may add in another order) and the same primals."""
        on_interpreter(monkeypatch)
        entry, spec = specs(np.random.default_rng(2))[name]
        same(entry if checkpointable is None else checkpointable[name], spec)

    return {f.__name__: f for f in (test_port_gradient_matches_finite_differences,
                                    test_port_gradient_on_numba_matches_finite_differences,
                                    test_port_checkpointed_gradient_equals_store_all)}
