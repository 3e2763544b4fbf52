"""Generated IR, Numba source and CUDA C of representative kernels, compared
verbatim with tests/support/golden/ so every codegen change is seen in review. The CUDA C
is printed without a GPU or CuPy. Refresh with
`python -m pytest tests/backends/test_golden.py --update-golden`."""

from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.cuda import PRELUDE
from gradkern.kernels import allen_cahn_step, heat_step_2d, matvec

GOLDEN = Path(__file__).parents[1] / "support" / "golden"

CASES = {
    "allen_cahn_step_f32": (allen_cahn_step, lambda: (np.ones(8, np.float32), np.ones(8, np.float32), 0.1, 0.1), None),
    "heat_step_2d_f64": (heat_step_2d, lambda: (np.ones((4, 5)), np.ones((4, 5)), 0.1), None),
    "matvec_f64": (matvec, lambda: (np.ones((4, 3)), np.ones(3), np.ones(4)), 4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_code_matches_golden(name, update_golden):
    kernel, args, dim = CASES[name]
    cpu = gk.inspect(kernel, *args(), dim=dim)
    cuda = gk.inspect(kernel, *args(), dim=dim, backend="cuda").source
    # the helpers' prelude is the same in every unit (its semantics are tested through nvcc in test_cuda.py):
    # the golden file keeps the kernel itself
    assert cuda.count(PRELUDE) == 1
    cuda = cuda.replace(PRELUDE, "// (backends/cuda.py PRELUDE)")
    for suffix, text in ((".ir.txt", cpu.ir), (".numba.py", cpu.source), (".cuda.cu", cuda)):
        path = GOLDEN / (name + suffix)
        if update_golden:
            path.write_text(text)
        assert path.exists(), f"{path} missing: run pytest with --update-golden"
        assert text == path.read_text(), f"generated code for {name} changed: review, then --update-golden"
