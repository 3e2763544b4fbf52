"""Every examples/*.py runs as a user runs it (`python examples/NAME.py`, from
the repository root, a process of its own) with `--quick`, exits 0 and prints
that its misfit fell (the convention of examples/README.md): a broken
gradient fails here, not only in the example's hands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
FELL = re.compile(r"^misfit fell: (\S+) -> (\S+)", re.MULTILINE)
# more runs of an example than its default one, each with --quick
MORE = {"heat_inverse.py": [["--recover", "initial"]]}
RUNS = [pytest.param(path, args, id=" ".join([path.name, *args]))
        for path in EXAMPLES for args in [[], *MORE.get(path.name, [])]]


def test_examples_are_found():
    assert EXAMPLES, "no examples/*.py"
    assert set(MORE) <= {p.name for p in EXAMPLES}


# slow: the first run compiles the example's kernels: 8 s on the quiet 2-core development machine, 17 s
# when other work loaded it (each run after it: about 1 s)
@pytest.mark.slow
@pytest.mark.parametrize(("path", "args"), RUNS)
def test_example_runs_and_its_misfit_falls(path, args):
    got = subprocess.run([sys.executable, str(path.relative_to(ROOT)), "--quick", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    out = got.stdout + got.stderr
    assert got.returncode == 0, f"{path.name} exited {got.returncode}:\n{out}"
    fell = FELL.findall(got.stdout)
    assert fell, f"{path.name} printed no 'misfit fell: FIRST -> LAST' line:\n{out}"
    first, last = (float(x) for x in fell[-1])
    assert last < first, f"{path.name}: the misfit did not fall ({first} -> {last}):\n{out}"
