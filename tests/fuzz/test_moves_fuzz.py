"""Pure-move fuzzer (analysis/moves.py, docs/programs.md "Renamed shadows"): random copy-like kernels and
launches, the pure-move fact checked against a brute-force oracle.

The generator writes copies `dst[idx] = src[idx]` of 1-D to 5-D arrays (1-D to 3-D launches, trailing axes as
loops) and mutates about two thirds of them: index aliases (`a = i + 1 - 1`), permuted, reversed or rolled
indices on both sides or on the source only, guards that hold everywhere or leave an element out, both arms
of a branch storing, scaled or shifted values (`* 2.0`, `* 1.0`, `+ 0.0`, `-x`, `* a` of an Active scalar),
the value through a local, a second store, an accumulation, a write of a third array or of the source,
partial or strided trailing loops, loops over another axis of the same extent, a float32 source; and the
launches: a partial dim, the destination or source as part of a bigger buffer, the whole buffer through a
`[:]` view, a transposed destination, the source passed as the destination too.

The oracle runs the reverse (`gk.autodiff` on the interpreter) on random shadows of the buffers and says the
launch is a pure move when, over the whole buffers, d_dst == +0.0 and d_src == d_src0 + d_dst0 bit for bit,
every other shadow and Active scalar untouched, the buffers distinct and alike (the renaming swaps memory).

Properties: every launch the recorder would rename (`record.moved_positions` on the prepared reverse call's
`primal.facts`) passes the oracle (soundness), and at least half of the launches the oracle finds pure
moves are accepted (the rest are moves the analysis refuses by design, docs/programs.md "Pure moves", which
states the share of a long run). GRADKERN_FUZZ_MOVES sets the number of kernels (CI default 150), GRADKERN_FUZZ_SEED
the seed. A local long run: GRADKERN_FUZZ_MOVES=3000 pytest -s -n0 tests/fuzz/test_moves_fuzz.py
"""

from __future__ import annotations

import os

import numpy as np

import gradkern as gk
from fuzz.test_race_fuzz import load_kernels
from gradkern.program.record import moved_positions
from gradkern.runtime.call import prepare

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_MOVES", "150"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))

KERNEL_MUTATIONS = ("alias", "permute", "reverse", "roll", "roll_src", "swap_src", "guard_true", "guard_partial",
                    "branches", "scale2", "scale1", "plus0", "negate", "active", "local", "twice", "accumulate",
                    "extra_write", "write_src", "loop_partial", "loop_step", "loop_axis", "cast")
LAUNCH_MUTATIONS = ("partial_dim", "dst_part", "src_part", "whole_view", "transposed", "same")
TIDS = ("i", "j", "k")
LOOPS = ("m", "n")


def generate(rng, name: str) -> tuple[str, dict]:
    """A random kernel's source and what its launches need: the arrays' dimensions and extents, dtypes, the
    launch mutation and the extra parameters."""
    kmut = str(rng.choice(KERNEL_MUTATIONS)) if rng.random() < 0.6 else "none"
    lmut = str(rng.choice(LAUNCH_MUTATIONS)) if rng.random() < 0.5 else "none"
    # each mutation where it applies: loops on 4-D and 5-D arrays, two axes to swap
    lowest = 4 if kmut.startswith("loop") else 2 if kmut in ("permute", "swap_src") else 1
    nd = int(rng.integers(lowest, 6))
    t = min(nd, 3)
    shape = [int(rng.integers(2, 5)) for _ in range(nd)]
    if kmut in ("permute", "swap_src") or lmut == "transposed" and nd >= 2:
        shape[1] = shape[0]
    if kmut == "loop_axis":  # a loop over axis 0 for axis 3: all of it, or all but its last element
        shape[3] = shape[0] + int(rng.integers(0, 2))
    di = [TIDS[a] for a in range(t)] + [LOOPS[a] for a in range(nd - t)]
    si = list(di)
    pre, value, extra, stores = [], None, [], None
    loops = [f"for {LOOPS[a]} in range(dst.shape[{t + a}]):" for a in range(nd - t)]
    if kmut == "alias":
        pre.append(f"a0 = {TIDS[0]} + 1 - 1")
        di[0] = si[0] = "a0"
    elif kmut == "permute":
        di[0], di[1] = di[1], di[0]
        si = list(di)
    elif kmut == "reverse":
        di[0] = si[0] = f"dst.shape[0] - 1 - {TIDS[0]}"
    elif kmut == "roll":
        di[0] = si[0] = f"({TIDS[0]} + 1) % dst.shape[0]"
    elif kmut == "roll_src":
        si[0] = f"({TIDS[0]} + 1) % dst.shape[0]"
    elif kmut == "swap_src":
        si[0], si[1] = si[1], si[0]
    elif kmut == "loop_partial":
        loops[0] = "for m in range(1, dst.shape[3]):"
    elif kmut == "loop_step":
        loops[0] = "for m in range(0, src.shape[3], 2):"
    elif kmut == "loop_axis":
        loops[0] = "for m in range(dst.shape[0]):"
    d, s = f"dst[{', '.join(di)}]", f"src[{', '.join(si)}]"
    value = {"scale2": f"{s} * 2.0", "scale1": f"{s} * 1.0", "plus0": f"{s} + 0.0", "negate": f"-{s}",
             "active": f"{s} * a"}.get(kmut, s)
    if kmut == "active":
        extra.append("a")
    stores = [f"{d} = {value}"]
    if kmut == "local":
        stores = [f"v = {s}", f"{d} = v"]
    elif kmut == "twice":
        stores = [f"{d} = {s}", f"{d} = {s}"]
    elif kmut == "accumulate":
        stores = [f"{d} += {s}"]
    elif kmut == "extra_write":
        extra.append("w")
        stores.append(f"w[{', '.join(di)}] = 1.0")
    elif kmut == "write_src":
        stores.append(f"{s} = 0.0")
    elif kmut == "guard_true":
        stores = [f"if {TIDS[0]} >= 0:"] + ["    " + x for x in stores]
    elif kmut == "guard_partial":
        stores = [f"if {TIDS[0]} < dst.shape[0] - 1:"] + ["    " + x for x in stores]
    elif kmut == "branches":
        stores = [f"if {TIDS[0]} < 1:", f"    {d} = {s}", "else:", f"    {d} = {s}"]
    lines = [f"{', '.join(TIDS[:t])} = gk.tid()"] + pre
    indent = ""
    for lp in loops:
        lines.append(indent + lp)
        indent += "    "
    lines += [indent + x for x in stores]
    params = ", ".join(["dst", "src"] + extra)
    source = f"def {name}({params}):\n" + "".join(f"    {x}\n" for x in lines)
    return source, dict(nd=nd, t=t, shape=tuple(shape), kmut=kmut, lmut=lmut, extra=tuple(extra),
                        src_dtype=np.float32 if kmut == "cast" else np.float64)


