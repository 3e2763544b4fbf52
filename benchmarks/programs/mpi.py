"""Distributed programs (issue 32, docs/distributed.md): primal and gradient time per step of a 2-D heat
loop decomposed by gradkern.mpi, at P = 1, 2 and 4 ranks (4 oversubscribed on 2 cores, reported as such),
at fixed local size (weak scaling) and fixed global size (strong scaling); the bytes each rank sends in the
forward and in the reverse; the exchange's share of a primal step; the cost of one message (ping-pong) and of
the per-exchange agreement (an Allreduce of 27 integers since session 55; 5 before). Then a model of weak
scaling to 1,000 and 100,000 ranks (printed, and written to RESULTS.md with the measurements).

    python benchmarks/programs/mpi.py [--quick] [--write]     # launches the mpiexec jobs itself

Each job: `mpiexec -n P python -m mpi4py benchmarks/programs/mpi.py --job NX NY STEPS ROUNDS OUT.json`; its rank 0
writes the medians (after a warm-up) of interleaved rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def job(nx: int, ny: int, steps: int, rounds: int, out: str) -> None:
    """One mpiexec job (every rank)."""
    from mpi4py import MPI

    import gradkern as gk
    import gradkern.mpi as gkm

    @gk.kernel
    def heat(u, v, c):
        i, j = gk.tid()
        a = i + 1
        b = j + 1
        v[a, b] = u[a, b] + c * (u[a - 1, b] + u[a + 1, b] + u[a, b - 1] + u[a, b + 1] - 4.0 * u[a, b])

    @gk.kernel
    def energy(u, E):
        i, j = gk.tid()
        gk.atomic_add(E, 0, u[i + 1, j + 1] * u[i + 1, j + 1])

    world = MPI.COMM_WORLD
    grid = gkm.Cartesian(world, (nx, ny), ghosts=1, periodic=(False, True))
    rng = np.random.default_rng(world.rank)
    u0 = rng.random(grid.padded_shape)

    def simulate(u, v, E, c):
        for _ in range(steps):
            grid.exchange(u)
            gk.launch(heat, grid.local_shape, u, v, c)
            u, v = v, u
        gk.launch(energy, grid.local_shape, u, E)

    def primal():
        simulate(u0.copy(), grid.zeros(), np.zeros(1), 0.2)

    def gradient():
        gk.autodiff(simulate, gk.Duplicated(u0.copy(), grid.zeros()), gk.Duplicated(grid.zeros(), grid.zeros()),
                    gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2))

    u = u0.copy()

    def exchanges():
        for _ in range(steps):
            grid.exchange(u)

    def agreements():
        for _ in range(steps):
            grid.halo.check(u)

    def compute():
        v = grid.zeros()
        for _ in range(steps):
            gk.launch(heat, grid.local_shape, u, v, 0.2)

    sent = grid.halo.sent
    primal()
    gradient()  # warm-up: compiled, loaded
    before = dict(sent)
    primal()
    primal_bytes = sent["forward"] - before["forward"]
    before = dict(sent)
    gradient()
    grad_forward, grad_reverse = sent["forward"] - before["forward"], sent["reverse"] - before["reverse"]
    parts = {"primal": primal, "gradient": gradient, "exchange": exchanges, "agreement": agreements,
             "compute": compute}
    sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/: timing
    from timing import interleaved, timed

    # the same rotated order on every rank; a barrier before the clock starts and before it stops
    times = interleaved({name: timed(f, sync=world.Barrier) for name, f in parts.items()}, rounds)
    # one message: ping-pong of 8 bytes and of 1 MiB between ranks 0 and 1
    pingpong = {}
    if world.size > 1:
        for size in (1, 131072):
            buf = np.zeros(size)
            samples = []
            for _ in range(50):
                world.Barrier()
                start = time.perf_counter()
                if world.rank == 0:
                    world.Send(buf, dest=1)
                    world.Recv(buf, source=1)
                elif world.rank == 1:
                    world.Recv(buf, source=0)
                    world.Send(buf, dest=0)
                samples.append((time.perf_counter() - start) / 2)
            pingpong[str(8 * size)] = statistics.median(samples)
    if world.rank == 0:
        with open(out, "w") as f:
            json.dump({"ranks": world.size, "dims": grid.dims, "local": grid.local_shape, "global": grid.shape,
                       "steps": steps, "per_step": {k: statistics.median(v) / steps for k, v in times.items()},
                       "bytes_per_step": {"primal": primal_bytes / steps, "gradient forward": grad_forward / steps,
                                          "gradient reverse": grad_reverse / steps},
                       "pingpong": pingpong}, f)
    grid.free()


def launch(nranks: int, nx: int, ny: int, steps: int, rounds: int) -> dict:
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    # one Numba thread per rank: the ranks are the parallelism (2 threads per rank on 2 shared cores spend
    # milliseconds per launch waiting for each other)
    env = dict(os.environ, MPIR_CVAR_POLLS_BEFORE_YIELD="10", GRADKERN_COMPILE_WORKERS="0", NUMBA_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        subprocess.run([mpiexec, "-n", str(nranks), sys.executable, "-m", "mpi4py", os.path.abspath(__file__),
                        "--job", str(nx), str(ny), str(steps), str(rounds), out], env=env, check=True, timeout=1800)
        with open(out) as f:
            return json.load(f)


# the model's interconnect: a 200 Gb/s InfiniBand (HDR) link, 1.5 us MPI latency between nodes
LATENCY, BANDWIDTH = 1.5e-6, 25e9


def model(local: int, compute_primal: float, compute_gradient: float, agreement_latency: float) -> list[str]:
    """Weak scaling of one step of a 2-D 5-point decomposition with local x local cells per rank: 4 messages of
    `local` doubles per exchange (2 axes x 2 directions; the corners ride along), forward and reverse alike."""
    rows = ["| ranks | primal per step | gradient per step | gradient / primal | exchange per step "
            "(forward = reverse) | agreement Allreduce per exchange |", "|---|---|---|---|---|---|"]
    message = LATENCY + 8 * local / BANDWIDTH
    for ranks in (1_000, 100_000):
        exchange = 4 * message
        agree = agreement_latency * np.log2(ranks)
        primal = compute_primal + exchange + agree
        gradient = compute_gradient + 2 * exchange + agree  # the recording's forward exchange, then the reverse's
        rows.append(f"| {ranks:,} | {1e3 * primal:.3f} ms | {1e3 * gradient:.3f} ms | {gradient / primal:.2f} | "
                    f"{1e6 * exchange:.1f} us | {1e6 * agree:.1f} us |")
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        nx, ny, steps, rounds = (int(x) for x in sys.argv[2:6])
        job(nx, ny, steps, rounds, sys.argv[6])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 x 64 cells per rank, 5 steps, 2 rounds")
    parser.add_argument("--write", action="store_true", help="replace the mpi.py section of RESULTS.md")
    args = parser.parse_args()
    local, steps, rounds = (64, 5, 2) if args.quick else (256, 20, 5)
    sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/: report
    from report import publish, run_lines

    runs = []
    for kind, shapes in (("weak", {1: (local, local), 2: (2 * local, local), 4: (2 * local, 2 * local)}),
                         ("strong", {1: (2 * local, 2 * local), 2: (2 * local, 2 * local), 4: (2 * local, 2 * local)})):
        for nranks, (nx, ny) in shapes.items():
            r = launch(nranks, nx, ny, steps, rounds)
            r["kind"] = kind
            runs.append(r)
            print(f"{kind} P={nranks}: {r['per_step']}", flush=True)
    lines = ["## mpi.py", "", *run_lines("python benchmarks/programs/mpi.py" + (" --quick" if args.quick else "")), "",
             f"A 2-D 5-point heat loop of {steps} steps (`grid.exchange` + one launch per step), decomposed by "
             "`gradkern.mpi.Cartesian` (ghosts 1, periodic in y), one Numba thread per rank; medians of interleaved "
             "rounds after a warm-up, per step. P = 4 runs 4 ranks on 2 cores (oversubscribed: its times are not "
             "scaling). Exchange: the exchanges alone; agreement: the per-exchange check alone (one Allreduce of "
             "27 integers since session 55); compute: the launches alone. Bytes: what rank 0 sends per step.", "",
             "| scaling | P (dims) | global | local (rank 0) | primal | gradient | gradient / primal | exchange "
             "(share of primal) | agreement | compute | bytes: primal, gradient forward, gradient reverse |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        t, b = r["per_step"], r["bytes_per_step"]
        note = " (oversubscribed)" if r["ranks"] > (os.cpu_count() or 1) else ""
        lines.append(f"| {r['kind']} | {r['ranks']}{note} ({r['dims'][0]}x{r['dims'][1]}) | "
                     f"{r['global'][0]}x{r['global'][1]} | {r['local'][0]}x{r['local'][1]} | "
                     f"{1e3 * t['primal']:.3f} ms | {1e3 * t['gradient']:.3f} ms | {t['gradient'] / t['primal']:.2f} | "
                     f"{1e3 * t['exchange']:.3f} ms ({t['exchange'] / t['primal']:.0%}) | "
                     f"{1e6 * t['agreement']:.1f} us | {1e3 * t['compute']:.3f} ms | "
                     f"{b['primal']:.0f}, {b['gradient forward']:.0f}, {b['gradient reverse']:.0f} |")
    two = next(r for r in runs if r["ranks"] == 2 and r["kind"] == "weak")
    pp = two["pingpong"]
    lines += ["", f"One message between two ranks on this machine (shared memory, ping-pong): "
                  f"{1e6 * pp['8']:.1f} us for 8 bytes, {1e6 * pp['1048576']:.0f} us for 1 MiB "
                  f"({1048576 / pp['1048576'] / 1e9:.2f} GB/s)."]
    one = next(r for r in runs if r["ranks"] == 1 and r["kind"] == "weak")
    # compute per step, from P = 1 (no neighbours: the exchange is local copies); the gradient's compute is
    # the measured gradient step less its (local) exchanges
    cp, cg = one["per_step"]["compute"], one["per_step"]["gradient"] - 2 * one["per_step"]["exchange"]
    lines += ["", f"**Model of weak scaling** ({local}x{local} cells per rank, as measured at P = 1: compute "
                  f"{1e3 * cp:.3f} ms per primal step, {1e3 * cg:.3f} ms per gradient step) on a stated interconnect: "
                  f"{1e6 * LATENCY:.1f} us latency, {BANDWIDTH / 1e9:.0f} GB/s per link (InfiniBand HDR). Each "
                  "exchange is 4 messages of one edge (2 axes x 2 directions; the corners ride in the second axis's "
                  "slabs); the reverse sends the same 4 messages back, so the gradient pays the exchange twice (the "
                  "recording's forward and the reverse) against the primal's once, independently of P. The "
                  "per-exchange agreement is an Allreduce: latency x log2 P, the only term that grows with P.", "",
              *model(local, cp, cg, LATENCY)]
    big = 100_000
    agree_big = LATENCY * np.log2(big)
    primal_big = cp + 4 * (LATENCY + 8 * local / BANDWIDTH) + agree_big
    lines += ["", "Reading: the adjoint's communication is the primal's mirrored (the same messages and bytes: the "
                  "bytes columns above), so the exchanges cost the gradient what they cost the primal, twice, at "
                  "any P. At this block size the gradient step is bound by gradkern's host work per recorded "
                  f"launch and rule call ({1e3 * cg:.2f} ms against {1e3 * cp:.3f} ms of compute), not by "
                  "messages. The term that grows with P is the per-exchange agreement: at 100,000 ranks it would "
                  f"be {agree_big / primal_big:.0%} of the primal step ({1e6 * agree_big:.0f} us of "
                  f"{1e3 * primal_big:.3f} ms), and it synchronises all ranks every step: `Cartesian(..., "
                  "checks=\"first\")` removes it (only a grid's first exchange agrees, and a reverse-mode program's "
                  "exchanges' activity once per reverse; docs/distributed.md)."]
    publish("\n".join(lines), "## mpi.py", args.write)


if __name__ == "__main__":
    main()
