"""Run by tests/runtime/test_compile_pool.py in a fresh process: a small program's gradient, with what the
compile pool and the disk cache did, as JSON on stdout."""

import json
import sys

import numpy as np

import gradkern as gk
from gradkern.backends import compile_worker, numba_cache
from gradkern.runtime import compile_pool


@gk.kernel
def diffuse(u, v, c):
    i = gk.tid()
    if i > 0 and i < u.shape[0] - 1:
        v[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1]) + gk.tanh(u[i]) * u[i]
    else:
        v[i] = u[i]


@gk.kernel
def react(v, u, c):
    i = gk.tid()
    x = v[i]
    for _ in range(2):
        x = x * gk.sin(x) + c
    u[i] = x


def program(u, v, c):
    for _ in range(3):
        gk.launch(diffuse, u.shape[0], u, v, c)
        gk.launch(react, v.shape[0], v, u, c)


def main(mode: str) -> None:
    if mode == "broken":
        compile_worker.COMMAND = [sys.executable, "-c", "pass"]  # a worker that never becomes ready
    rng = np.random.default_rng(7)
    n = 300
    u, v = rng.random(n) + 0.5, rng.random(n)
    du, dv = rng.random(n), rng.random(n)
    args = (gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.3))
    forward, reverse = gk.autodiff_thunk(program, *args)
    tape = forward(*args)
    idle = compile_pool.wait_idle(timeout=600) if mode == "wait" else None
    grads = reverse(*args, tape)
    print(json.dumps({"du": du.tolist(), "dv": dv.tolist(), "dc": grads[2], "u": u.tolist(),
                      "stats": compile_pool.stats, "idle": idle, "compiled": numba_cache.compiled,
                      "loaded": numba_cache.loaded}))


if __name__ == "__main__":
    main(sys.argv[1])
