"""The CPU's bounds checks pass no literal integer to `_gkb_check` (docs/compile-time.md, finding 14): Numba
compiles a called function once per value of a literal argument, so the site numbers (and constant indices)
printed as literals made one compile of the helper per checked access (61 in ported EAM's force gradient)."""

import re
import sys

import numpy as np

import gradkern as gk


def test_a_checked_kernel_compiles_its_check_helper_once_per_index_type(monkeypatch):
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "1")  # read at a kernel's first specialisation

    @gk.kernel
    def checked_rows(p, idx, out):
        i = gk.tid()
        j = idx[i]
        out[i, 0] = p[j, 0] * p[i, 1] + p[j, 2]
        out[i, 1] = p[i, 0] - p[j, 1] * p[i, 2]
        out[i, 2] = p[j, 0] + p[j, 1] + p[j, 2] + p[i, 0] * p[i, 1]

    rng = np.random.default_rng(7)
    p, idx, out = rng.uniform(0.5, 1.5, (6, 3)), rng.integers(0, 6, 6), np.zeros((6, 3))
    source = gk.inspect(checked_rows, p, idx, out, dim=6).source
    calls = re.findall(r"_gkb_check\(([^()]*(?:\([^()]*\)[^()]*)*)\)", source)
    assert len(calls) > 8  # called, not inlined (numba_syntax.INLINE_CHECKS)
    literal = [c for c in calls if any(re.fullmatch(r"\(?-?\d+\)?", a.strip()) for a in c.split(","))]
    assert not literal, literal
    gk.launch(checked_rows, 6, p, idx, out)
    want = np.stack([p[idx, 0] * p[:, 1] + p[idx, 2], p[:, 0] - p[idx, 1] * p[:, 2],
                     p[idx].sum(axis=1) + p[:, 0] * p[:, 1]], axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-15)  # the same operations in the same order: a rounding apart
    helpers = [m._gkb_check for name, m in list(sys.modules.items())
               if name.startswith("gradkern_gen_") and "checked_rows" in getattr(m, "__dict__", {}).__repr__()
               and hasattr(m, "_gkb_check")]
    assert helpers and all(len(h.overloads) <= 2 for h in helpers), [list(h.overloads) for h in helpers]
