"""Compile time (issues 14.11 and 29): seconds from an empty cache to the first
primal launch and to the first gradient, each in a fresh process.

`length` rows: a straight-line kernel of n statements, generated as a file,
with two bodies: `distinct` (each statement defines a new local from the
previous one) and `reassigned` (one local reassigned n times, the worst case
for Numba's SSA reconstruction); the generated source sizes.

`realcode` rows (issue 29): the kernels of benchmarks/compile/realcode.py, in the shape
of an ocean model's (an equation of state, a 7-launch isoneutral slope program,
superbee advection). Per round and case, interleaved, each in a fresh process:
gradkern with an empty GRADKERN_CACHE_DIR (first primal, then first
`gk.autodiff`, Duplicated random inputs), the hand-written Numba version
(compile and call of its `njit(parallel=True)` primal), JAX's first
`jit(grad)` where JAX is installed, and gradkern again on the same cache
directory with another PYTHONHASHSEED (warm: it should compile nothing).
Medians over the rounds; the primal is checked against Numba's (np.allclose).
`--profile`: one fresh gradkern process per case under cProfile, with every
Numba compile timed and attributed to the role of the generated function
(docs/compile-time.md).

    python benchmarks/compile/compile_time.py                          # every row, prints the tables
    python benchmarks/compile/compile_time.py --rows realcode --rounds 3
    python benchmarks/compile/compile_time.py --rows realcode --profile
    python benchmarks/compile/compile_time.py --write                  # and writes RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from report import publish, run_lines
from timing import interleaved

STATEMENT = "gk.sin({prev}) * 1.5 + x[i] * {c:.2f}"


def kernel_source(n: int, reassigned: bool) -> str:
    lines = ["import gradkern as gk", "", "", "@gk.kernel", "def long_kernel(x, y):", "    i = gk.tid()",
             "    s = x[i]"]
    for k in range(n):
        c = 0.1 + 0.01 * k
        if reassigned:
            lines.append("    s = " + STATEMENT.format(prev="s", c=c))
        else:
            lines.append(f"    s{k} = " + STATEMENT.format(prev="s" if k == 0 else f"s{k - 1}", c=c))
    lines.append(f"    y[i] = {'s' if reassigned else f's{n - 1}'}")
    return "\n".join(lines) + "\n"


RUNNER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import gradkern as gk
import longk
x = np.random.default_rng(0).uniform(0.5, 1.5, 256); y = np.zeros(256)
t0 = time.perf_counter(); gk.launch(longk.long_kernel, 256, x, y); t1 = time.perf_counter()
gk.autodiff(longk.long_kernel, gk.Duplicated(x, np.zeros(256)), gk.Duplicated(y, np.ones(256)))
t2 = time.perf_counter()
ins = gk.inspect(longk.long_kernel, x, y)
rev = gk.inspect(longk.long_kernel, gk.Duplicated(x, np.zeros(256)), gk.Duplicated(y, np.ones(256)), mode=gk.Reverse)
print(json.dumps({"primal": t1 - t0, "reverse": t2 - t1, "primal_kb": len(ins.source) / 1e3,
                  "fused_kb": len(rev.source) / 1e3}))
"""


