"""Dead-assignment elimination (transforms/dce.py) changes no result: every
signature of the suite (primal launches, reverse, forward and vector mode of
the reverse cases, the race-check kernels) runs on the reference interpreter
with the pass and without it, from the same inputs, and every array and
returned derivative must come out bit for bit the same. The pass also has to
remove something where the transforms leave dead values (a gather's
neighbour copies)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from support.signatures import all_signatures

import gradkern as gk
import gradkern.pipeline as pipeline
from gradkern.ir import nodes as ir
from gradkern.kernels import allen_cahn_step
from gradkern.transforms.dce import eliminate_dead

SIGNATURES = all_signatures()


def _run(sig) -> list:
    args = copy.deepcopy(sig.args)
    if sig.mode is None:
        gk.launch(sig.kernel, sig.dim, *args, backend="interp")
        got = None
    else:
        got = gk.autodiff(sig.kernel, *args, dim=sig.dim, mode=sig.mode, backend="interp")
    arrays = []
    for a in args:
        for v in (a.val, getattr(a, "dval", None), *getattr(a, "dvals", ())) if isinstance(a, gk.Annotation) else (a,):
            if isinstance(v, np.ndarray):
                arrays.append(v)
    return [got, arrays]


def _outcome(sig):
    try:
        return _run(sig)
    except gk.GradkernError as e:  # the racy signatures are refused: the same refusal both ways
        return type(e).__name__


@pytest.mark.parametrize("chunk", range(4))
def test_removing_dead_assignments_changes_no_result(chunk, monkeypatch):
    sigs = SIGNATURES[chunk::4]
    kernels = {s.kernel for s in sigs}
    with_pass = [_outcome(s) for s in sigs]
    monkeypatch.setattr(pipeline, "eliminate_dead", lambda k: k)
    for k in kernels:
        k._specs.clear()
    try:
        without = [_outcome(s) for s in sigs]
    finally:
        monkeypatch.undo()
        for k in kernels:
            k._specs.clear()
    for s, a, b in zip(sigs, with_pass, without):
        if isinstance(a, str) or isinstance(b, str):
            assert a == b, s.label
            continue
        assert a[0] == b[0] or (a[0] is not None and np.array_equal(np.asarray(a[0], float), np.asarray(b[0], float),
                                                                      equal_nan=True)), s.label
        for x, y in zip(a[1], b[1], strict=True):
            np.testing.assert_array_equal(x, y, err_msg=s.label)


def _statements(body) -> int:
    return sum(1 for _ in ir.walk_stmts(body))


def test_the_gather_loses_its_dead_neighbour_values(monkeypatch):
    """Each neighbour copy of a gather keeps only what its accumulators need (transforms/gather.py slices it
    as it builds it): against the copies unsliced, fewer statements, and nothing left for the printer's pass."""
    import gradkern.transforms.gather as gather_module
    from gradkern.runtime.annotate import annotated_binding
    from gradkern.runtime.specialize import reverse_specialization

    n = 12
    args = (gk.Duplicated(np.ones(n), np.zeros(n)), gk.Duplicated(np.ones(n), np.ones(n)), gk.Const(0.1),
            gk.Const(0.01))

    def gather_of():
        allen_cahn_step._specs.clear()
        ann, b, shadows = annotated_binding(allen_cahn_step, args, None, None)
        return reverse_specialization(allen_cahn_step, b, shadows, ann.active, ann.no_need, ann.lanes).gather.typed

    gather = gather_of()
    with monkeypatch.context() as m:
        m.setattr(gather_module, "live_slice", lambda body, live: body)
        unsliced = gather_of()
    allen_cahn_step._specs.clear()
    assert _statements(gather.body) < 0.7 * _statements(unsliced.body)
    pruned = eliminate_dead(unsliced)
    assert _statements(pruned.body) < 0.7 * _statements(unsliced.body)
    assert len(pruned.locals) < len(unsliced.locals)
    assert eliminate_dead(pruned) == pruned  # a fixpoint
    assert _statements(eliminate_dead(gather).body) == _statements(gather.body)


@gk.kernel
def dce_skip(a, out, n):
    i = gk.tid()
    s = 0.0
    for k in range(n):
        if k != 2:
            continue
        if not (i == 0 or i >= n - 1):
            s += a[i + 2]
    out[i] = s


def test_a_loop_statement_kept_only_for_a_pruned_read_goes_too():
    """The reverse kernel of dce_skip reads its taped `continue` flag through a tape cursor, `p = p - 1` each
    iteration; the flag only guards dead adjoints, so its load goes, and then the cursor's decrement must go
    too: kept, it read a cursor whose load before the loop was pruned (the interpreter raised KeyError)."""
    from gradkern.frontend.structure import check_definite_assignment
    from gradkern.runtime.annotate import annotated_binding
    from gradkern.runtime.specialize import reverse_specialization

    rng = np.random.default_rng(0)
    a, out, dout = rng.uniform(0.5, 1.5, 12), np.zeros(11), rng.uniform(0.5, 1.5, 11)
    args = (gk.Duplicated(a, np.zeros(12)), gk.Duplicated(out, dout.copy()), gk.Const(7))
    ann, b, shadows = annotated_binding(dce_skip, args, 6, "interp")
    rs = reverse_specialization(dce_skip, b, shadows, ann.active, ann.no_need, ann.lanes)
    for k in (rs.reverse.typed, rs.fused.typed):
        pruned = eliminate_dead(k)
        check_definite_assignment(pruned.body, {p.name for p in pruned.params})
        assert eliminate_dead(pruned) == pruned
    da = np.zeros(12)
    gk.autodiff(dce_skip, gk.Duplicated(a, da), gk.Duplicated(out, dout.copy()), gk.Const(7), dim=6,
                backend="interp")
    expected = np.zeros(12)
    expected[3:8] = dout[1:6]  # threads 1..5 (not 0, not past n - 2 = 5) add a[i + 2] once (k = 2)
    np.testing.assert_array_equal(da, expected)
