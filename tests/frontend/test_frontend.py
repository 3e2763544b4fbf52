"""The frontend: unsupported syntax is refused at decoration with a
`gk.KernelSyntaxError` that points at the user's line (file:line:col, the line
itself and a caret) and names the construct; type errors in the kernel body
surface at first launch as `gk.KernelTypeError`, also located; device
functions defined after the kernel that calls them are found at first launch.

Every offending line carries a marker comment `# E:<name>`, and the expected
line number is found by searching this file for it, so the tests do not depend
on line numbers.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

import gradkern as gk

HERE = os.path.abspath(__file__)
BASENAME = os.path.basename(HERE)
GRADKERN_DIR = os.path.dirname(os.path.abspath(gk.__file__))

with open(HERE) as _f:
    _SOURCE_LINES = _f.read().splitlines()


def line_of(marker: str) -> int:
    """The 1-based line of this file that ends with `# E:<marker>` (exactly one)."""
    tag = f"# E:{marker}"
    hits = [n for n, text in enumerate(_SOURCE_LINES, 1) if text.rstrip().endswith(tag)]
    assert len(hits) == 1, f"marker {tag!r} found {len(hits)} times"
    return hits[0]


def check_located(err: BaseException, marker: str, *words: str):
    """The message names this file, the marked line, shows that line with a
    caret, mentions each of `words`, and never names a gradkern-internal file."""
    assert isinstance(err, gk.GradkernError)
    msg = str(err)
    line = line_of(marker)
    assert re.search(rf"{re.escape(BASENAME)}:{line}:\d+", msg), \
        f"expected {BASENAME}:{line}:<col> in the message:\n{msg}"
    code = _SOURCE_LINES[line - 1].split("# E:")[0].strip()
    assert code in msg, f"the offending line {code!r} is not quoted in the message:\n{msg}"
    assert re.search(r"^\s*\^\s*$", msg, re.M), f"no caret line in the message:\n{msg}"
    for w in words:
        assert w.lower() in msg.lower(), f"{w!r} not in the message:\n{msg}"
    for internal in ("lower.py", "parse.py", "infer.py", "gradkern/frontend", "gradkern/ir", GRADKERN_DIR):
        assert internal not in msg, f"gradkern-internal {internal!r} in the message:\n{msg}"


def syntax_error(excinfo, marker: str, *words: str):
    err = excinfo.value
    assert isinstance(err, gk.KernelSyntaxError)
    check_located(err, marker, *words)


# -- unsupported syntax: refused at decoration ---------------------------------------


TABLE = ((0, 1), (1, -1), (2, 0))
WORDS = ("a", "b")


def test_local_array_runtime_index():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, n):
            i = gk.tid()
            f = gk.local((4,), gk.float64)
            a[i] = f[n % 4]  # E:local-runtime-index
    syntax_error(info, "local-runtime-index", "f[n % 4]", "not a constant", "unrolled")


def test_local_array_index_out_of_range():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            f = gk.local((4,), gk.float64)
            for q in range(5):
                f[q] = a[i]  # E:local-out-of-range
    syntax_error(info, "local-out-of-range", "index 4", "out of range", "f")


def test_local_array_too_large():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            f = gk.local((10, 10), gk.float64)  # E:local-too-large
            a[i] = f[0, 0]
    syntax_error(info, "local-too-large", "100 elements", "too large", "scratch array")


def test_local_array_passed_whole():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            f = gk.local((2,), gk.float64)
            a[i] = math.sqrt(f)  # E:local-whole
    syntax_error(info, "local-whole", "local array 'f'", "used whole", "f[k]")


def test_unrolled_loop_needs_constant_bounds():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, n):
            i = gk.tid()
            for q in range(n):  # E:unroll-runtime-bounds
                a[i] += TABLE[q % 3][1]
    syntax_error(info, "unroll-runtime-bounds", "unrolled", "constant bounds", "range(n)")


def test_table_of_strings():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for q in range(2):
                a[i] += WORDS[q] * 2.0  # E:table-strings
    syntax_error(info, "table-strings", "WORDS", "other than numbers", "tuple of int/float")


def test_loop_over_a_table_names_the_range_spelling():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for e in TABLE:  # E:loop-over-table
                a[i] += e[0]
    syntax_error(info, "loop-over-table", "loop over 'TABLE'", "range(len(TABLE))", "TABLE[q]")


def test_list_hint_names_local_arrays():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            f = [0.0, 1.0]  # E:list-hint
            a[i] = f[0]
    syntax_error(info, "list-hint", "lists", "gk.local", "module-level tuple")


def test_table_row_is_not_a_number():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            a[i] = TABLE[1] * 2.0  # E:table-row
    syntax_error(info, "table-row", "TABLE[1]", "row", "TABLE")


def test_list_literal():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            w = [1.0, 2.0]  # E:list
            a[i] = w
    syntax_error(info, "list", "list")


def test_string_constant():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            s = "abc"  # E:str
            a[i] = s
    syntax_error(info, "str", "str")


def test_lambda():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            f = lambda v: 2.0 * v  # E:lambda
            a[i] = f(a[i])
    syntax_error(info, "lambda", "lambda")


def test_slice():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, b):
            i = gk.tid()
            b[i] = a[1:3]  # E:slice
    syntax_error(info, "slice", "slice")


def test_keyword_argument():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            a[i] = math.pow(a[i], y=2.0)  # E:keyword
    syntax_error(info, "keyword", "keyword")


def test_call_to_unsupported_function_as_value():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            v = print(a[i])  # E:print-value
            a[i] = v
    syntax_error(info, "print-value", "'print'", "not supported")


def test_call_to_unsupported_function_as_statement():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            print(a[i])  # E:print-stmt
    syntax_error(info, "print-stmt", "'print'")


def test_call_to_numpy_function_that_is_not_supported():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            a[i] = np.cumsum(a[i])  # E:np-cumsum
    syntax_error(info, "np-cumsum", "np.cumsum", "not supported")


def test_for_over_array():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, b):
            i = gk.tid()
            for x in a:  # E:for-in-array
                b[i] += x
    syntax_error(info, "for-in-array", "range(")


def test_try():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            try:  # E:try
                a[i] = 1.0
            except IndexError:
                pass
    syntax_error(info, "try", "'try'")


def test_with():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            with open(os.devnull):  # E:with
                a[i] = 1.0
    syntax_error(info, "with", "'with'")


def test_nested_def():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()

            def g(v):  # E:nested-def
                return v
            a[i] = 1.0
    syntax_error(info, "nested-def", "nested function")


def test_return_with_value_in_kernel():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            return a[i]  # E:return-value
    syntax_error(info, "return-value", "return", "value")


def test_return_with_value_inside_loop_in_kernel():
    """A return inside a loop is lowered (frontend/loop_returns.py); one with a value in a kernel is still
    refused at its own line."""
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for _j in range(3):
                if a[i] > 1.0:
                    return a[i]  # E:return-in-loop
                a[i] += 1.0
    syntax_error(info, "return-in-loop", "return", "value")


def test_assignment_to_array_parameter():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, b):
            i = gk.tid()
            b[i] = a[i]
            a = 1.0  # E:assign-array
    syntax_error(info, "assign-array", "'a'", "array parameter")


def test_array_parameter_read_as_scalar():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, b):
            i = gk.tid()
            b[i] = a[i] + a  # E:array-as-scalar
    syntax_error(info, "array-as-scalar", "'a'", "array parameter")


def test_local_maybe_unassigned():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            if a[i] > 1.0:
                y = 2.0
            a[i] = y  # E:maybe-unassigned
    syntax_error(info, "maybe-unassigned", "'y'", "before it is assigned")


def test_local_assigned_only_in_loop_body():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, n):
            i = gk.tid()
            for j in range(n):
                y = a[i] * j
            a[i] = y  # E:loop-unassigned
    syntax_error(info, "loop-unassigned", "'y'", "before it is assigned")


def test_assignment_to_loop_variable():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for j in range(3):
                a[i] += 1.0 * j
                j = j + 1  # E:loop-var
    syntax_error(info, "loop-var", "loop variable 'j'")


def test_recursive_device_function():
    @gk.func
    def fact(v):
        if v <= 1.0:
            return 1.0
        return v * fact(v - 1.0)  # E:recursion

    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            a[i] = fact(a[i])
    syntax_error(info, "recursion", "recursive", "'fact'")


def test_reserved_prefix_local():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            _gk_tmp = a[i]  # E:reserved-local
            a[i] = _gk_tmp
    syntax_error(info, "reserved-local", "'_gk'", "reserved", "_gk_tmp")


def test_reserved_prefix_parameter():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a, _gk_n):  # E:reserved-param
            i = gk.tid()
            a[i] = _gk_n
    syntax_error(info, "reserved-param", "'_gk'", "reserved", "_gk_n")


def test_device_function_syntax_error_at_its_decoration():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.func
        def f(v):
            g = gk.local((2,), gk.float64)
            return v + g  # E:func-local-whole
    syntax_error(info, "func-local-whole", "local array 'g'")


# -- deferred resolution of device functions -------------------------------------------


@gk.kernel
def uses_helper_defined_later(x, y):
    i = gk.tid()
    y[i] = helper_defined_later(x[i]) + 1.0


@gk.func
def helper_defined_later(v):
    return 3.0 * v


def test_func_defined_later_in_module(rng):
    x = rng.uniform(0.5, 2.0, 16)
    y = rng.uniform(0.5, 2.0, 16)
    gk.launch(uses_helper_defined_later, x.size, x, y)
    np.testing.assert_allclose(y, 3.0 * x + 1.0, rtol=1e-15)


def test_func_defined_later_in_function_scope(rng):
    @gk.kernel
    def k(x, y):
        i = gk.tid()
        y[i] = later(x[i], 2.0)

    @gk.func
    def later(v, w):
        return v * w - 1.0

    x = rng.uniform(0.5, 2.0, 16)
    y = np.zeros_like(x)
    gk.launch(k, x.size, x, y)
    np.testing.assert_allclose(y, 2.0 * x - 1.0, rtol=1e-15)


def test_name_never_defined_is_reported_at_launch(rng):
    @gk.kernel
    def k(x):
        i = gk.tid()
        x[i] = not_defined_anywhere(x[i])  # noqa: F821  # E:undefined

    x = rng.uniform(0.5, 2.0, 4)
    before = x.copy()
    with pytest.raises(gk.KernelSyntaxError) as info:
        gk.launch(k, x.size, x)
    syntax_error(info, "undefined", "not_defined_anywhere", "not defined")
    assert np.array_equal(x, before)


# -- type errors: at first launch, located ----------------------------------------------


def test_float_index_is_a_type_error(rng):
    @gk.kernel
    def k(a, b):
        i = gk.tid()
        x = a[i] * 0.5
        b[i] = a[x]  # E:float-index

    a, b = rng.uniform(0.5, 2.0, 8), rng.uniform(0.5, 2.0, 8)
    before = (a.copy(), b.copy())
    with pytest.raises(gk.KernelTypeError) as info:
        gk.launch(k, a.size, a, b)
    check_located(info.value, "float-index", "index", "float64", "integer")
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])


def test_float_range_bound_is_a_type_error(rng):
    @gk.kernel
    def k(a, n):
        i = gk.tid()
        for _j in range(n):  # E:float-range
            a[i] += 1.0

    a = rng.uniform(0.5, 2.0, 8)
    before = a.copy()
    with pytest.raises(gk.KernelTypeError) as info:
        gk.launch(k, a.size, a, 2.5)
    check_located(info.value, "float-range", "range()", "float64", "integer")
    assert np.array_equal(a, before)


def test_float_range_bound_from_expression_is_a_type_error(rng):
    @gk.kernel
    def k(a, b):
        i = gk.tid()
        for j in range(0, a.shape[0] / 2):  # E:float-range-expr
            b[i] += a[j]

    a, b = rng.uniform(0.5, 2.0, 8), rng.uniform(0.5, 2.0, 8)
    before = (a.copy(), b.copy())
    with pytest.raises(gk.KernelTypeError) as info:
        gk.launch(k, a.size, a, b)
    check_located(info.value, "float-range-expr", "range()", "stop", "integer")
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])


@pytest.mark.parametrize("call, hint", [
    ("np.where(x[i] > 0.0, 1.0, 2.0)", "a if cond else b"),
    ("np.sum(x)", "accumulate in a loop"),
    ("np.linalg.norm(x)", "gk.length"),
    ("np.zeros(3)", "pass a scratch array"),
    ("np.round(x[i])", "math.floor(x + 0.5)"),  # (np.log2 and math.ceil: kernel functions since session 57)
    ("np.square(x[i])", "x * x"),
    ("np.isnan(x[i])", "x != x"),
    ("np.cumsum(x)", "NumPy's array functions are not kernel code"),
])
def test_unsupported_calls_suggest_the_closest_spelling(tmp_path, call, hint):
    import importlib.util

    path = tmp_path / "suggest_kernel.py"
    path.write_text("import math\n\nimport numpy as np\n\nimport gradkern as gk\n\n\n@gk.kernel\n"
                    f"def k(x, y):\n    i = gk.tid()\n    y[i] = {call}\n")
    spec = importlib.util.spec_from_file_location("suggest_kernel", path)
    module = importlib.util.module_from_spec(spec)
    y = np.zeros(3)
    with pytest.raises(gk.KernelSyntaxError, match="is not supported") as info:  # at decoration or launch
        spec.loader.exec_module(module)
        gk.launch(module.k, 3, np.ones(3), y)
    assert hint in str(info.value)
    np.testing.assert_array_equal(y, 0.0)


@pytest.mark.parametrize("call, hint", [
    ("gk.rsqrt(x[i])", "1.0 / math.sqrt(x)"),  # GROMACS' gmx::invsqrt, CUDA's rsqrt (ported round 11)
    ("np.fma(x[i], x[i], 1.0)", "a * b + c"),
    ("math.exp10(x[i])", "10.0 ** x"),
])
def test_missing_fast_math_names_hint_the_spelling(tmp_path, call, hint):
    """CUDA's fast-math names that math, NumPy and gk lack are unknown attributes: the error names the line and
    writes the spelling that works (frontend/suggest.py MISSING_FUNCTION_HINTS); nothing runs."""
    import importlib.util

    path = tmp_path / "fast_math_kernel.py"
    path.write_text("import math\n\nimport numpy as np\n\nimport gradkern as gk\n\n\n@gk.kernel\n"
                    f"def k(x, y):\n    i = gk.tid()\n    y[i] = {call}\n")
    spec = importlib.util.spec_from_file_location("fast_math_kernel", path)
    module = importlib.util.module_from_spec(spec)
    y = np.zeros(3)
    with pytest.raises(gk.KernelSyntaxError, match="has no attribute") as info:  # at decoration or launch
        spec.loader.exec_module(module)
        gk.launch(module.k, 3, np.ones(3), y, backend="interp")
    assert "fast_math_kernel.py:11" in str(info.value) and hint in str(info.value)
    np.testing.assert_array_equal(y, 0.0)


# -- 4-D and 5-D arrays, literal-tuple loops, shape unpacking (docs/language.md) ---------------------------------------
def test_loop_over_a_list_names_the_tuple_spelling():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for kr in [0, 1]:  # E:loop-over-list
                a[i] += kr
    syntax_error(info, "loop-over-list", "cannot loop over a list", "'for ... in (0, 1):'")


def test_loop_over_a_tuple_binds_names():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for a[0] in (0, 1):  # E:tuple-loop-target
                a[i] += 1.0
    syntax_error(info, "tuple-loop-target", "binds a name or a tuple of names, not 'a[0]'",
                 "'for v in (a, b, c):'")


def test_loop_over_a_tuple_unpacks_tuples_of_one_length():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for p, q in ((0, 1), (1, 0, 2)):  # E:tuple-loop-unpack
                a[i] += p * q
    syntax_error(info, "tuple-loop-unpack", "'p, q' unpacks 2 values", "not '(1, 0, 2)'")


def test_loop_over_a_tuple_of_tuples():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for p in ((0, 1), 2):  # E:tuple-loop-element
                a[i] += p
    syntax_error(info, "tuple-loop-element", "numbers, names or scalar expressions", "(0, 1)",
                 "'for kr in (0, 1):'")


def test_loop_over_another_iterable_names_both_spellings():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            for v in reversed(a):  # E:loop-over-call
                a[i] += v
    syntax_error(info, "loop-over-call", "range(...) or a literal tuple", "'for k in range(start, stop, step):'",
                 "'for v in (a, b, c):'")


def test_six_indices_are_refused():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            a[i, 0, 0, 0, 0, 0] = 1.0  # E:six-indices
    syntax_error(info, "six-indices", "one to 5 dimensions, not 6")


def test_tuple_assignment_of_the_wrong_length():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            n, m = 1, 2, 3  # E:tuple-length
            a[i] = n + m
    syntax_error(info, "tuple-length", "2 names are assigned 3 values", "'n, m = v0, v1'")


def test_tuple_assignment_from_something_else_names_the_spellings():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            i = gk.tid()
            n, m = a[i]  # E:tuple-from-element
            a[i] = n + m
    syntax_error(info, "tuple-from-element", "gk.tid(), an array's .shape", "'n, m = gk.tid()'", "'n, m = x.shape'")


def test_shape_axis_past_the_arrays_dimensions_is_a_type_error(rng):
    @gk.kernel
    def k(a):
        i = gk.tid()
        a[i, 0, 0, 0] = a.shape[4] * 1.0  # E:shape-axis

    a = rng.uniform(size=(2, 1, 1, 1))
    before = a.copy()
    with pytest.raises(gk.KernelTypeError) as info:
        gk.launch(k, 2, a)
    check_located(info.value, "shape-axis", "'a.shape[4]'", "4 dimensions", "index a.shape by 0 to 3")
    assert np.array_equal(a, before)


def test_shape_unpacking_with_fewer_names_than_dimensions_is_a_type_error(rng):
    @gk.kernel
    def k(a):
        i = gk.tid()
        n, m = a.shape  # E:shape-unpack
        a[i, 0, 0, 0] = n * m * 1.0

    a = rng.uniform(size=(2, 3, 1, 1))
    before = a.copy()
    with pytest.raises(gk.KernelTypeError) as info:
        gk.launch(k, 2, a)
    check_located(info.value, "shape-unpack", "unpacks 2 names", "4 dimensions", "'n, m = a.shape[0], a.shape[1]'",
                  "'n, m, n2, n3 = a.shape'")
    assert np.array_equal(a, before)
