"""Every example (examples/NAME.py, installed as gradkern.examples.NAME) runs
as a user runs it (`python examples/NAME.py`, from the repository root, a
process of its own) with `--quick --out DIR` (DIR a temporary folder, never
the repository; launches on serial twins, TWINS below), exits 0, prints that its misfit fell and writes DIR/NAME.png
(the convention of examples/README.md): a broken gradient or plot fails
here, not only in the example's hands. tests/meta/test_cli.py runs them by name
through `python -m gradkern demo NAME`."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
FELL = re.compile(r"^misfit fell: (\S+) -> (\S+)", re.MULTILINE)
WROTE = re.compile(r"^wrote (.+\.png)$", re.MULTILINE)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# a figure of a few panels with curves is tens of kB; an empty canvas of that size is a few kB
MIN_PNG_BYTES = 10_000
# more runs of an example than its default one, each with --quick
MORE = {"heat_inverse.py": [["--recover", "initial"]], "learn_source.py": [["--framework", "torch"]]}
RUNS = [pytest.param(path, args, id=" ".join([path.name, *args]))
        for path in EXAMPLES for args in [[], *MORE.get(path.name, [])]]
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
# Every launch takes its serial twin (docs/environment.md, GRADKERN_SERIAL_THREADS), as the rest of the suite's
# small launches do: the parallel entries of the examples' --quick grids (past 256 threads) were half of their
# compile time (fwi_toy 18 s of CPU against 8.5 s, shallow_water_ic 18 s against 10 s, heat2d_mpi 10 s against
# 6.5 s cold, session 54). A twin is the same source compiled without parallel=True, bit for bit the parallel
# entry's results (tests/backends/test_serial_twin.py), so the example prints and plots the same
# (docs/testing.md, "Test time").
TWINS = {**os.environ, "GRADKERN_SERIAL_THREADS": str(10**9)}


def test_examples_are_found():
    assert EXAMPLES, "no examples/*.py"
    assert set(MORE) <= {p.name for p in EXAMPLES}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_keeps_the_convention(path):
    """A one-line summary first in its docstring (`demo --list` shows it), `main(argv)`, --quick and --out."""
    source = path.read_text()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    assert doc and doc.splitlines()[0].strip(), f"{path.name}: no docstring with a summary line"
    lines = doc.splitlines()
    assert len(lines) == 1 or not lines[1].strip(), \
        f"{path.name}: the docstring's first line must be a summary of its own (a blank line after it): " \
        f"`demo --list` shows only {lines[0]!r}"
    mains = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "main"]
    assert mains and [a.arg for a in mains[0].args.args] == ["argv"], f"{path.name}: def main(argv) missing"
    for option in ("--quick", "--out"):
        assert re.search(rf"""add_argument\(\s*["']{option}["']""", source), f"{path.name}: no {option} option"


# slow: the first run compiles the example's kernels: 8 s on the quiet 2-core development machine, 17 s
# when other work loaded it (each run after it: about 1 s)
@pytest.mark.slow
@pytest.mark.parametrize(("path", "args"), RUNS)
def test_example_runs_its_misfit_falls_and_it_writes_a_png(path, args, tmp_path):
    if "torch" in args and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (pip install 'gradkern[torch]'): ci/run installs a CPU build if it can")
    folder = tmp_path / "pictures"  # not there yet: the example makes it
    got = subprocess.run([sys.executable, str(path.relative_to(ROOT)), "--quick", "--out", str(folder), *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=TWINS)
    out = got.stdout + got.stderr
    assert got.returncode == 0, f"{path.name} exited {got.returncode}:\n{out}"
    fell = FELL.findall(got.stdout)
    assert fell, f"{path.name} printed no 'misfit fell: FIRST -> LAST' line:\n{out}"
    first, last = (float(x) for x in fell[-1])
    assert last < first, f"{path.name}: the misfit did not fall ({first} -> {last}):\n{out}"
    png = folder / f"{path.stem}.png"
    if not HAVE_MATPLOTLIB:
        assert "matplotlib is not installed: no PNG written" in got.stdout, out
        return
    assert png.is_file(), f"{path.name} wrote no {png.name} into --out:\n{out}"
    assert WROTE.findall(got.stdout) == [str(png)], f"{path.name} must print 'wrote {png}':\n{out}"
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{png.name} is not a PNG"
    assert len(data) >= MIN_PNG_BYTES, f"{png.name} has only {len(data)} bytes: an empty figure?"
    assert sorted(p.name for p in folder.iterdir()) == [png.name]
