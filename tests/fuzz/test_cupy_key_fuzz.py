"""The CuPy call key (runtime/callkey.py `_device_key`, docs/prepared-call.md "CuPy arrays") is a fast path that
skips the full binding's address checks: sound only if a call whose key the full path accepted before is
accepted by the full path too. Fuzzed on the CuPy stand-in (tests/support/fakecupy.py) against the full path
(`binding.bind`) as the oracle: random pairs of views into one allocation (random offsets, strides of 4, 8, 12,
16 and -8 bytes for float64 elements, allocations said smaller than their buffer), so misaligned, out-of-
allocation, overlapping and exactly aliased calls all occur; each key is looked up among those accepted so far,
as `prepare`'s cache would. (20,000 calls gave 2,249 such hits and no unsound one, session 55; CI runs 3,000.)"""

from __future__ import annotations

import numpy as np
from support.fakecupy import installed

import gradkern as gk
from gradkern.kernels.blas import saxpy
from gradkern.runtime import callkey
from gradkern.runtime.binding import bind


def test_a_kept_cupy_key_is_accepted_by_the_full_path():
    rng = np.random.default_rng(1)
    accepted, hits, unsound = set(), 0, []
    with installed() as cp:
        for _ in range(3000):
            mem = cp.zeros(int(rng.integers(4, 40)))
            mem.data.mem.size = int(rng.integers(8, mem.nbytes + 1))  # CuPy's allocation may be the smaller
            arrays = []
            for _ in range(2):
                offset = int(rng.integers(0, max(1, mem.nbytes - 8)))
                stride = int(rng.choice([8, 16, -8, 4, 12]))
                try:
                    arrays.append(cp.ndarray((4,), np.float64, mem.data + offset, strides=(stride,)))
                except (TypeError, ValueError):  # past the fake's NumPy buffer: an array of its own
                    arrays.append(cp.zeros(4))
            args = (1.5, *arrays)
            key = callkey.signature(saxpy, "launch", 4, None, args)
            try:
                ok = not bind(saxpy.ir, 4, args, None).aliases
            except gk.GradkernError:
                ok = False
            if key is not None and key in accepted:
                hits += 1
                if not ok:
                    unsound.append([(a.data.ptr - mem.data.ptr, a.strides) for a in arrays])
            if key is not None and ok:
                accepted.add(key)
    assert not unsound, unsound[:5]
    assert hits > 100  # the fuzz reaches the fast path