def _bits(a):
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


def launch_once(kernel, cfg: dict, rng) -> tuple[bool, bool] | None:
    """(accepted, oracle) for one launch of `kernel`, or None where the launch is refused (out of bounds etc.)."""
    shape, lmut = cfg["shape"], cfg["lmut"]
    big = (shape[0] + 1,) + shape[1:]
    dst_root = rng.standard_normal(big if lmut == "dst_part" else shape)
    src_root = rng.standard_normal(big if lmut == "src_part" else shape).astype(cfg["src_dtype"])
    d_dst_root = rng.standard_normal(dst_root.shape)
    d_src_root = rng.standard_normal(src_root.shape).astype(cfg["src_dtype"])

    def view(a, part):
        return a[1:] if part else a[:] if lmut == "whole_view" else a.T if lmut == "transposed" else a

    dst, d_dst = view(dst_root, lmut == "dst_part"), view(d_dst_root, lmut == "dst_part")
    src, d_src = (src_root[1:], d_src_root[1:]) if lmut == "src_part" else (src_root, d_src_root)
    if lmut == "same":
        src_root, d_src_root, src, d_src = dst_root, d_dst_root, dst, d_dst
    dim = tuple(dst.shape[:cfg["t"]])
    if lmut == "partial_dim":
        dim = (dim[0] - 1,) + dim[1:]
    args = [gk.Duplicated(dst, d_dst), gk.Duplicated(src, d_src)]
    others = []
    for p in cfg["extra"]:
        if p == "a":
            args.append(gk.Active(float(rng.standard_normal())))
        else:
            w, dw = rng.standard_normal(shape), rng.standard_normal(shape)
            others.append((dw, dw.copy()))
            args.append(gk.Duplicated(w, dw))
    try:
        call, bound = prepare(kernel, tuple(args), dim, "interp", "reverse")
    except gk.GradkernError:
        return None
    pos = moved_positions(kernel.ir.params, bound.b, call.primal.facts)
    assert pos is None or [kernel.ir.params[k].name for k in pos] == ["dst", "src"]
    d0, s0 = d_dst_root.copy(), d_src_root.copy()
    try:
        got = gk.autodiff(kernel, *args, dim=dim, backend="interp")
    except (gk.GradkernError, IndexError):  # an access outside its array: no defined behaviour to compare
        return None
    oracle = src_root is not dst_root and d0.shape == s0.shape and d0.dtype == s0.dtype \
        and np.array_equal(_bits(d_dst_root), _bits(np.zeros_like(d0))) \
        and np.array_equal(_bits(d_src_root), _bits(s0 + d0)) \
        and all(np.array_equal(_bits(dw), _bits(w0)) for dw, w0 in others) \
        and all(g is None or g == 0.0 for g in got[2:])
    return pos is not None, bool(oracle)


def run_fuzz(directory: str, count: int, seed: int, launches: int = 2) -> dict:
    """Fuzz `count` kernels; returns the counts (accepted, pure moves, both, launches, refused launches) and
    the unsound launches' sources."""
    rng = np.random.default_rng(seed)
    made = [generate(rng, f"move_{seed}_{n}") for n in range(count)]
    module = load_kernels(os.path.join(directory, f"moves_fuzz_{seed}.py"), [s for s, _ in made])
    stats = dict(accepted=0, moves=0, both=0, launches=0, skipped=0, unsound=[])
    for n, (source, cfg) in enumerate(made):
        kernel = getattr(module, f"move_{seed}_{n}")
        for _ in range(launches):
            got = launch_once(kernel, cfg, rng)
            if got is None:
                stats["skipped"] += 1
                continue
            accepted, oracle = got
            stats["launches"] += 1
            stats["accepted"] += accepted
            stats["moves"] += oracle
            stats["both"] += accepted and oracle
            if accepted and not oracle:
                stats["unsound"].append((source, cfg))
    return stats


def test_pure_moves_against_the_oracle(tmp_path):
    stats = run_fuzz(str(tmp_path), N_KERNELS, SEED)
    print(f"\nmoves fuzz: {stats['launches']} launches ({stats['skipped']} refused), {stats['moves']} pure moves, "
          f"{stats['accepted']} accepted")
    assert not stats["unsound"], stats["unsound"][0]
    assert stats["moves"] > 0 and stats["both"] * 2 >= stats["moves"], stats