def measure(n: int, reassigned: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "longk.py").write_text(kernel_source(n, reassigned))
        env = {**os.environ, "GRADKERN_CACHE_DIR": str(Path(tmp, "cache"))}
        out = subprocess.run([sys.executable, "-c", RUNNER, tmp], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


# ---- real-code rows (issue 29) ---------------------------------------------------------------------------------

BENCH = Path(__file__).resolve().parent
CASES = ("eos", "isoneutral", "superbee")


def _case(name: str, shape: tuple[int, int, int], seed: int = 0) -> dict:
    """One real-code case on fresh random inputs: its primal and gradient calls for gradkern, the Numba
    primal, the JAX loss and its differentiated arguments, and the outputs the primals are compared on."""
    import numpy as np
    import realcode as rc

    import gradkern as gk

    rng = np.random.default_rng(seed + 1)
    if name == "eos":
        sa, ct, p, rho = rc.eos_inputs(shape, seed)
        w = rng.standard_normal(shape)
        return dict(
            outputs=lambda: {"rho": rho},
            primal=lambda: rc.eos(sa, ct, p, rho),
            gradient=lambda: gk.autodiff(rc.eos_density, gk.Duplicated(sa, np.zeros(shape)),
                                         gk.Duplicated(ct, np.zeros(shape)), gk.Const(p),
                                         gk.Duplicated(rho, w.copy())),
            numba=lambda: rc.eos_numba(sa, ct, p, rho),
            jax=lambda: (rc.eos_jax_loss(), (sa, ct, p, w), (0, 1), False))
    if name == "isoneutral":
        a = rc.isoneutral_inputs(shape, seed)
        weights = {n: rng.standard_normal(a[n].shape) for n in rc.ISONEUTRAL_OUTPUTS}

        def gradient():
            args = [gk.Duplicated(a[n], np.zeros_like(a[n])) if n in ("salt", "temp") else
                    gk.Duplicated(a[n], weights[n].copy()) if n in weights else a[n] for n in rc.ISONEUTRAL_ARGS]
            return gk.autodiff(rc.isoneutral, *args)
        consts = {n: a[n] for n in rc.ISONEUTRAL_ARGS if n not in ("salt", "temp") and n not in weights}
        return dict(
            outputs=lambda: {n: a[n] for n in rc.ISONEUTRAL_OUTPUTS},
            primal=lambda: rc.isoneutral(*[a[n] for n in rc.ISONEUTRAL_ARGS]),
            gradient=gradient,
            numba=lambda: rc.isoneutral_numba(*[a[n] for n in rc.ISONEUTRAL_ARGS]),
            jax=lambda: (rc.isoneutral_jax_loss(), (a["salt"], a["temp"], consts, weights), (0, 1), False))
    a = rc.superbee_inputs(shape, seed)
    fluxes = ("flux_e", "flux_n", "flux_t")
    weights = {n: rng.standard_normal(shape) for n in fluxes}

    def gradient():
        args = [gk.Duplicated(a[n], np.zeros_like(a[n])) if n in ("var", "u", "v", "w") else
                gk.Duplicated(a[n], weights[n].copy()) if n in weights else gk.Const(a[n]) for n in rc.SUPERBEE_ARGS]
        return gk.autodiff(rc.superbee_fluxes, *args)
    consts = {n: a[n] for n in ("maskT", "dxt", "dyt", "dzw", "cost", "cosu", "dt")}
    return dict(
        outputs=lambda: {n: a[n] for n in fluxes},
        primal=lambda: rc.superbee_step(*[a[n] for n in rc.SUPERBEE_ARGS]),
        gradient=gradient,
        numba=lambda: rc.superbee_numba(*[a[n] for n in rc.SUPERBEE_ARGS]),
        jax=lambda: (rc.superbee_jax_loss(), (a["var"], a["u"], a["v"], a["w"], consts, weights), (0, 1, 2, 3),
                     True))


class CompileLog:
    """Every Numba compile in this process, timed and attributed to the generated function's role: the
    pipeline's `_generate` is wrapped to learn each generated module's kernel and role, Numba's
    `Dispatcher.compile` to time each compile (exclusive of the compiles it triggers, as of an outlined
    body its entry calls) and to tell a disk-cache hit, and Numba's `numba:llvm_lock` event to split off
    the LLVM part. Pipeline stages are timed by wrapping each Stage's function (`pipeline=False`: not wrapped, so
    that the pipeline's disk cache, which a replaced pipeline function bypasses, is used: a warm row's)."""

    def __init__(self, pipeline: bool = True):
        import time

        from numba.core import event
        from numba.core.dispatcher import Dispatcher

        from gradkern import pipeline as pipeline_module

        self.modules: dict[str, dict] = {}  # generated module name -> kernel, role, lines, parallel loops
        self.compiles: list[dict] = []
        self.stages: dict[str, float] = {}
        self.phase = "primal"  # which call is running: primal or gradient
        stack: list[dict] = []
        if pipeline:
            self._wrap_pipeline(pipeline_module)
        compile_ = Dispatcher.compile

        def logged_compile(disp, sig):
            hits, known = sum(disp._cache_hits.values()), len(disp.overloads)
            frame = dict(llvm=0.0, inner=0.0, inner_cpu=0.0)
            stack.append(frame)
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return compile_(disp, sig)
            finally:
                total, cpu = time.perf_counter() - t0, time.process_time() - c0
                stack.pop()
                if stack:
                    stack[-1]["inner"] += total
                    stack[-1]["inner_cpu"] += cpu
                f = disp.py_func
                if len(disp.overloads) > known:  # else a signature compiled before: nothing was done
                    self.compiles.append(dict(module=f.__module__, function=f.__name__, phase=self.phase,
                                              seconds=total - frame["inner"], cpu=cpu - frame["inner_cpu"],
                                              llvm=frame["llvm"], hit=sum(disp._cache_hits.values()) > hits,
                                              parallel=bool(disp.targetoptions.get("parallel"))))
        Dispatcher.compile = logged_compile

        def llvm(duration):
            if stack:
                stack[-1]["llvm"] += duration
        event.register("numba:llvm_lock", _DurationListener(llvm))

    def _wrap_pipeline(self, pipeline) -> None:
        import hashlib
        import time

        generate = pipeline._generate

        def logged_generate(request, k, role, *args, **kwargs):
            t0 = time.perf_counter()
            spec = generate(request, k, role, *args, **kwargs)
            self.stages["generate"] = self.stages.get("generate", 0.0) + time.perf_counter() - t0
            src = spec.code.source
            if src is not None:
                name = "gradkern_gen_" + hashlib.sha256(src.encode()).hexdigest()[:24]
                self.modules.setdefault(name, dict(kernel=request.kernel.name, role=role,
                                                   lines=src.count("\n"), pranges=src.count("_gk_prange(")))
            return spec
        pipeline._generate = logged_generate

        def timed(stage):
            def run(w):
                t0 = time.perf_counter()
                try:
                    stage.run(w)
                finally:
                    self.stages[stage.name] = self.stages.get(stage.name, 0.0) + time.perf_counter() - t0
            return pipeline.Stage(stage.name, stage.purpose, run, stage.typed)
        for tup in ("PRIMAL_STAGES", "REVERSE_STAGES", "FORWARD_STAGES"):
            setattr(pipeline, tup, tuple(timed(st) for st in getattr(pipeline, tup)))

    def rows(self) -> list[dict]:
        """The gradkern compiles, one per generated function (Numba's own helpers left out)."""
        out = []
        for c in self.compiles:
            m = self.modules.get(c["module"])
            if m is not None:
                out.append({**c, **m})
        return out


class _DurationListener:
    """A Numba event listener that reports each event's duration."""

    def __new__(cls, callback):
        import time

        from numba.core import event

        class Listener(event.Listener):
            def on_start(self, ev):
                self.t0 = time.perf_counter()

            def on_end(self, ev):
                callback(time.perf_counter() - self.t0)
        return Listener()


def child(spec: dict) -> dict:
    """Run one measurement in this (fresh) process; `spec`: kind (gradkern, numba, jax), case, shape, save
    (a path for the primal's outputs) and profile (a path for cProfile's stats)."""
    import time

    import numpy as np

    sys.path.insert(0, str(BENCH))
    case = _case(spec["case"], tuple(spec["shape"]))
    out: dict = {}
    if spec["kind"] == "numba":
        t0 = time.perf_counter()
        case["numba"]()
        out["primal"] = time.perf_counter() - t0
    elif spec["kind"] == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        loss, args, argnums, aux = case["jax"]()
        g = jax.jit(jax.grad(loss, argnums=argnums, has_aux=aux))
        t0 = time.perf_counter()
        jax.block_until_ready(g(*args))
        out["gradient"] = time.perf_counter() - t0
    else:
        log = CompileLog()
        prof = None
        if spec.get("profile"):
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        case["primal"]()
        t1 = time.perf_counter()
        log.phase = "gradient"
        if spec.get("save"):
            np.savez(spec["save"], **case["outputs"]())
        t2 = time.perf_counter()
        case["gradient"]()
        t3 = time.perf_counter()
        if prof is not None:
            prof.disable()
            prof.dump_stats(spec["profile"])
        rows = log.rows()
        out.update(primal=t1 - t0, gradient=t3 - t2, stages=log.stages, compiles=rows,
                   compiled=sum(not r["hit"] for r in rows), loaded=sum(r["hit"] for r in rows))
    return out


def _run_child(spec: dict, env: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise RuntimeError(f"{spec['kind']} {spec['case']} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def jax_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("jax") is not None


def measure_realcode(case: str, shape: tuple[int, int, int], rounds: int, with_jax: bool) -> dict:
    """`rounds` rounds of: gradkern cold, Numba, JAX, gradkern warm (each a fresh process), in that order
    (timing.interleaved without rotation: the warm run reads the cache the cold run of its round wrote)."""
    import numpy as np

    ref = _numba_outputs(case, shape)
    base = dict(case=case, shape=list(shape))
    done = [0]  # rounds finished: each round has its own cache directory and seed
    agree = [True]
    with tempfile.TemporaryDirectory() as tmp:
        def env(warm: bool = False) -> dict:
            folder = Path(tmp, str(done[0]))
            folder.mkdir(exist_ok=True)
            seed = 1000 + done[0] if warm else done[0]
            return {**os.environ, "GRADKERN_CACHE_DIR": str(folder / "cache"), "PYTHONHASHSEED": str(seed)}

        def saved() -> str:
            return str(Path(tmp, str(done[0]), "gk.npz"))

        timers = {"cold": lambda: _run_child({**base, "kind": "gradkern", "save": saved()}, env()),
                  "numba": lambda: _run_child({**base, "kind": "numba"}, env())}
        if with_jax:
            timers["jax"] = lambda: _run_child({**base, "kind": "jax"}, env())
        timers["warm"] = lambda: _run_child({**base, "kind": "gradkern"}, env(warm=True))

        def after_round(r: int, runs: dict) -> None:
            got = np.load(saved())
            agree[0] = agree[0] and all(np.allclose(got[n], ref[n], rtol=1e-10, atol=1e-12) for n in ref)
            print(f"  {case} round {r + 1}: " + ", ".join(
                f"{k} {v[-1].get('primal', 0):.1f}/{v[-1].get('gradient', 0):.1f} s" for k, v in runs.items()),
                  flush=True)
            done[0] += 1

        runs = interleaved(timers, rounds, rotate=False, after_round=after_round)
    return {"jax": [], **runs, "agree": agree[0]}


def _numba_outputs(case: str, shape) -> dict:
    """The Numba primal's outputs on the inputs the children use (computed here, compiled once)."""
    sys.path.insert(0, str(BENCH))
    c = _case(case, tuple(shape))
    c["numba"]()
    return c["outputs"]()


def _median(xs: list[float]) -> float:
    import statistics
    return statistics.median(xs)


def realcode_table(results: dict, shape, rounds: int, with_jax: bool) -> list[str]:
    lines = [
        "| case | gradkern first primal (s) | Numba compile + call (s) | primal / Numba | gradkern first gradient "
        "(s) | gradient / Numba | JAX first jit(grad) (s) | warm primal (s) | warm gradient (s) | "
        "functions compiled cold / warm | primal = Numba |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for case, m in results.items():
        cp, cg = _median([x["primal"] for x in m["cold"]]), _median([x["gradient"] for x in m["cold"]])
        nb = _median([x["primal"] for x in m["numba"]])
        jx = f"{_median([x['gradient'] for x in m['jax']]):.1f}" if with_jax else "not installed"
        wp, wg = _median([x["primal"] for x in m["warm"]]), _median([x["gradient"] for x in m["warm"]])
        lines.append(f"| {case} | {cp:.1f} | {nb:.1f} | {cp / nb:.1f}x | {cg:.1f} | {cg / nb:.1f}x | {jx} | "
                     f"{wp:.2f} | {wg:.2f} | {m['cold'][0]['compiled']} / {m['warm'][0]['compiled']} | "
                     f"{'yes' if m['agree'] else 'NO'} |")
    return lines


def compile_summary(run: dict) -> list[str]:
    """Per call and role of a cold gradkern run: functions compiled, module lines, `prange` loops, seconds."""
    groups: dict[tuple[str, str], list] = {}
    for r in run["compiles"]:
        if r["hit"]:
            continue
        g = groups.setdefault((r["phase"], r["role"]), [0, set(), 0.0, 0.0])
        g[0] += 1
        g[1].add((r["module"], r["lines"], r["pranges"]))
        g[2] += r["seconds"]
        g[3] += r["llvm"]
    lines = ["| call | role | functions compiled | module lines | prange loops | compile (s) | of it LLVM (s) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (phase, role), (n, mods, sec, llvm) in sorted(groups.items(), key=lambda x: (x[0][0] != "primal", -x[1][2])):
        lines.append(f"| {phase} | {role} | {n} | {sum(m[1] for m in mods)} | {sum(m[2] for m in mods)} | {sec:.1f} | "
                     f"{llvm:.1f} |")
    total = sum(r["seconds"] for r in run["compiles"] if not r["hit"])
    lines.append(f"| all | | {sum(not r['hit'] for r in run['compiles'])} | | | {total:.1f} | |")
    pipeline = sum(run["stages"].values())
    lines += ["", f"gradkern's own pipeline (stages and printing): {pipeline:.1f} s; "
              f"stages: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(run["stages"].items(), key=lambda x: -x[1])
                                      if v >= 0.01)]
    return lines


def profile_table(case: str, shape) -> tuple[list[str], dict]:
    """One fresh gradkern process under cProfile: per generated function, its role, size and compile time."""
    import pstats

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GRADKERN_CACHE_DIR": str(Path(tmp, "cache"))}
        stats_path = Path(tempfile.gettempdir(), f"compile_time_{case}.prof")
        m = _run_child(dict(case=case, shape=list(shape), kind="gradkern", profile=str(stats_path)), env)
    lines = [f"{case}: first primal {m['primal']:.1f} s, first gradient {m['gradient']:.1f} s (under cProfile)", "",
             "| call | kernel | role | function | parallel | module lines | prange loops | compile (s) "
             "| of it LLVM (s) |",
             "|---|---|---|---|---|---:|---:|---:|---:|"]
    for r in m["compiles"]:
        par = "yes" if r["parallel"] else "no"
        lines.append(f"| {r['phase']} | {r['kernel']} | {r['role']} | {r['function']} | {par} | "
                     f"{r['lines']} | {r['pranges']} | {r['seconds']:.2f} | {r['llvm']:.2f} |")
    by_role: dict[str, list[float]] = {}
    for r in m["compiles"]:
        by_role.setdefault(r["role"], [0, 0.0])
        by_role[r["role"]][0] += 1
        by_role[r["role"]][1] += r["seconds"]
    lines += ["", "| role | functions compiled | seconds |", "|---|---:|---:|"]
    lines += [f"| {role} | {n} | {sec:.1f} |" for role, (n, sec) in sorted(by_role.items(), key=lambda x: -x[1][1])]
    lines += ["", "| pipeline stage | seconds |", "|---|---:|"]
    lines += [f"| {name} | {sec:.2f} |" for name, sec in sorted(m["stages"].items(), key=lambda x: -x[1])]
    st = pstats.Stats(str(stats_path))
    lines += ["", f"cProfile: {stats_path}"]
    return lines, {"stats": st, "run": m}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", default="length,realcode", help="length, realcode or both (comma-separated)")
    p.add_argument("--sizes", default="25,50,100,200", help="statements of the length rows")
    p.add_argument("--cases", default=",".join(CASES), help="real-code cases")
    p.add_argument("--shape", default="64,64,32", help="the real-code cases' 3-D shape")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the real-code rows (medians)")
    p.add_argument("--profile", action="store_true", help="the real-code cases' compile profile instead")
    p.add_argument("--json", help="also write the real-code rows' raw measurements here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    rows_wanted = set(args.rows.split(","))
    shape = tuple(int(n) for n in args.shape.split(","))
    cases = args.cases.split(",")
    if args.profile:
        for case in cases:
            lines, _ = profile_table(case, shape)
            print("\n".join(lines), "\n", flush=True)
        return
    sections = ["## compile_time.py", ""]
    if "length" in rows_wanted:
        rows = []
        for n in map(int, args.sizes.split(",")):
            for reassigned in (False, True):
                m = measure(n, reassigned)
                rows.append(f"| {n} | {'reassigned' if reassigned else 'distinct'} | {m['primal']:.2f} | "
                            f"{m['reverse']:.2f} | {m['primal_kb']:.0f} | {m['fused_kb']:.0f} |")
                print(rows[-1], flush=True)
        sections += [
            "Seconds from an empty cache to the first primal launch and to the first gradient (fused reverse kernel,"
            " `gk.autodiff`) of a straight-line kernel of n statements `s = sin(s) * 1.5 + x[i] * c` (each in a"
            " fresh process; Numba's compile dominates), and the generated source sizes.", "",
            *run_lines("python benchmarks/compile/compile_time.py --write"), "",
            "| statements | locals | primal compile (s) | gradient compile (s) | primal source (kB) "
            "| fused source (kB) |",
            "|---:|---|---:|---:|---:|---:|", *rows, ""]
    if "realcode" in rows_wanted:
        with_jax = jax_installed()
        results = {case: measure_realcode(case, shape, args.rounds, with_jax) for case in cases}
        if args.json:
            Path(args.json).write_text(json.dumps(results))
        for case, m in results.items():
            print(f"\n{case}, the first cold process's compiles:\n" + "\n".join(compile_summary(m["cold"][0])))
        sections += [
            f"### Real-code rows (issue 29), shape {shape}", "",
            "The kernels of benchmarks/compile/realcode.py (docs/compile-time.md). Seconds from an empty cache to the "
            "first "
            "primal and then to the first gradient (`gk.autodiff` of the kernel or the program), each case in a "
            "fresh process; the hand-written Numba primal's compile and call and JAX's first `jit(grad)` in "
            "fresh processes interleaved with it; `warm`: a new process on the same cache directory with another "
            f"PYTHONHASHSEED. Medians of {args.rounds} rounds.", "",
            *run_lines(f"python benchmarks/compile/compile_time.py --rows realcode --rounds {args.rounds}"), "",
            *realcode_table(results, shape, args.rounds, with_jax), ""]
    publish("\n".join(sections), "## compile_time.py", args.write)


if __name__ == "__main__":
    main()
