"""The README's Python code blocks run, verbatim, in the order they appear and
in one namespace (a later block uses what an earlier one defined, as a reader
would), so the README cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """Each ```python block of a Markdown text with the line it starts on."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.mark.slow
def test_readme_python_blocks_run_verbatim(tmp_path):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 2, "the README's examples were not found"
    namespace: dict = {"__name__": "readme"}
    for number, (line, code) in enumerate(blocks, 1):
        # gk.kernel reads a kernel's source from its file: each block gets one
        path = tmp_path / f"readme_block_{number}.py"
        path.write_text(code, encoding="utf-8")
        try:
            exec(compile(code, str(path), "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"README.md:{line}: code block {number} fails: {type(e).__name__}: {e}") from e

    # what the blocks' comments promise
    grads = namespace["grads"]
    assert grads[0] is None and grads[1] is None and grads[3] is None and isinstance(grads[2], float), grads
    assert namespace["J"].shape == (20, 20)
    assert namespace["tape"].saved_bytes == 99 * 8000  # the Programs example: one state per launch but the first
    assert isinstance(namespace["dE_dc"], float)
    assert isinstance(namespace["heat_grads"][2], float) and namespace["heat_grads"][0] is None  # Custom rules
    assert np.abs(namespace["du_heat"]).max() > 0
    assert namespace["report"].saved_bytes == 99 * 8000 and namespace["report"].launches[1].saved_bytes == 8000
    _checkpointed_example_matches_the_plain_loop(namespace)


def _checkpointed_example_matches_the_plain_loop(namespace):
    """The checkpointed loop's example gives the gradient of the same program with a plain loop."""
    import numpy as np

    import gradkern as gk
    got = namespace["du0"], namespace["dv0"], namespace["ck_grads"][3]
    plain = gk.checkpointed_loop

    def loop(step, nsteps, **_):
        for t in range(nsteps):
            step(t)
    gk.checkpointed_loop = loop  # the block looks the function up at call time
    try:
        u, v = np.random.default_rng(1).uniform(-0.5, 0.5, (2, 1000))
        du, dv = np.zeros_like(u), np.zeros_like(v)
        dc = gk.autodiff(namespace["simulate_checkpointed"], gk.Duplicated(u, du), gk.Duplicated(v, dv),
                         gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2), 100)[3]
    finally:
        gk.checkpointed_loop = plain
    # the same kernels on the same values: equal up to the order of the atomic sums
    np.testing.assert_allclose(got[0], du, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got[1], dv, rtol=1e-12, atol=1e-15)
    assert abs(got[2] - dc) <= 1e-12 * abs(dc)
