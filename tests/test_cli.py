"""`python -m gradkern info` and `python -m gradkern demo` run and say something true."""

import subprocess
import sys

import numba
import numpy

import gradkern


def run(*args):
    return subprocess.run([sys.executable, "-m", "gradkern", *args], capture_output=True, text=True, timeout=300)


def test_info_reports_versions_and_backends():
    r = run("info")
    assert r.returncode == 0, r.stderr
    assert f"gradkern   {gradkern.__version__}" in r.stdout
    assert f"numpy      {numpy.__version__}" in r.stdout
    assert f"numba      {numba.__version__}" in r.stdout
    assert "cpu (numba)" in r.stdout and "nvcc" in r.stdout


def test_demo_runs_matches_numpy_and_checks_its_gradient():
    r = run("demo", "--n", "2000", "--steps", "40", "--grad-n", "300", "--grad-steps", "30")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches the NumPy reference" in r.stdout
    assert "energy" in r.stdout
    assert "the gradient matches finite differences" in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.strip().startswith("dE/")]
    assert len(rows) == 6 and all(float(row[3]) < 1e-5 for row in rows)  # u_0 at five places, and c
    assert "saved copy-on-write" in r.stdout
