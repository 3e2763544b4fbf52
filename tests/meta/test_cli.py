"""`python -m gradkern info`, `demo`, `demo --list` and `demo NAME` run and say something true."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy
import pytest

import gradkern

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=None):
    """`python -m gradkern ARGS` in a process of its own; from `cwd` (another folder than the checkout) with the
    PYTHONPATH entries made absolute, so that it finds the gradkern this test imports."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return subprocess.run([sys.executable, "-m", "gradkern", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def example_summaries():
    """name -> the first line of its docstring, for every examples/NAME.py (what `demo --list` must show)."""
    return {p.stem: ast.get_docstring(ast.parse(p.read_text())).splitlines()[0].strip()
            for p in sorted((ROOT / "examples").glob("*.py")) if not p.name.startswith("_")}


def test_info_reports_versions_and_backends():
    r = run("info")
    assert r.returncode == 0, r.stderr
    assert f"gradkern   {gradkern.__version__}" in r.stdout
    assert f"numpy      {numpy.__version__}" in r.stdout
    assert f"numba      {numba.__version__}" in r.stdout
    assert "cpu (numba)" in r.stdout and "nvcc" in r.stdout
    assert "g++ " in r.stdout and "default    " in r.stdout  # hostcuda's compiler, found or not


def test_info_says_when_gpp_is_missing(tmp_path):
    """Without g++ on the PATH, info names it and says hostcuda is unavailable."""
    r = subprocess.run([sys.executable, "-m", "gradkern", "info"], capture_output=True, text=True,
                       env={**os.environ, "PATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "g++        not on PATH (backend hostcuda unavailable)" in r.stdout
    assert "hostcuda (" not in r.stdout


def test_info_says_when_the_cache_directory_is_unusable(tmp_path):
    """A cache directory under a file was reported as if a launch could use it."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    r = subprocess.run([sys.executable, "-m", "gradkern", "info"], capture_output=True, text=True,
                       env={**os.environ, "GRADKERN_CACHE_DIR": str(blocker / "cache")})
    assert r.returncode == 0, r.stderr
    assert f"(unusable: {blocker} is not a directory; compiled code is kept in memory" in r.stdout
    assert blocker.read_text() == "not a directory"
    fine = subprocess.run([sys.executable, "-m", "gradkern", "info"], capture_output=True, text=True,
                          env={**os.environ, "GRADKERN_CACHE_DIR": str(tmp_path / "new" / "cache")})
    assert "unusable" not in fine.stdout and not (tmp_path / "new").exists()  # info creates nothing


def test_demo_runs_matches_numpy_and_checks_its_gradient():
    r = run("demo", "--n", "2000", "--steps", "40", "--grad-n", "300", "--grad-steps", "30")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches the NumPy reference" in r.stdout
    assert "energy" in r.stdout
    assert "the gradient matches finite differences" in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.strip().startswith("dE/")]
    assert len(rows) == 6 and all(float(row[3]) < 1e-5 for row in rows)  # u_0 at five places, and c
    assert "saved copy-on-write" in r.stdout


def test_demo_list_names_every_example_with_its_summary(tmp_path):
    r = run("demo", "--list", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    listed = {line.split()[0]: line.split(None, 1)[1].strip() for line in r.stdout.splitlines()
              if line.strip() and not line.startswith("run one:") and line[0] != " "}
    assert listed == example_summaries()
    assert "heat_inverse" in listed


def test_demo_of_an_unknown_name_lists_the_names_and_exits_2(tmp_path):
    r = run("demo", "no_such_example", "--quick", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no example named 'no_such_example'" in r.stderr
    assert all(name in r.stderr for name in example_summaries())
    assert not list(tmp_path.iterdir())


# slow: compiles the example's kernels when the cache is cold (8-17 s on the 2-core development machine)
@pytest.mark.slow
def test_demo_name_runs_that_example_with_its_arguments(tmp_path):
    """From another folder: the arguments after NAME are the example's (--quick, --out)."""
    r = run("demo", "heat_inverse", "--quick", "--out", str(tmp_path / "pictures"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "n = 41, 10 steps" in r.stdout  # --quick reached it
    assert "misfit fell: " in r.stdout
    png = tmp_path / "pictures" / "heat_inverse.png"
    if "matplotlib is not installed: no PNG written" not in r.stdout:
        assert png.read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pictures"]


def test_demo_name_help_is_the_example_help(tmp_path):
    r = run("demo", "heat_inverse", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "python -m gradkern demo heat_inverse" in r.stdout and "--recover" in r.stdout
