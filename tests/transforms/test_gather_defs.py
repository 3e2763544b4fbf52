"""The gather's once-set locals (transforms/gather.py: `_Offsets.defs`, the locals assigned once in a block
before all their uses) are found in one pass per block from its end (session 50: the per-assignment count of
the uses after it was quadratic in a block's length, 83 s of the 2-core machine's cProfile for LULESH's unrolled
hourglass reverse, tests/support/ported_hpc3_more.py). The oracle is the definition, counted per assignment."""

import numpy as np
import pytest
from support.corpus import CORPUS
from support.ported_hpc3_cases import cases

import gradkern as gk
from gradkern.ir import nodes as ir
from gradkern.ir.infer import infer_types
from gradkern.kernel import SpecCache
from gradkern.runtime.binding import bind
from gradkern.transforms.gather import _Offsets


def _defs_by_definition(k: ir.Kernel) -> dict:
    count: dict[str, int] = {}
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.Assign):
            count[s.name] = count.get(s.name, 0) + 1
        elif isinstance(s, ir.For):
            count[s.var] = 2
    uses: dict[str, int] = {}
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Var):
            uses[e.name] = uses.get(e.name, 0) + 1
    defs = {}

    def scan(block):
        for p, s in enumerate(block):
            if isinstance(s, ir.Assign) and count[s.name] == 1:
                after = sum(1 for e in ir.all_exprs(block[p + 1:]) if isinstance(e, ir.Var) and e.name == s.name)
                if after == uses.get(s.name, 0):
                    defs[s.name] = s.value
            for inner in ir.blocks(s):
                scan(inner)
    scan(k.body)
    return defs


def _typed(kernel, dim, args):
    values = [a.val if hasattr(a, "val") else a for a in args]
    k = kernel.ir
    return infer_types(k, bind(k, dim, values).type_map(k))


@pytest.fixture(scope="module")
def gathered():
    """The kernels the gather scans (the reverse, versioned: every local set once) of a few ported kernels, by
    name, captured from their reverse pipelines, each run with an empty specialisation cache (other tests in
    the process may have specialised them) that is put back afterwards."""
    seen: dict[str, list] = {}
    init = _Offsets.__init__
    with pytest.MonkeyPatch.context() as mp:
        for name, kernel, args, dim, _, _ in cases(np.random.default_rng(1)):
            if name in ("lulesh_hourglass", "dwt97_rows", "nek_local_grad3"):
                def capture(self, k, name=name):
                    seen.setdefault(name, []).append(k)
                    init(self, k)
                mp.setattr(_Offsets, "__init__", capture)
                fresh = SpecCache()  # an empty specialisation cache: the pipeline runs here
                fresh.generation = kernel._specs.generation + 1
                mp.setattr(kernel, "_specs", fresh)
                gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse)
    return seen


def test_once_set_locals_match_their_definition(gathered):
    rng = np.random.default_rng(0)
    kernels = [_typed(c.kernel, c.dim(a), a) for c in CORPUS for a in [c.make(rng, np.float64)]]
    # the oracle is the quadratic count: LULESH's long reverse is left to the next test
    kernels += [k for name, ks in gathered.items() if name != "lulesh_hourglass" for k in ks]
    found = 0
    for k in kernels:
        want = _defs_by_definition(k)
        got = _Offsets(k).defs
        assert set(got) == set(want), k.name
        assert all(got[n] is want[n] for n in want), k.name
        found += len(want)
    assert found > 200


def test_a_long_block_is_scanned_in_linear_time(gathered, monkeypatch):
    """LULESH's hourglass reverse (4 modes x 8 corners unrolled, three directions: thousands of straight-line
    statements, each local set once): the scan visits each expression node a few times (once for the uses, once
    per enclosing block), where the count per assignment visited the rest of the block for each of them."""
    walk = ir.all_exprs
    visits = 0

    def counted(body):
        nonlocal visits
        for e in walk(body):
            visits += 1
            yield e
    assert gathered["lulesh_hourglass"]
    for k in gathered["lulesh_hourglass"]:
        total = sum(1 for _ in walk(k.body))
        visits = 0
        monkeypatch.setattr(ir, "all_exprs", counted)
        _Offsets(k)
        monkeypatch.undo()
        assert len(k.body) > 1000 and total > 5000, (len(k.body), total)
        assert visits <= 4 * total, (visits, total)
