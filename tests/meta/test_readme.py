"""The Python code blocks of README.md and of every documentation page (docs/*.md) run, verbatim, in the
order they appear and in one namespace per page (a later block uses what an earlier one defined, as a reader
would), so neither the README nor the docs can drift from the code. After a page's blocks have run, what
their comments promise is asserted here, page by page."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gradkern.backends import numba_cpu

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """Each ```python block of a Markdown text with the line it starts on."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def run_blocks(page: Path, tmp_path: Path) -> dict:
    """Run a page's Python blocks in order in one fresh namespace; return the namespace."""
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    assert blocks, f"{page.name}: no Python blocks found"
    namespace: dict = {"__name__": page.stem.replace("-", "_")}
    for number, (line, code) in enumerate(blocks, 1):
        # gk.kernel reads a kernel's source from its file: each block gets one
        path = tmp_path / f"{page.stem}_block_{number}.py"
        path.write_text(code, encoding="utf-8")
        try:
            exec(compile(code, str(path), "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{page.name}:{line}: code block {number} fails: {type(e).__name__}: {e}") from e
    return namespace


@pytest.fixture(autouse=True)
def _serial_twins(monkeypatch):
    """The blocks' launches run their serial twins whatever their size, as the rest of the suite's do: the pages'
    arrays are a reader's, many past SERIAL_THREADS, and the parallel entries they compiled were half of this file's CPU
    (57 s against 31 s cold, session 54). A twin is its parallel entry's source compiled without parallel=True, bit
    for bit its results (tests/backends/test_serial_twin.py); what the blocks print and the checks below assert is
    the same (docs/testing.md, "Test time")."""
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 10**9)


@pytest.mark.slow
def test_readme_python_blocks_run_verbatim(tmp_path):
    namespace = run_blocks(README, tmp_path)
    grads = namespace["grads"]
    assert grads[0] is None and grads[1] is None and grads[3] is None and isinstance(grads[2], float), grads


# ---- the documentation pages: what each page's comments promise ----------------------------------------------

def _getting_started(ns):
    grads = ns["grads"]
    assert grads[0] is None and grads[1] is None and grads[3] is None and isinstance(grads[2], float), grads
    assert np.abs(ns["du"]).max() > 0  # du now holds dL/du
    assert ns["report"].ok and ns["report"].checked > 0


def _launches(ns):
    import gradkern as gk
    assert isinstance(ns["race"], gk.RaceError)


def _shadows_and_modes(ns):
    grads, split = ns["grads"], ns["split_grads"]
    assert grads[0] is None and grads[1] is None and grads[3] is None and isinstance(grads[2], float), grads
    # the split pair gives the fused call's derivatives (same kernels and values; Active sums may reorder)
    assert split[0] is None and abs(split[2] - grads[2]) <= 1e-12 * abs(grads[2])
    assert ns["J"].shape == (20, 20)


def _programs(ns):
    assert ns["tape"].saved_bytes == 99 * 8000  # one state per launch but the first
    assert isinstance(ns["dE_dc"], float)
    assert ns["report"].saved_bytes == 99 * 8000 and ns["report"].launches[1].saved_bytes == 8000


def _checkpointed_loops(ns):
    """The checkpointed loop's example gives the gradient of the same program with a plain loop."""
    import gradkern as gk
    got = ns["du0"], ns["dv0"], ns["ck_grads"][3]
    plain = gk.checkpointed_loop

    def loop(step, nsteps, **_):
        for t in range(nsteps):
            step(t)
    gk.checkpointed_loop = loop  # the block looks the function up at call time
    try:
        u, v = np.random.default_rng(1).uniform(-0.5, 0.5, (2, 1000))
        du, dv = np.zeros_like(u), np.zeros_like(v)
        dc = gk.autodiff(ns["simulate_checkpointed"], gk.Duplicated(u, du), gk.Duplicated(v, dv),
                         gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2), 100)[3]
    finally:
        gk.checkpointed_loop = plain
    # the same kernels on the same values: equal up to the order of the atomic sums
    np.testing.assert_allclose(got[0], du, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got[1], dv, rtol=1e-12, atol=1e-15)
    assert abs(got[2] - dc) <= 1e-12 * abs(dc)


def _custom_rules(ns):
    assert isinstance(ns["heat_grads"][2], float) and ns["heat_grads"][0] is None
    assert np.abs(ns["du_heat"]).max() > 0


def _interop(ns):
    """The JAX program's gradient is the one gradkern gives directly; torch's un and gradients exist."""
    import gradkern as gk
    u0 = np.asarray(ns["u0"])
    du0 = np.zeros_like(u0)
    dc = gk.autodiff(ns["simulate"], gk.Duplicated(u0.copy(), du0), gk.Duplicated(np.zeros(100), np.zeros(100)),
                     gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2), 50)[3]
    np.testing.assert_allclose(np.asarray(ns["du0"]), du0, rtol=1e-12, atol=1e-15)
    assert ns["dc"].shape == () and abs(float(ns["dc"]) - dc) <= 1e-12 * abs(dc)
    assert ns["u"].grad.shape == (100,) and ns["c"].grad.shape == ()


def _gpu(ns):
    assert "__global__" in ns["cuda_c"]
    assert "fused" in ns["reverse_c"]


def _adjoint_forms(ns):
    assert ns["forms"] == {"K_11": "plain add", "u": "plain add"}, ns["forms"]  # thread-own at ti + 1


def _errors(ns):
    import gradkern as gk
    e = ns["syntax_error"]
    assert isinstance(e, gk.KernelSyntaxError) and "np.square" in str(e) and e.loc.line == 8 and e.hint
    assert isinstance(ns["annotation_error"], gk.AnnotationError)


CHECKS = {"getting-started.md": _getting_started, "launches.md": _launches,
          "shadows-and-modes.md": _shadows_and_modes, "programs.md": _programs,
          "checkpointed-loops.md": _checkpointed_loops, "custom-rules.md": _custom_rules, "gpu.md": _gpu,
          "errors.md": _errors, "adjoint-forms.md": _adjoint_forms, "interop.md": _interop}
PAGES = sorted(p.name for p in DOCS.glob("*.md") if python_blocks(p.read_text(encoding="utf-8")))


def test_every_checked_page_has_python_blocks():
    assert set(CHECKS) <= set(PAGES), set(CHECKS) - set(PAGES)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_docs_python_blocks_run_verbatim(page, tmp_path):
    if page == "hostcuda.md":
        from gradkern.backends.hostcuda import compiler
        if compiler() is None:
            pytest.skip("g++ is not on the PATH: backend hostcuda is unavailable (as tests/backends/test_hostcuda.py)")
    if page == "interop.md":  # JAX is in the test extra; torch's CPU build only where CI could install it
        pytest.importorskip("jax", reason="JAX is not installed")
        pytest.importorskip("torch", reason="torch is not installed (pip install 'gradkern[torch]')")
    namespace = run_blocks(DOCS / page, tmp_path)
    if page in CHECKS:
        CHECKS[page](namespace)
