"""Temporal blocking fuzzer (transforms/temporal.py, runtime/blocked.py): random 1-D stencil steps, k launches
over ping-pong buffers run one by one (the brute-force oracle: the k launches themselves) and through the
blocked form, on random sizes, tiles and k; both buffers must agree to the bit.

The steps read `u` at random constant offsets (some through aliases `j = i + c`, some inside selects or
short offset loops, which the transform unrolls), a coefficient array `w` at the thread's index, a scalar;
the ends (as wide as the reach on each side, or wider) follow one of four rules (copy, zero, a coefficient,
an affine map of u), chosen by branches on the thread index. A kernel the generator makes reads out of range
nowhere, by design.

2-D and 3-D steps (`test_temporal_fuzz_nd`): the same over a (nx, ny) or (nx, ny, nz) launch, reads of `u` at
random constant offsets in every dimension (axis 0 through an alias `r = i + c` sometimes), edges as wide as the
reach in each dimension or one wider under one of the four rules, on random band heights (often narrower than the
halo of k·r rows or planes).

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


_NAMES = ("i", "j", "q")


def _at(offsets: tuple[int, ...], row: str = "i") -> str:
    shift = lambda v, o: v if o == 0 else f"{v} + {o}" if o > 0 else f"{v} - {-o}"  # noqa: E731
    return f"u[{', '.join(shift(row if d == 0 else _NAMES[d], o) for d, o in enumerate(offsets))}]"


def source_nd(rng, name: str, nd: int) -> tuple[str, int]:
    """A random 2-D or 3-D stencil step (module doc) and the largest |offset on axis 0| it may read."""
    offs = [tuple(int(x) for x in row) for row in rng.integers(-2, 3, size=(rng.integers(1, 5), nd))] + [(0,) * nd]
    reach = max(abs(o[0]) for o in offs)
    here = f"[{', '.join(_NAMES[:nd])}]"
    terms = []
    for _ in range(rng.integers(1, 5)):
        o = offs[int(rng.integers(len(offs)))]
        form = int(rng.integers(3))
        terms.append(f"{rng.uniform(-0.3, 0.3):.3f} * {_at(o)}" if form == 0 else
                     f"0.05 * {_at(o)} * u{here}" if form == 1 else f"w{here} * {_at(o)}")
    lines = [f"def {name}(u, un, w, c):", f"    {', '.join(_NAMES[:nd])} = gk.tid()"]
    if rng.integers(2):
        o = offs[int(rng.integers(len(offs)))]
        lines.append(f"    r = i + {o[0]}" if o[0] >= 0 else f"    r = i - {-o[0]}")
        terms.append(f"0.1 * {_at((0, *o[1:]), 'r')}")
    edges = []
    for d in range(nd):  # as wide as the reach on the axis, or one wider, on each side
        lo, hi = (max(abs(o[d]) for o in offs) + int(rng.integers(0, 2)) for _ in range(2))
        edges += [f"{_NAMES[d]} < {lo}"] if lo else []
        edges += [f"{_NAMES[d]} >= u.shape[{d}] - {hi}"] if hi else []
    end = [f"u{here}", "0.0", f"w{here}", f"0.5 * u{here} + 0.25"][int(rng.integers(4))]
    lines += [f"    if {' or '.join(edges) or 'c > 9.0'}:", f"        un{here} = {end}", "    else:",
              f"        un{here} = {' + '.join(terms)}"]
    return "\n".join(lines) + "\n", reach


@pytest.mark.parametrize("nd", [2, 3])
def test_temporal_fuzz_nd(nd, tmp_path, monkeypatch):
    rng = np.random.default_rng(SEED + nd)
    made = [source_nd(rng, f"tb{nd}_{SEED}_{n}", nd) for n in range(N_KERNELS)]
    module = load_kernels(str(tmp_path / f"temporal_fuzz_{nd}d_{SEED}.py"), [s for s, _ in made])

    def draw(backend):
        cpu = backend == "cpu"
        top = {(2, True): 24, (2, False): 10, (3, True): 10, (3, False): 7}[nd, cpu]
        shape = (int(rng.integers(6, 40 if cpu else 18)), *(int(rng.integers(5, top)) for _ in range(nd - 1)))
        monkeypatch.setattr(blocked, "BAND_ROWS", int(rng.integers(1, 12)))
        return shape, int(rng.integers(4, 11))
    _check_all(made, module, f"tb{nd}_{SEED}_", rng, draw)
