"""Property test of reverse mode: random smooth kernels built from the
derivative table (written as source, imported, differentiated) pass
check_grad: finite differences in float64 and the dot-product test."""

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample

LEAVES = ["x[i]", "y[i]", "c", "x[j]", "1.5", "0.25"]
UNARY = ["math.sin({})", "math.cos({})", "math.tanh({})", "math.exp(math.tanh({}))",
         "math.sqrt(abs({}) + 0.5)", "({}) ** 2", "({}) ** 3", "math.log(abs({}) + 1.0)", "-({})"]
BINARY = ["({} + {})", "({} - {})", "({} * {})", "({} / (abs({}) + 0.5))"]

_counter = itertools.count()


def expressions(depth: int):
    leaf = st.sampled_from(LEAVES)
    if depth == 0:
        return leaf
    sub = expressions(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(UNARY), sub).map(lambda t: t[0].format(t[1])),
        st.tuples(st.sampled_from(BINARY), sub, sub).map(lambda t: t[0].format(t[1], t[2], t[2])),
    )


def load_kernel(tmp_path, body: str):
    name = f"prop_kernel_{next(_counter)}"
    path = tmp_path / f"{name}.py"
    path.write_text("import math\n\nimport gradkern as gk\n\n\n@gk.kernel\n"
                    "def k(x, y, out, c, n):\n    i = gk.tid()\n    j = (i * 7 + 3) % x.shape[0]\n" + body)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(e1=expressions(3), e2=expressions(2), loop=st.booleans(), inplace=st.booleans(),
       seed=st.integers(0, 2**16))
# out = 3500 everywhere: the loss's rounding (eps x 2.5e4 / h) exceeded check_grad's atol before its finite
# differences allowed for it (gradkern.testing._roundoff)
@example(e1="((math.exp(math.tanh(1.5))) ** 3) ** 3", e2="x[i]", loop=False, inplace=False, seed=65536)
def test_random_kernels_pass_check_grad(tmp_path_factory, e1, e2, loop, inplace, seed):
    import gradkern as gk

    body = f"    s = {e1}\n"
    if loop:  # a loop-carried nonlinear local: taped per iteration
        body += f"    for k in range(n):\n        s = s * 0.5 + math.sin(s) * ({e2}) * 0.1\n"
    body += "    out[i] = s\n"
    if inplace:  # an in-place update of a read array: its shadow is transformed
        body += "    y[i] = y[i] * out[i] + 0.5\n"
    kernel = load_kernel(tmp_path_factory.mktemp("k"), body)
    rng = np.random.default_rng(seed)
    x, y, out = (rng.uniform(0.3, 1.2, 9) for _ in range(3))
    report = check_grad(kernel, gk.Duplicated(x, np.zeros(9)), gk.Duplicated(y, np.zeros(9)),
                        gk.Duplicated(out, np.zeros(9)), gk.Active(rng.uniform(0.5, 1.5)), 3,
                        raise_on_failure=False)
    assert report.ok, f"{report}\nkernel body:\n{body}"
