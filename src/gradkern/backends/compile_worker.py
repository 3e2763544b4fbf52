"""A compile worker: the process runtime/compile_pool.py starts as `python -m gradkern.backends.compile_worker`
(a fresh interpreter, not multiprocessing: a spawned child would re-run the user's script, which rarely
has a `__main__` guard). It compiles one `base.Ahead` at a time into the shared disk cache, where the main
process loads it at the launch (docs/compile-time.md, finding 7).

Protocol, on the process's own stdin and stdout: each message is an 8-byte little-endian length and a
pickle. The worker sends ("ready",) once Numba is imported, then for each request the answer
("ok", "compiled" | "loaded", [CacheWarning messages]) or ("error", text). End of input ends it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import IO, Any

COMMAND = [sys.executable, "-m", "gradkern.backends.compile_worker"]  # how a worker is started


class Worker:
    """One worker process, seen from the main process: started with the environment of this one (less its
    own compile workers), asked one request at a time by one thread, retired when it fails."""

    def __init__(self):
        env = dict(os.environ, GRADKERN_COMPILE_WORKERS="0")
        self.proc = subprocess.Popen(COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)

    def ready(self) -> bool:
        """Wait for the worker to have imported Numba; False if it ended instead."""
        try:
            return receive(self.proc.stdout) == ("ready",)
        except OSError:
            return False

    def ask(self, request: Any) -> Any:
        """The worker's answer to `request` (see the module's docstring), or None if it ended."""
        try:
            send(self.proc.stdin, request)
            return receive(self.proc.stdout)
        except (OSError, ValueError):
            return None

    def retire(self) -> None:
        self.proc.kill()


def send(out: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message)
    out.write(len(data).to_bytes(8, "little") + data)
    out.flush()


def receive(inp: IO[bytes]) -> Any:
    """The next message, or None at the end of input."""
    head = inp.read(8)
    if len(head) < 8:
        return None
    n = int.from_bytes(head, "little")
    data = inp.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever Numba or a warning prints goes to stderr, never into the answers
    sys.stdout = sys.stderr
    from .numba_cache import compile_ahead

    send(out, ("ready",))
    inp = sys.stdin.buffer
    while True:
        request = receive(inp)
        if request is None:
            return
        try:
            outcome, messages = compile_ahead(request)
            answer: tuple = ("ok", outcome, messages)
        except Exception as e:  # the main process compiles it at the launch and reports the error there
            answer = ("error", f"{type(e).__name__}: {e}")
        send(out, answer)


if __name__ == "__main__":
    main()
