"""Temporal blocking fuzzer (transforms/temporal.py, runtime/blocked.py): random 1-D stencil steps, k launches
over ping-pong buffers run one by one (the brute-force oracle: the k launches themselves) and through the
blocked form, on random sizes, tiles and k; both buffers must agree to the bit.

The steps read `u` at random constant offsets (some through aliases `j = i + c`, some inside selects or
short offset loops, which the transform unrolls), a coefficient array `w` at the thread's index, a scalar;
the ends (as wide as the reach on each side, or wider) follow one of four rules (copy, zero, a coefficient,
an affine map of u), chosen by branches on the thread index. A kernel the generator makes reads out of range
nowhere, by design.

2-D steps (`test_temporal_fuzz_2d`): the same over a (nx, ny) launch, reads of `u` at random constant offsets in
both dimensions (rows through an alias `r = i + c` sometimes), edges as wide as the reach in each dimension under
one of the four rules, on random band heights (often narrower than the halo of k·r rows).

GRADKERN_FUZZ_TEMPORAL sets the number of kernels of each kind (CI default 10; every 10th on the compiled CPU
backend, the rest on the reference interpreter), GRADKERN_FUZZ_SEED the seed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from support.temporal import check_bit_identical

from fuzz.test_race_fuzz import load_kernels
from gradkern.runtime import blocked

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_TEMPORAL", "10"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
CPU_EVERY = 10  # a compiled kernel pair costs about 10 s of Numba under load; the unit tests compile more


def _term(rng, offsets: list[int]) -> str:
    o = int(rng.choice(offsets))
    form = rng.integers(4)
    at = "i" if o == 0 else f"i + {o}" if o > 0 else f"i - {-o}"
    if form == 0:
        return f"{rng.uniform(-0.3, 0.3):.3f} * u[{at}]"
    if form == 1:
        return f"0.05 * u[{at}] * u[i]"
    if form == 2:
        o2 = int(rng.choice(offsets))
        at2 = "i" if o2 == 0 else f"i + {o2}" if o2 > 0 else f"i - {-o2}"
        return f"0.1 * (u[{at}] if c > 0.0 else u[{at2}])"
    return f"w[i] * u[{at}]"


def source(rng, name: str) -> tuple[str, int]:
    """A random stencil step (module doc) and the largest |offset| it may read."""
    offsets = sorted({int(x) for x in rng.integers(-3, 4, size=rng.integers(1, 5))} | {0})
    left, right = max(0, -offsets[0]) + int(rng.integers(0, 2)), max(0, offsets[-1]) + int(rng.integers(0, 2))
    terms = " + ".join(_term(rng, offsets) for _ in range(rng.integers(1, 5)))
    rule = int(rng.integers(4))
    end = ["u[i]", "0.0", "w[i]", "0.5 * u[i] + 0.25"][rule]
    lines = [f"def {name}(u, un, w, c):", "    i = gk.tid()", "    n = u.shape[0]"]
    if rng.integers(2) and offsets[-1] > 0:
        lines.append(f"    j = i + {offsets[-1]}")
        terms += " + 0.01 * u[j]"
    if rng.integers(2):
        lines.append(f"    if i < {left} or i >= n - {right}:" if left and right else
                     f"    if i < {left}:" if left else f"    if i >= n - {right}:" if right else "    if c > 9.0:")
        lines.append(f"        un[i] = {end}")
        lines.append("    else:")
        lines.append(f"        un[i] = {terms}")
    else:  # the ends first, then the interior under a short loop over offsets 0 … the largest
        lines.append(f"    if i >= {left} and i < n - {right}:")
        lines.append("        acc = 0.0")
        lines.append(f"        for q in range(0, {offsets[-1] + 1}):")
        lines.append("            acc += 0.2 * u[i + q]")
        lines.append(f"        un[i] = acc + {terms}")
        lines.append("    else:")
        lines.append(f"        un[i] = {end}")
    reach = max(abs(offsets[0]), abs(offsets[-1]))
    return "\n".join(lines) + "\n", reach


def _check_all(made: list[tuple[str, int]], module, prefix: str, rng, draw) -> None:
    """Each made kernel (`prefix` + its number in `module`) on its backend, with a shape, tile and k that
    `draw(backend)` sets and answers, bit for bit both ways."""
    for n, (src, reach) in enumerate(made):
        backend = "cpu" if n % CPU_EVERY == 0 else "interp"
        shape, k = draw(backend)
        u0, w = rng.uniform(-1, 1, shape), rng.uniform(-0.3, 0.3, shape)
        step = getattr(module, f"{prefix}{n}")
        try:
            got = check_bit_identical(step, u0, (w, float(rng.uniform(-1, 1))), k, backend)
        except AssertionError as e:
            pytest.fail(f"{e}\n{src}")
        assert got <= reach, src  # the largest offset it may read (its terms need not use every one)


def test_temporal_fuzz(tmp_path, monkeypatch):
    rng = np.random.default_rng(SEED)
    made = [source(rng, f"tb_{SEED}_{n}") for n in range(N_KERNELS)]
    module = load_kernels(str(tmp_path / f"temporal_fuzz_{SEED}.py"), [s for s, _ in made])

    def draw(backend):
        size = int(rng.integers(8, 160 if backend == "cpu" else 48))
        monkeypatch.setattr(blocked, "TILE", int(rng.integers(1, 24)))
        return size, int(rng.integers(4, 13))
    _check_all(made, module, f"tb_{SEED}_", rng, draw)


def _at2(di: int, dj: int, row: str = "i") -> str:
    shift = lambda v, o: v if o == 0 else f"{v} + {o}" if o > 0 else f"{v} - {-o}"  # noqa: E731
    return f"u[{shift(row, di)}, {shift('j', dj)}]"


def source_2d(rng, name: str) -> tuple[str, int]:
    """A random 2-D stencil step (module doc) and the largest |row offset| it may read."""
    pairs = [(int(a), int(c)) for a, c in rng.integers(-2, 3, size=(rng.integers(1, 5), 2))] + [(0, 0)]
    reach = max(abs(a) for a, _ in pairs)
    creach = max(abs(c) for _, c in pairs)
    top, bottom = reach + int(rng.integers(0, 2)), reach + int(rng.integers(0, 2))
    side = creach + int(rng.integers(0, 2))
    terms = []
    for _ in range(rng.integers(1, 5)):
        a, c = pairs[int(rng.integers(len(pairs)))]
        form = int(rng.integers(3))
        terms.append(f"{rng.uniform(-0.3, 0.3):.3f} * {_at2(a, c)}" if form == 0 else
                     f"0.05 * {_at2(a, c)} * u[i, j]" if form == 1 else f"w[i, j] * {_at2(a, c)}")
    lines = [f"def {name}(u, un, w, c):", "    i, j = gk.tid()", "    nx = u.shape[0]", "    ny = u.shape[1]"]
    if rng.integers(2):
        a, c = pairs[int(rng.integers(len(pairs)))]
        lines.append(f"    r = i + {a}" if a >= 0 else f"    r = i - {-a}")
        terms.append(f"0.1 * {_at2(0, c, 'r')}")
    end = ["u[i, j]", "0.0", "w[i, j]", "0.5 * u[i, j] + 0.25"][int(rng.integers(4))]
    edge = " or ".join(t for t in (f"i < {top}" if top else "", f"i >= nx - {bottom}" if bottom else "",
                                   f"j < {side} or j >= ny - {side}" if side else "") if t) or "c > 9.0"
    lines += [f"    if {edge}:", f"        un[i, j] = {end}", "    else:", f"        un[i, j] = {' + '.join(terms)}"]
    return "\n".join(lines) + "\n", reach


def test_temporal_fuzz_2d(tmp_path, monkeypatch):
    rng = np.random.default_rng(SEED + 1)
    made = [source_2d(rng, f"tb2_{SEED}_{n}") for n in range(N_KERNELS)]
    module = load_kernels(str(tmp_path / f"temporal_fuzz_2d_{SEED}.py"), [s for s, _ in made])

    def draw(backend):
        cpu = backend == "cpu"
        shape = (int(rng.integers(6, 48 if cpu else 20)), int(rng.integers(5, 24 if cpu else 10)))
        monkeypatch.setattr(blocked, "BAND_ROWS", int(rng.integers(1, 12)))
        return shape, int(rng.integers(4, 11))
    _check_all(made, module, f"tb2_{SEED}_", rng, draw)
