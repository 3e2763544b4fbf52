"""The prepared GPU check (issue 30, docs/hostcuda.md "What only a real GPU checks"): one command for a
machine with a CUDA GPU and CuPy, within 8 minutes on an H100/H200.

Phases, each a subprocess with its own time limit (a phase that runs out is killed and reported, the
next one still runs):

1. env         nvidia-smi, versions, `python -m gradkern info`
2. gpu-tests   the GPU tests on real CuPy against the Numba CPU backend (tests/gpu/test_gpu.py,
               test_gpu_programs.py; test_cuda.py's nvcc compiles run in CI), and the device tests of reverse-mode
               while loops and the tape guard (tests/transforms/test_while_reverse.py, test_tape_guard.py)
3. interop     tests/gpu/test_gpu_interop.py: gk.interop on CUDA tensors (zero-copy by DLPack, torch's current
               stream, gradients against central differences and the CPU run, torch.compile) and JAX GPU arrays
               (the host callback), with JAX told not to take 75 % of the device's memory
4. mpi         tests/gpu/test_gpu_mpi.py: gradkern.mpi's exchanges and allreduce on CuPy arrays on 2 ranks. The
               machine has mpi4py but no MPI library or mpiexec: where none is on PATH the phase unpacks
               .whl/mpich-*.whl (carried with the other wheels, docs/hostcuda.md) into a temporary folder and
               points PATH and MPI4PY_LIBMPI at it (pip --target drops the wheel's lib/); without it, skipped
5. bench-gpu   benchmarks/gpu/gpu.py: Allen-Cahn, generated vs hand-written CUDA, JAX, PyTorch
6. bench-rules benchmarks/programs/rules.py --gpu
7. bench-lib   benchmarks/library/library.py --gpu
8. bench-programs   benchmarks/programs/programs.py --gpu: a program's gradient against hand-written CUDA and JAX
               (N = 10^6 float64: host-bound, a step's kernels take ~35 us)
8b. bench-goal  the same at issue 33's size, N = 2^24 float32 (the goal: <= 1.3x hand-written, >= 1.4x ahead of JAX)
9. bench-checkpoint benchmarks/programs/checkpoint.py --gpu --steps 200: store-all and checkpointed (device and
               host snapshots) against hand-written CUDA, with CuPy's pool peak. T = 200, not the CPU table's
               1000: its 4 gradkern rows run 5 times each (warm-up, 3 timed, the pool peak), and at T = 1000
               one call took 1.4-3.7 s on the H200 (2026-11-30, before the block sums), 40 s and more in all;
               at T = 200 about a fifth of that (some 15-20 s), inside its 40 s
10. vs-hostcuda tests/gpu/test_gpu.py again with GRADKERN_BACKEND=hostcuda: CuPy against the *same* CUDA C
               run on the host, so a difference is device behaviour (math ulps, FMA contraction), not
               the printer. Tolerances are test_gpu.py's: float64 1e-12 relative, float32 1e-5 (a few
               ulps of CUDA's device math, docs/hostcuda.md), sums scaled by their largest term.
11. profile    benchmarks/gpu/profile_program.py: where a program's gradient spends its host time (cProfile)

Every phase's log and one summary table go to --out (default $OUT, else ./gpucheck-out); the summary
is what RESULTS.md's "GPU check" section quotes. The limits add up to 460 s (`--budget` scales them all); the
phases took about 160 s on 2026-11-30 before interop, mpi and profile were added.

    python ci/gpu_check.py                 # all phases, at most 7.7 minutes
    python ci/gpu_check.py --only interop,mpi   # some phases, by name
    python ci/gpu_check.py --budget 300    # scale every phase's limit down
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
WORKERS = str(min(16, os.cpu_count() or 2))

# (name, seconds of a 460-second budget, scaled to --budget; command; extra environment, or a function giving it)
PHASES = [
    ("env", 15, f"nvidia-smi; {PY} -c 'import cupy, numba, numpy; print(\"cupy\", cupy.__version__, "
     "\"numba\", numba.__version__, \"numpy\", numpy.__version__); print(cupy.cuda.runtime.getDeviceProperties(0)"
     f"[\"name\"])'; "
     # what the interop and mpi phases need: torch and JAX seeing the GPU, mpi4py, an mpiexec (else the mpich wheel)
     f"{PY} -c 'import torch, jax; print(\"torch\", torch.__version__, torch.cuda.is_available(), \"jax\", "
     f"jax.__version__, jax.devices())'; {PY} -c 'import mpi4py; print(\"mpi4py\", mpi4py.__version__)'; "
     f"which mpiexec; ls .whl; {PY} -m gradkern info", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    ("gpu-tests", 105, f"{PY} -m pytest -q -rfE -p no:cacheprovider -n {WORKERS} tests/gpu/test_gpu.py "
     "tests/gpu/test_gpu_programs.py tests/library/test_library_benchmark.py "
     # reverse-mode while loops and the tape guard on the device (--fmad=false: docs/adjoint-forms.md 13)
     "tests/transforms/test_while_reverse.py::test_gradients_on_hostcuda "
     "tests/transforms/test_tape_guard.py::test_fused_overflow_on_the_device "
     "tests/transforms/test_tape_guard.py::test_split_overflow_on_the_device", {}),
    # 8 workers: each imports torch and JAX and makes their CUDA contexts (seconds each), for 25 short tests
    ("interop", 55, f"{PY} -m pytest -q -rfE -rs -p no:cacheprovider -n 8 tests/gpu/test_gpu_interop.py",
     {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    # two ranks, each compiling its kernels for Numba and NVRTC from an empty cache: most of the phase's time
    ("mpi", 65, f"{PY} -m pytest -q -rfE -rs -p no:cacheprovider -n 0 tests/gpu/test_gpu_mpi.py", lambda: _mpi_env()),
    ("bench-gpu", 40, f"{PY} benchmarks/gpu/gpu.py --no-write --reps 5", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    ("bench-rules", 30, f"{PY} benchmarks/programs/rules.py --gpu --runs 3", {}),
    ("bench-lib", 30, f"{PY} benchmarks/library/library.py --gpu --runs 5", {}),
    ("bench-programs", 15, f"{PY} benchmarks/programs/programs.py --gpu --runs 3",
     {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    # issue 33's GPU goal at its size: N = 2^24 float32, T = 100 (6.7 GB of saved states per store-all row)
    ("bench-goal", 20, f"{PY} benchmarks/programs/programs.py --gpu --n 16777216 --dtype float32 --runs 3",
     {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    ("bench-checkpoint", 40, f"{PY} benchmarks/programs/checkpoint.py --gpu --steps 200 --runs 3", {}),
    ("vs-hostcuda", 30, f"{PY} -m pytest -q -rfE -p no:cacheprovider -n {WORKERS} tests/gpu/test_gpu.py",
     {"GRADKERN_BACKEND": "hostcuda"}),
    ("profile", 15, f"{PY} benchmarks/gpu/profile_program.py --top 20", {}),
]


def _mpi_env() -> dict:
    """PATH and MPI4PY_LIBMPI for the mpi phase: nothing where an mpiexec is found; else the mpich wheel in .whl/
    unpacked (bin/ and lib/, modes kept) into a temporary folder, as `pip install --target` does not (it drops
    the wheel's lib/, where libmpi.so.12 is). No wheel: nothing, and the phase's tests skip, saying why."""
    here = os.path.dirname(PY) + os.pathsep + os.environ.get("PATH", "")
    wheels = sorted((ROOT / ".whl").glob("mpich-*.whl"))
    if shutil.which("mpiexec", path=here) or not wheels:
        return {}
    to = Path(tempfile.mkdtemp(prefix="gpucheck-mpich-"))
    with zipfile.ZipFile(wheels[-1]) as z:
        for info in z.infolist():
            if "/data/bin/" in info.filename or "/data/lib/" in info.filename:
                path = z.extract(info, to)
                os.chmod(path, (info.external_attr >> 16) & 0o777 or 0o644)
    data = next(to.glob("mpich-*.data")) / "data"
    print(f"mpi: unpacked {wheels[-1].name} into {data}", flush=True)
    return {"PATH": f"{data / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "MPI4PY_LIBMPI": str(data / "lib" / "libmpi.so.12")}


def _outcome(log: str, rc: int | None) -> str:
    """pytest's last summary line, or the exit status."""
    m = re.findall(r"^=* ?(\d+ (?:passed|failed|error).*?) in [\d.]+s", log, re.M)
    if m:
        return m[-1].strip("= ")
    return "killed at its limit" if rc is None else f"exit {rc}"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--budget", type=float, default=460.0, help="seconds for all phases together")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpucheck-out"))
    p.add_argument("--only", default=None, help="comma-separated phase names")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    scale = args.budget / sum(s for _, s, _, _ in PHASES)
    only = set(args.only.split(",")) if args.only else None
    if only and only - {name for name, *_ in PHASES}:
        p.error(f"--only: no phase {sorted(only - {name for name, *_ in PHASES})}; the phases are "
                f"{', '.join(name for name, *_ in PHASES)}")
    rows = []
    t_all = time.perf_counter()
    for name, seconds, cmd, extra in PHASES:
        if only and name not in only:
            continue
        limit = seconds * scale
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra() if callable(extra) else extra))
        print(f"\n##### {name}: {cmd}  (limit {limit:.0f} s)", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=limit)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            log, _ = proc.communicate()
            rc = None
        dt = time.perf_counter() - t0
        (args.out / f"{name}.log").write_text(f"$ {cmd}\n{log}")
        print(log[-6000:], flush=True)
        rows.append((name, _outcome(log, rc), dt))
        _write_summary(args.out, rows, time.perf_counter() - t_all)
    print(_write_summary(args.out, rows, time.perf_counter() - t_all))
    return 0 if all(_passed(outcome) for _, outcome, _ in rows) else 1


def _passed(outcome: str) -> bool:
    """A phase passed: exit 0, or a pytest summary with no failure or error."""
    if outcome.startswith("exit ") or outcome == "killed at its limit":
        return outcome == "exit 0"
    return "failed" not in outcome and "error" not in outcome


def _write_summary(out: Path, rows, total: float) -> str:
    lines = [f"GPU check, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
             f"`python ci/gpu_check.py` ({shlex.quote(' '.join(sys.argv[1:]))}), total {total:.0f} s", "",
             "| phase | outcome | seconds |", "|---|---|---|"]
    lines += [f"| {n} | {o} | {s:.0f} |" for n, o, s in rows]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
