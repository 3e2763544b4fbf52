"""Session 57's tenth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc10.py,
ported_hpc10_more.py; inputs in ported_hpc10_cases.py, NumPy references in ported_hpc10_refs.py). For each, as
test_ported_hpc9.py does:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums or contracts);
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound (NUMBA_SAMPLE), on
  hostcuda and the interpreter (the others but HOSTCUDA_FULL);
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs, on the interpreter in CI, on Numba for NUMBA_SAMPLE;
* the race analysis' verdicts, primal and reverse;
* (`full`) each reverse on hostcuda against Numba's, the same output adjoints.

CI: 10 primals (in float32 too), interpreter gradients and race verdicts, the programs' launches' verdicts and
racy mutants, the refused local-array read, rprj3 on hostcuda against the interpreter. Test CPU (the calls, one
process, cold caches, session 57 at load 6-7): 18.4 s, over the round's 10-s budget: the interpreter's reverse and
forward builds of 14 kernels and the race proofs (interp's eight strided writes cost 1,176 feasibility problems,
about 0.8 s a specialisation, paid for the float64 and float32 primals and the reverse each). `-m full`: Numba
(the primal agreement and gradients; j2_uat, rprj3 and integrate_system checked in session 57) and hostcuda for
the other nine.

What porting them found is in docs/kernel-language.md ("Tenth round (session 57)")."""

import math

import numpy as np
import pytest
from support import ported_hpc10 as A
from support.ported_harness import assert_reverse_on_hostcuda_agrees_with_numba, round_tests
from support.ported_hpc10_cases import PROGRAMS, cases

import gradkern as gk

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
NUMBA_SAMPLE = set()
HOSTCUDA_FULL = set(NAMES) - {"rprj3"}
RUNTIME_CHECKED = {"collide_d"}
ATOMIC = {}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, float32=True,
                             race_backend="interp", hostcuda_full=HOSTCUDA_FULL, least_checked=9))


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_reverse_on_hostcuda_agrees_with_numba(name):
    assert_reverse_on_hostcuda_agrees_with_numba(_case(name), PROGRAMS)


@gk.kernel
def _sw_pairs_without_atomics(x, f, n):
    """PairSW's two-body loop with Newton's third law written as the serial code writes it, f[j] -= ...: on a GPU
    two threads add into one atom's force."""
    i = gk.tid()
    for j in range(n):
        if j != i:
            d = x[i] - x[j]
            f[j] -= d
            f[i] += d


@gk.kernel
def _interp_unstrided(z, u):
    """interp's first write at u[i] instead of u[2 i]: neighbouring threads' fine points overlap."""
    i3, i2, i1 = gk.tid()
    u[i3, i2, i1] += z[i3, i2, i1]
    u[i3, i2, i1 + 1] += 0.5 * (z[i3, i2, i1 + 1] + z[i3, i2, i1])


def _xs_factor_by_l_value(k0rs, l_value, out):
    """RSBench's sigTfactors[pole.l_value] as C writes it: a local array read at an index from the data."""
    i = gk.tid()
    factors = gk.local((4,), gk.float64)
    for m in range(4):
        factors[m] = math.cos(2.0 * k0rs[m])
    out[i] = factors[l_value[i]]


def test_programs_kernels_race_verdicts():
    """The programs' launches, primal verdicts: SW's short list (a write in the thread's own row) and its forces (by
    atomics into f and eng), PBF's three loops and FT's two proved; axhelm's flat indices at a run-time Nq checked
    at run time. The run-time check refuses what races on a GPU (Newton's third law without atomics, interp's
    fine points unstrided) before any write."""
    c = {x[0]: x for x in cases(np.random.default_rng(5))}
    from support.ported import primal_values
    x, atype, tag, e3, params, neigh, numneigh, short, numshort, f, eng, cutmax_sq = primal_values(
        c["stillinger_weber"][2])
    ax = primal_values(c["axhelm"][2])
    pb = primal_values(c["pbf_substeps"][2])
    ft = primal_values(c["ft_evolve"][2])
    from support import ported_hpc10_more as B
    verdicts = {
        "sw_short_neighbors": (A.sw_short_neighbors, 5, (x, neigh, numneigh, cutmax_sq, short, numshort), (), False),
        "sw_compute": (A.sw_compute, 5, (x, atype, tag, e3, params, neigh, numneigh, short, numshort, f, eng),
                       ("eng", "f"), False),
        "axhelm_gradient": (A.axhelm_gradient, (3, 3, 3), tuple(ax[1:10]), (), True),
        "axhelm_divergence": (A.axhelm_divergence, (3, 3, 3), tuple(ax[1:11]), (), True),
        "pbf_lambdas": (B.pbf_lambdas, 6, tuple(pb[:4]), (), False),
        "pbf_position_deltas": (B.pbf_position_deltas, 6, tuple(pb[:5]), (), False),
        "pbf_apply": (B.pbf_apply, 6, (pb[0], pb[4]), (), False),
        "compute_indexmap": (B.compute_indexmap, (4, 3, 4), (ft[2], 4, 3, 4, 0.02), (), False),
        "evolve": (B.evolve, (4, 3, 4), tuple(ft[:3]), (), False),
    }
    for name, (kernel, dim, args, atomic, checked) in verdicts.items():
        found = gk.inspect(kernel, *args, dim=dim, backend="interp")
        assert (found.parallel, found.atomic_targets, found.race_check) == (True, atomic, checked), name
    pos, force = np.random.default_rng(1).uniform(size=4), np.zeros(4)
    with pytest.raises(gk.RaceError):
        gk.launch(_sw_pairs_without_atomics, 4, pos, force, 4, backend="interp")
    assert not force.any()
    z, u = np.ones((3, 3, 4)), np.zeros((4, 4, 6))
    with pytest.raises(gk.RaceError):
        gk.launch(_interp_unstrided, (2, 2, 3), z, u, backend="interp")
    assert not u.any()


def test_local_array_at_a_data_index_is_refused_naming_the_read():
    """RSBench's `sigTfactors[pole.l_value]` on a gk.local array: refused (a local array's elements are scalar
    locals, so its index must fold to a constant), naming the access and the spelling that works; nothing is
    written. The port selects the factor by an if/elif chain on l_value (ported_hpc10.xs_lookup)."""
    k0rs, lv, out = np.full(4, 0.3), np.array([0, 2, 3], np.int32), np.zeros(3)
    with pytest.raises(gk.KernelSyntaxError) as e:
        gk.launch(gk.kernel(_xs_factor_by_l_value), 3, k0rs, lv, out, backend="interp")
    message = str(e.value)
    assert "'factors[l_value[i]]': the index l_value[i] into local array 'factors' is not a constant" in message
    assert "test_ported_hpc10.py:" in message and "(in _xs_factor_by_l_value)" in message
    assert "'if l == 0: v = f[0]'" in message
    assert not out.any() and (k0rs == 0.3).all()
