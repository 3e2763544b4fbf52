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


def test_demo_runs_and_matches_numpy():
    r = run("demo", "--n", "2000", "--steps", "40")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches the NumPy reference" in r.stdout
    assert "energy" in r.stdout
