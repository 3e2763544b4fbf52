"""The op table of the elementary functions (ir/ops.py: FUNCTIONS): each entry is whole, so a new elementary
function is its `Op`, its entry and its partials (docs/architecture.md#adding-an-elementary-function).
What the functions compute, on every backend, is tested in tests/ir/test_functions.py and the corpus."""

import builtins
import math

import numpy as np
import pytest

from gradkern.backends import cuda, hostcuda, numba_syntax
from gradkern.frontend import lower
from gradkern.ir import interp
from gradkern.ir.ops import FLOAT_BINARY, FLOAT_FUNCTIONS, FUNCTIONS, UNARY
from gradkern.transforms.derivatives import DERIVATIVES

# a point inside each function's domain
AT = {"acosh": (1.5,)}


@pytest.mark.parametrize("op", list(FUNCTIONS), ids=lambda op: op.value)
def test_every_entry_is_one_function_everywhere(op):
    f = FUNCTIONS[op]
    args = AT.get(op.value, (0.5, 0.75)[:f.arity])
    want = float(f.host(*(np.float64(a) for a in args)))
    for fn in f.callables:  # every spelling a kernel may call is the host's function
        assert math.isclose(float(fn(*args)), want, rel_tol=1e-15), (op, fn)
    # the CPU's callee is one of them
    module, _, name = f.python.partition("(")[0].rpartition(".")
    callee = getattr({"math": math, "np": np, "": builtins}[module], name)
    assert any(callee is fn for fn in f.callables), op
    assert (op in UNARY) == (f.arity == 1) and op.arity == f.arity
    assert (op in FLOAT_FUNCTIONS or op in FLOAT_BINARY) == f.floats


@pytest.mark.parametrize("op", list(FUNCTIONS), ids=lambda op: op.value)
def test_every_part_reads_the_entry(op):
    f = FUNCTIONS[op]
    assert all(lower._FUNCTIONS[id(fn)] is op for fn in f.callables)
    assert (interp._UN if f.arity == 1 else interp._BIN)[op] is f.host
    assert numba_syntax.PY_OPS[op] == f.python.replace("math.", "_gk_math.").replace("np.", "_gk_np.")
    assert cuda._OPS[op] == f.c(op) and f.c(op).startswith(f"_gkb_{op.value}(")
    if f.libm:  # the prelude wraps the C library's function; hostcuda's g++ gets its declaration
        assert f"_gkb_{op.value}(float" in cuda.PRELUDE and f" {op.value}f(" in hostcuda.DECLARATIONS
    else:  # the prelude writes it by hand
        assert f"_gkb_{op.value}(" in cuda.PRELUDE and f" {op.value}f(" not in hostcuda.DECLARATIONS
    assert len(DERIVATIVES[op].reads) == f.arity  # its partials, one per argument
