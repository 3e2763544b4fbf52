"""analysis/rows.py: which atomic adds land in row `tid[0] + c` (ir.AtomicAdd.row), against a brute-force
oracle: each add of a small random kernel counts its hits in an array of its own, indexed (row, thread),
so an interpreter launch shows every row each thread's add reached. A marked add must reach row t + c and
nothing else; and with chunks as the CPU makes them (numba_plan.MixedPlan: at least cmax - cmin threads
wide, two phases when that is > 0) no two chunks of one phase reach a common row through marked adds,
for every extent 1..9 and every chunk count 1..6 (more chunks than threads included)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fuzz.test_race_fuzz import load_kernels

import gradkern as gk
from gradkern.analysis.rows import mark_rows, row_spans
from gradkern.backends.numba_plan import MixedPlan
from gradkern.errors import InternalError
from gradkern.ir import nodes as ir
from gradkern.ir.infer import infer_types
from gradkern.ir.verify import verify
from gradkern.runtime.binding import bind

ROW_KERNELS = int(os.environ.get("GRADKERN_FUZZ_ROWS", "24"))
PAD = 4  # rows below and above the launch's: the hits arrays have n0 + 2 * PAD rows


def _index(rng, two_d: bool) -> str:
    """An index expression with a value in [0, n0 + 2 * PAD): marked forms and forms that are not."""
    c = int(rng.integers(0, PAD + 1))
    d = int(rng.integers(0, PAD + 1))
    forms = [f"i + {c}", f"{c} + i", f"(i + {PAD}) - {d}", f"m + {c}", f"(m + {c}) + {d // 2}",
             f"w + {c}", f"p + {c}", f"l + {c}", f"i * 1 + {c}", f"r + {c}", f"m3 + {c}", "q - i - 1"]
    if two_d:
        forms += [f"j + {c}", f"i + j - j + {c}"]
    return str(rng.choice(forms))


def _source(rng, name: str, adds: int, two_d: bool) -> str:
    hits = ", ".join(f"h{k}" for k in range(adds))
    lines = [f"def {name}({hits}, p, q):", "    i, j = gk.tid()" if two_d else "    i = gk.tid()",
             "    l = 0", "    m = i", "    m3 = m", "    w = i + 1", "    r = i",
             "    if i % 2 == 0:", "        r = i + 1"]
    t = "i, j" if two_d else "i"
    for k in range(adds):
        stmt = f"gk.atomic_add(h{k}, ({_index(rng, two_d)}, {t}), 1.0)"
        where = rng.integers(0, 3)
        if where == 0:
            lines.append(f"    {stmt}")
        elif where == 1:
            lines += ["    if i % 3 != 1:", f"        {stmt}"]
        else:
            lines += ["    for l in range(2):", f"        {stmt}"]
    lines += ["    for l in range(1):", "        p = p + 0", ""] if rng.integers(0, 4) == 0 else [""]
    return "\n".join(lines)


def _marked(kernel, args, dim) -> ir.Kernel:
    b = bind(kernel.ir, dim, args)
    return verify(mark_rows(infer_types(kernel.ir, b.type_map(kernel.ir))), "test")


def test_marked_adds_reach_exactly_their_row_and_same_phase_chunks_share_none(tmp_path):
    rng = np.random.default_rng(int(os.environ.get("GRADKERN_FUZZ_SEED", "0")))
    specs = [(f"rows_fuzz_{n}", int(rng.integers(1, 5)), bool(rng.integers(0, 2))) for n in range(ROW_KERNELS)]
    sources = [_source(rng, name, adds, two_d) for name, adds, two_d in specs]
    module = load_kernels(str(tmp_path / "rows_fuzz_module.py"), sources)
    marked_any = unmarked_any = 0
    for (name, adds, two_d), src in zip(specs, sources):
        kernel = getattr(module, name)
        for n0 in range(1, 10):
            dim = (n0, 3) if two_d else n0
            shape = (n0 + 2 * PAD, *((n0, 3) if two_d else (n0,)))
            hits = [np.zeros(shape) for _ in range(adds)]
            args = [*hits, 1, n0 + PAD]
            k = _marked(kernel, args, dim)
            gk.launch(kernel, dim, *args, backend="interp")
            rows = {s.array: s.row for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd)}
            marked_any += sum(r is not None for r in rows.values())
            unmarked_any += sum(r is None for r in rows.values())
            reached = []  # per add: the (row, thread) pairs it reached
            for a, h in enumerate(hits):
                at = np.argwhere(h.reshape(h.shape[0], n0, -1).sum(axis=2) > 0)
                c = rows[f"h{a}"]
                if c is not None:
                    assert all(r == t + c for r, t in at), f"h{a} marked tid[0] + {c}:\n{src}"
                    reached.append(at)
            span = row_spans(k, [f"h{a}" for a in range(adds)])
            offsets = [x for v in span.values() if v is not None for x in v]
            plan = MixedPlan(max(offsets) - min(offsets) if offsets else 0, ())
            for wanted in range(1, 7):
                chunks = plan.chunks(wanted, n0)
                bounds = [(c * n0 // chunks, (c + 1) * n0 // chunks) for c in range(chunks)]
                for phase in range(plan.phases):
                    owner: dict[int, int] = {}
                    for c in range(phase, chunks, plan.phases):
                        lo, hi = bounds[c]
                        for at in reached:
                            for r, t in at:
                                if lo <= t < hi:
                                    assert owner.setdefault(int(r), c) == c, \
                                        f"row {r}: chunks {owner[int(r)]} and {c} (n0 {n0}, {chunks} chunks)\n{src}"
    assert marked_any and unmarked_any  # the fuzz exercises both outcomes


@gk.kernel
def _aliases(x, p):
    i = gk.tid()
    m = i
    gk.atomic_add(x, m - 1, 1.0)  # marked: -1
    gk.atomic_add(x, 2 + i, 1.0)  # marked: 2
    gk.atomic_add(x, p, 1.0)  # a parameter: not marked
    for m2 in range(1):
        gk.atomic_add(x, m2 + i, 1.0)  # a loop variable: not marked


def test_mark_rows_records_offsets_and_the_verifier_checks_them():
    k = _marked(_aliases, [np.zeros(9), 1], 4)
    adds = [s for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd)]
    assert [s.row for s in adds] == [-1, 2, None, None]
    assert row_spans(k, ["x"]) == {"x": (-1, 2)}
    from dataclasses import replace
    wrong = replace(k, body=tuple(replace(s, row=5) if isinstance(s, ir.AtomicAdd) else s for s in k.body))
    with pytest.raises(InternalError, match="marked as row"):
        verify(wrong, "test")
