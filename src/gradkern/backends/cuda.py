"""GPU backend: typed IR → one CUDA C translation unit (compiled by NVRTC
through `cupy.RawModule`, or by nvcc in the tests).

Each kernel is `extern "C" __global__` and walks the launch domain with a
grid-stride loop (axis 0 slowest, so the last axis is the coalesced one); a
serial launch (the race check's exact fallback) runs the whole domain in one
thread. Arrays arrive as a pointer, their extents and, unless the runtime
passed a C-contiguous array, their element strides. Every pointer is
`__restrict__`: the runtime merges exactly aliased arguments and refuses any
other overlap with a written buffer before a launch (runtime/binding.py).
Python's semantics are kept where C differs: floor division and modulo round
toward -inf, `range` bounds are evaluated once, `min`/`max` return the first
argument on ties. Code generation needs neither CuPy nor a GPU.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InternalError
from ..ir import nodes as ir
from ..ir.names import OOB, PUSH_COUNTS
from ..ir.ops import FUNCTIONS, Op
from ..ir.types import Array, Scalar
from .base import Backend, Generated, LaunchInfo, check_launch_ndim
from .printer import Printer, Syntax

C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long", "bool": "bool"}
BLOCK = 256  # threads per block of every parallel launch

_OPS = {
    Op.ADD: "({0} + {1})", Op.SUB: "({0} - {1})", Op.MUL: "({0} * {1})", Op.DIV: "({0} / {1})",
    Op.FLOORDIV: "_gkb_floordiv({0}, {1})", Op.MOD: "_gkb_mod({0}, {1})", Op.NEG: "(-{0})",
    Op.EQ: "({0} == {1})", Op.NE: "({0} != {1})", Op.LT: "({0} < {1})", Op.LE: "({0} <= {1})",
    Op.GT: "({0} > {1})", Op.GE: "({0} >= {1})",
    Op.AND: "({0} && {1})", Op.OR: "({0} || {1})", Op.NOT: "(!{0})",
    **{op: f.c(op) for op, f in FUNCTIONS.items()},  # the elementary functions (ir/ops.py's table)
    Op.BITAND: "({0} & {1})", Op.BITOR: "({0} | {1})", Op.BITXOR: "({0} ^ {1})", Op.INVERT: "(~{0})",
    Op.LSHIFT: "_gkb_shl({0}, {1})", Op.RSHIFT: "_gkb_shr({0}, {1})",
}

_WRAPPING = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.NEG: "-"}  # integer ops printed through unsigned (apply)

# the op table's C library functions (ir/ops.py: Function.libm) as (name, arity), unary ones first; each gets
# one `_gkb_` overload per float type
LIBM = [(op.value, arity) for arity in (1, 2) for op, f in FUNCTIONS.items() if f.libm and f.arity == arity]
_MATH = "".join(
    f"__host__ __device__ __forceinline__ float _gkb_{f}(float x) {{ return {f}f(x); }}\n"
    f"__host__ __device__ __forceinline__ double _gkb_{f}(double x) {{ return {f}(x); }}\n"
    for f, n in LIBM if n == 1) + "".join(
    f"__host__ __device__ __forceinline__ float _gkb_{f}(float a, float b) {{ return {f}f(a, b); }}\n"
    f"__host__ __device__ __forceinline__ double _gkb_{f}(double a, double b) {{ return {f}(a, b); }}\n"
    for f, n in LIBM if n == 2)

# Python's float % and //: the result takes the divisor's sign; // is CPython's
# float_divmod (the exact quotient of a - a % b, rounded)
_FLOAT_DIV = "".join(f"""
__host__ __device__ __forceinline__ {t} _gkb_mod({t} a, {t} b) {{
    {t} r = fmod{f}(a, b);
    if (r != 0) {{ if ((r < 0) != (b < 0)) r += b; }} else {{ r = copysign{f}(({t})0, b); }}
    return r;
}}
__host__ __device__ __forceinline__ {t} _gkb_floordiv({t} a, {t} b) {{
    {t} m = fmod{f}(a, b);
    {t} d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return copysign{f}(({t})0, a / b);
    {t} q = floor{f}(d);
    return (d - q > ({t})0.5) ? q + 1 : q;
}}""" for t, f in (("float", "f"), ("double", "")))

PRELUDE = r"""// gradkern runtime helpers: Python semantics where C's differ
// integer // and % by 0 give 0, and by -1 the wrapped negation and 0, as NumPy's and the interpreter's, where C's
// division traps (SIGFPE kills the host process) or is undefined
template <class T> __host__ __device__ __forceinline__ T _gkb_floordiv(T a, T b) {
    if (b == 0) return T(0);
    if (b == T(-1)) return T(0ULL - (unsigned long long)a);
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <class T> __host__ __device__ __forceinline__ T _gkb_mod(T a, T b) {
    if (b == 0 || b == T(-1)) return T(0);
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <class T> __host__ __device__ __forceinline__ T _gkb_powi(T x, long long n) {
    if (n < 0) return T(pow(double(x), double(n)));
    T r = T(1);
    while (n) { if (n & 1) r *= x; x *= x; n >>= 1; }
    return r;
}
#define _GKB_POWI_WRAPPING(T, U) \
__host__ __device__ __forceinline__ T _gkb_powi(T x, long long n) { \
    if (n < 0) return (T)(pow(double(x), double(n))); \
    U r = 1, b = (U)x; \
    while (n) { if (n & 1) r *= b; b *= b; n >>= 1; } \
    return (T)r; \
}
_GKB_POWI_WRAPPING(int, unsigned int)
_GKB_POWI_WRAPPING(long long, unsigned long long)
__host__ __device__ __forceinline__ float _gkb_powi(float x, long long n) {
    return n < 0 ? powf(x, float(n)) : _gkb_powi<float>(x, n);
}
__host__ __device__ __forceinline__ float _gkb_pow(float a, float b) { return powf(a, b); }
__host__ __device__ __forceinline__ double _gkb_pow(double a, double b) { return pow(a, b); }
template <class T> __host__ __device__ __forceinline__ T _gkb_min(T a, T b) { return b < a ? b : a; }
template <class T> __host__ __device__ __forceinline__ T _gkb_max(T a, T b) { return b > a ? b : a; }
__host__ __device__ __forceinline__ float _gkb_abs(float x) { return fabsf(x); }
__host__ __device__ __forceinline__ double _gkb_abs(double x) { return fabs(x); }
// integer abs and powers wrap as + - * do (apply): abs(INT64_MIN) is INT64_MIN, as NumPy's
__host__ __device__ __forceinline__ int _gkb_abs(int x) { return x < 0 ? (int)(0U - (unsigned)x) : x; }
__host__ __device__ __forceinline__ long long _gkb_abs(long long x) {
    return x < 0 ? (long long)(0ULL - (unsigned long long)x) : x;
}
// shifts as Op.LSHIFT documents: wrapping (through unsigned: no signed overflow), amounts outside [0, 64) defined
__host__ __device__ __forceinline__ long long _gkb_shl(long long a, long long b) {
    return (b >= 0 && b < 64) ? (long long)((unsigned long long)a << b) : 0;
}
__host__ __device__ __forceinline__ long long _gkb_shr(long long a, long long b) {
    return (b >= 0 && b < 64) ? (a >> b) : (a >> 63);
}
__device__ __forceinline__ void _gkb_atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void _gkb_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void _gkb_atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void _gkb_atomic_add(long long* p, long long v) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
#if defined(__CUDACC__)
// a block's threads' partial sums added into *p by one atomic (every thread of the block calls it, after the
// grid-stride loop): warp shuffles, then the warps' sums through shared memory (docs/hostcuda.md: on the host,
// whose threads run one at a time, each thread's sum is added by itself)
template <class T> __device__ __forceinline__ void _gkb_block_add(T* p, T v) {
    __shared__ T part[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // an earlier call's reads of `part` are done
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)((blockDim.x + 31) >> 5) ? part[lane] : T(0);
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) _gkb_atomic_add(p, v);
    }
}
#else
template <class T> inline void _gkb_block_add(T* p, T v) { _gkb_atomic_add(p, v); }
#endif
""" + _MATH + _FLOAT_DIV

# ir.InBounds: an index outside [0, n) records the access and the thread (the first one wins) and becomes 0
_CHECK = r"""__device__ __forceinline__ long long _gkb_check(long long i, long long n, long long site, long long nsites,
                                                 long long* oob, long long thread) {
    if (i >= 0 && i < n) return i;
    atomicCAS(reinterpret_cast<unsigned long long*>(oob), 0ULL,
              static_cast<unsigned long long>(thread * nsites + site + 1));
    return 0;
}
"""

# C, C++ and CUDA words a kernel's Python names could collide with
_RESERVED = set("""
alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr const_cast continue
decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if
inline int long mutable namespace new noexcept nullptr operator private protected public register
reinterpret_cast restrict return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
threadIdx blockIdx blockDim gridDim warpSize atomicAdd main""".split())


def c_name(name: str) -> str:
    """A Python identifier as a C identifier that cannot collide with C or CUDA."""
    if name in _RESERVED or not name.isascii() or name.startswith("__"):
        return "_gku_" + "".join(c if c.isascii() and c.isalnum() else f"x{ord(c):x}" for c in name)
    return name


def extent(array: str, axis: int) -> str:
    return f"_gkb_{c_name(array)}_n{axis}"


def stride(array: str, axis: int) -> str:
    return f"_gkb_{c_name(array)}_s{axis}"


def c_type(t: Scalar) -> str:
    return C_TYPES[t.name]


class CudaSyntax(Syntax):
    def __init__(self, strided: frozenset[str]):
        super().__init__(ops=_OPS, if_open="if ({0}) {{", else_open="} else {", block_close="}",
                         while_open="while ({0}) {{", tid="_gkb_t{0}", statement_end=";",
                         select="({0} ? {1} : {2})")
        self.strided = strided
        self.loops = 0
        self.summed: dict[tuple[str, tuple[str, ...]], str] = {}  # (array, printed indices) -> its register

    def name(self, name: str) -> str:
        return c_name(name)

    def shape_of(self, array: str, axis: int) -> str:
        return extent(array, axis)

    def literal(self, value, t: Scalar) -> str:
        if t.is_bool:
            return "true" if value else "false"
        if t.is_int:
            v = int(value)
            if t.name == "int32":
                return str(v) if v >= 0 else f"({v})"
            if v == -2**63:
                return "(-9223372036854775807LL - 1LL)"
            return f"{v}LL" if v >= 0 else f"({v}LL)"
        v = float(value)
        suffix = "f" if t.name == "float32" else ""
        if math.isnan(v):
            return "__int_as_float(0x7fc00000)" if suffix else "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(v):
            inf = "__int_as_float(0x7f800000)" if suffix else "__longlong_as_double(0x7ff0000000000000LL)"
            return inf if v > 0 else f"(-{inf})"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}{suffix}" if v >= 0 else f"({text}{suffix})"

    def cast(self, operand: str, src: Scalar, dst: Scalar) -> str:
        if dst.is_bool:
            return f"({operand} != 0)"
        return f"(({c_type(dst)})({operand}))"

    def index(self, array: str, indices: list[str]) -> str:
        name = c_name(array)
        if array in self.strided:
            flat = " + ".join(f"({i}) * {stride(array, a)}" for a, i in enumerate(indices))
        else:  # C-contiguous: row-major offsets from the extents
            flat = f"({indices[0]})"
            for a, i in enumerate(indices[1:], start=1):
                flat = f"({flat} * {extent(array, a)} + ({i}))"
        return f"{name}[{flat}]"

    def atomic(self, array: str, indices: list[str], value: str) -> str:
        return f"_gkb_atomic_add(&{self.index(array, indices)}, {value})"

    def atomic_stmt(self, s: ir.AtomicAdd, indices: list[str], value: str) -> str:
        register = self.summed.get((s.array, tuple(indices)))
        return f"{register} += {value}" if register is not None else self.atomic(s.array, indices, value)

    def apply(self, e: ir.Apply, args: list[str]) -> str | None:
        if e.op in _WRAPPING and e.type.is_int:
            # signed overflow is undefined in C++ (NVRTC may assume it never happens, as LLVM's `nsw` let it fold
            # `(a - b) >> 63` on the CPU: docs/language.md#integer-arithmetic): + - * and negation wrap through the
            # unsigned type, and the conversion back keeps the bits (C++20)
            t, u = C_TYPES[e.type.name], f"unsigned {C_TYPES[e.type.name]}"
            if e.op is Op.NEG:
                return f"(({t})(({u})0 - ({u})({args[0]})))"
            return f"(({t})(({u})({args[0]}) {_WRAPPING[e.op]} ({u})({args[1]})))"
        if e.op is Op.POW:
            if e.args[1].type.is_int:
                return f"_gkb_powi({args[0]}, (long long)({args[1]}))"
            return f"_gkb_pow({args[0]}, {args[1]})"
        return None

    def for_open(self, var, start, stop, step, step_node) -> list[str]:
        # Python evaluates range()'s bounds once, and the loop variable takes
        # each value in turn (a hidden counter keeps the body from skewing it)
        self.loops += 1
        k, lo, hi, st = (f"_gkb_{x}{self.loops}" for x in ("k", "lo", "hi", "st"))
        lines = [f"const long long {lo} = {start}, {hi} = {stop}, {st} = {step};"]
        if isinstance(step_node, ir.Const):
            test = f"{k} < {hi}" if step_node.value > 0 else f"{k} > {hi}"
        else:
            test = f"({st} > 0 ? {k} < {hi} : {k} > {hi})"
        lines.append(f"for (long long {k} = {lo}; {test}; {k} += {st}) {{")
        lines.append(f"{self.indent}{var} = {k};")
        return lines


@dataclass(frozen=True)
class CudaLaunch(LaunchInfo):
    """What a CUDA launch passes, in order (`abi`): the kernel's argument layout (hostcuda passes the same)."""

    layout: tuple[tuple, ...]


@dataclass(frozen=True)
class CudaOptions:
    parallel: bool = True
    strided: frozenset[str] = frozenset()  # array parameters passed with strides (not C-contiguous)


def abi(k: ir.Kernel, launch_ndim: int, strided: frozenset[str]) -> tuple[tuple, ...]:
    """What the kernel takes, in order, as the runtime must pass it:
    ("dim", axis) launch extents, ("value", i) the i-th parameter, ("extent", i,
    axis) and ("stride", i, axis) of an array parameter. Only the extents and
    strides the code reads are passed: every argument costs host time per launch."""
    accessed = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}
    accessed |= {e.array for e in ir.all_exprs(k.body) if isinstance(e, ir.Load)}
    shapes = {(e.array, e.axis) for e in ir.all_exprs(k.body) if isinstance(e, (ir.Shape, ir.InBounds))}
    out: list[tuple] = [("dim", a) for a in range(launch_ndim)]
    for i, p in enumerate(k.params):
        out.append(("value", i))
        if not isinstance(p.type, Array):
            continue
        for a in range(p.type.ndim):
            row_major = p.name in accessed and p.name not in strided and a > 0  # index arithmetic
            if (p.name, a) in shapes or row_major:
                out.append(("extent", i, a))
        if p.name in strided and p.name in accessed:
            out += [("stride", i, a) for a in range(p.type.ndim)]
    return tuple(out)


def signature(k: ir.Kernel, layout: tuple[tuple, ...]) -> list[str]:
    """The C parameter list of `layout` (see `abi`)."""
    written = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}
    written.add(OOB)  # the bounds checks' flag, written through _gkb_check
    out = []
    for item in layout:
        if item[0] == "dim":
            out.append(f"const long long _gkb_n{item[1]}")
            continue
        p = k.params[item[1]]
        if item[0] == "extent":
            out.append(f"const long long {extent(p.name, item[2])}")
        elif item[0] == "stride":
            out.append(f"const long long {stride(p.name, item[2])}")
        elif isinstance(p.type, Array):
            const = "" if p.name in written else "const "
            out.append(f"{const}{c_type(p.type.dtype)}* __restrict__ {c_name(p.name)}")
        else:
            out.append(f"const {c_type(p.type)} {c_name(p.name)}")
    return out


def generate(k: ir.Kernel, launch_ndim: int, options: CudaOptions, header: str = "") -> tuple[str, str, tuple]:
    """The CUDA C translation unit for a typed kernel, its entry's name and its `abi`."""
    check_launch_ndim(launch_ndim)
    if k.deferred is not None:  # the pipeline folds a reverse into a gather only where `row_lagged` is set
        raise InternalError(f"kernel '{k.name}' has deferred statements, which the CUDA backend does not print")
    entry = f"{k.name}_{launch_ndim}d"
    sx = CudaSyntax(options.strided)
    sx.launch_ndim = launch_ndim
    p = Printer(sx)
    used = {e.name for e in ir.all_exprs(k.body) if isinstance(e, ir.Var)}
    used |= {s.name if isinstance(s, ir.Assign) else s.var for s in ir.walk_stmts(k.body)
             if isinstance(s, (ir.Assign, ir.For))}
    params = {p.name for p in k.params}
    local_decls = [f"{c_type(t)} {c_name(n)} = {sx.literal(0, t)};" for n, t in k.locals
                   if n in used and n not in params]
    tids = [f"_gkb_t{a}" for a in range(launch_ndim)]
    lines = [f"// {line}" for line in header.splitlines()] + [PRELUDE]
    if any(isinstance(s, ir.Store) and s.array == PUSH_COUNTS for s in ir.walk_stmts(k.body)):
        lines.insert(0, FMAD_OFF_MARK)  # its pushes must match the count kernel's count (`compile_kernel`)
    if any(isinstance(e, ir.InBounds) for e in ir.all_exprs(k.body)):
        lines.append(_CHECK)
    bounds = f"__launch_bounds__({BLOCK}) " if options.parallel else ""
    lines.append(f'extern "C" __global__ void {bounds}{entry}(')
    layout = abi(k, launch_ndim, options.strided)
    lines.append("    " + ",\n    ".join(signature(k, layout)) + ") {")
    summed = block_summed(k) if options.parallel else []
    flush = []
    for j, (array, key) in enumerate(summed):
        t = k.params[[q.name for q in k.params].index(array)].type.dtype
        printed = tuple(sx.literal(i.value, i.type) for i in key)
        sx.summed[(array, printed)] = register = f"_gkb_sum{j}"
        p.line(1, f"{c_type(t)} {register} = {sx.literal(0, t)};")
        flush.append(f"_gkb_block_add(&{sx.index(array, list(printed))}, {register});")
    if options.parallel:
        total = " * ".join(f"_gkb_n{a}" for a in range(launch_ndim))
        p.line(1, f"const long long _gkb_total = {total};")
        if not any(isinstance(st, (ir.For, ir.While)) for st in ir.walk_stmts(k.body)):
            # a loop-free body is memory-bound: four elements in flight per thread hide the
            # latency of its dependent loads (measured: a 1-D gather adjoint, 119 -> 115 µs on an H100)
            p.line(1, "#pragma unroll 4")
        p.line(1, "for (long long _gkb_g = (long long)blockIdx.x * blockDim.x + threadIdx.x; _gkb_g < _gkb_total;")
        p.line(1, "     _gkb_g += (long long)blockDim.x * gridDim.x) {")
        rest = "_gkb_g"
        for a in reversed(range(launch_ndim)):
            if a == 0:
                p.line(2, f"const long long _gkb_t0 = {rest};")
            else:
                p.line(2, f"const long long {tids[a]} = {rest} % _gkb_n{a};")
                p.line(2, f"const long long _gkb_r{a} = {rest} / _gkb_n{a};")
                rest = f"_gkb_r{a}"
        depth = 2
    else:  # one thread walks the whole domain in order
        p.line(1, "if (blockIdx.x != 0 || threadIdx.x != 0) return;")
        for a in range(launch_ndim):
            p.line(1 + a, f"for (long long {tids[a]} = 0; {tids[a]} < _gkb_n{a}; ++{tids[a]}) {{")
        depth = 1 + launch_ndim
    for d in local_decls:
        p.line(depth, d)
    p.block(k.body, depth)
    for d in reversed(range(1, depth)):
        p.line(d, "}")
    for line in flush:
        p.line(1, line)
    lines += p.lines
    lines.append("}")
    return "\n".join(lines) + "\n", entry, layout


MAX_SUMMED = 8  # elements a parallel kernel may sum in registers (block_summed)


def block_summed(k: ir.Kernel) -> list[tuple[str, tuple[ir.Const, ...]]]:
    """The elements a parallel kernel sums in per-thread registers, added once per block after the grid-stride
    loop (`_gkb_block_add`), instead of an atomic add per thread: the float elements at constant indices of
    arrays the kernel only adds into (an Active scalar's accumulator, `dot`'s result, a loss), at most
    MAX_SUMMED. Every thread adding into one address serialises the atomics: the session-54 GPU check measured
    ~1.8 ms per million float64 adds on an H200 (RESULTS.md), against ~10 us for the launch's other work."""
    params = {p.name: p.type for p in k.params}
    touched = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.Store)}
    touched |= {e.array for e in ir.all_exprs(k.body) if isinstance(e, ir.Load)}
    found: dict[str, set] = {}
    refused = set(touched)
    for s in ir.walk_stmts(k.body):
        if not isinstance(s, ir.AtomicAdd) or s.array in refused:
            continue
        t = params.get(s.array)
        if not isinstance(t, Array) or t.dtype.name not in ("float32", "float64") or \
                not all(isinstance(i, ir.Const) for i in s.indices):
            refused.add(s.array)
            continue
        found.setdefault(s.array, {}).setdefault(tuple((int(i.value), str(i.type)) for i in s.indices), s.indices)
    out = [(a, key) for a, keys in found.items() if a not in refused for key in keys.values()]
    return out if len(out) <= MAX_SUMMED else []


def grid_for(total: int, multiprocessors: int) -> int:
    """Blocks of a grid-stride launch: enough to fill the device, no more than the work."""
    return max(1, min(-(-total // BLOCK), multiprocessors * 32))


_kernels: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()
NVRTC_OPTIONS = ("-std=c++17",)
# A kernel that stores per-thread push counts (a reverse's count kernel, its augmented primal, the fused kernel
# of a tape sized by a count) is compiled without FMA contraction, so that the count kernel and the kernels that
# push evaluate every float condition and bound with the same roundings (docs/adjoint-forms.md, section 13):
# NVRTC contracts `a * b + c` by default, and two kernels need not contract alike. Marked in the source (the
# same text hostcuda compiles, already with -ffp-contract=off), so that CuPy's cache keys on it.
FMAD_OFF_MARK = "// gradkern: compiled with --fmad=false (its pushes must match a count)"


def compile_kernel(source: str, entry: str) -> Any:
    """The `cupy.RawKernel` for `entry` of `source`: compiled by NVRTC once per
    process (kept here) and once per machine (CuPy's on-disk kernel cache)."""
    key = (source, entry)
    fn = _kernels.get(key)
    if fn is None:
        import cupy
        with _lock:
            fn = _kernels.get(key)
            if fn is None:
                options = NVRTC_OPTIONS + (("--fmad=false",) if source.startswith(FMAD_OFF_MARK) else ())
                module = cupy.RawModule(code=source, options=options)
                fn = _kernels[key] = module.get_function(entry)
    return fn


class CudaBackend(Backend):
    """The GPU: grid-stride kernels on CuPy's current stream, real atomics."""

    name = "cuda"
    strides_in_key = True
    aligned_only = True
    race_check_forms = ("parallel", "serial")

    def __init__(self):
        self._plans: dict[int, tuple] = {}
        self._sm: dict[int, int] = {}

    def generate(self, k: ir.Kernel, launch_ndim: int, *, parallel: bool, strided: frozenset[str],
                 header: str) -> Generated:
        source, entry, layout = generate(k, launch_ndim, CudaOptions(parallel, strided), header)
        return Generated(source, entry, CudaLaunch(layout))

    def compile(self, code: Generated, cache: Path) -> Any:
        return compile_kernel(code.source, code.entry)  # CuPy keeps its own disk cache

    def summation(self, code: Generated, accumulator: str, parallel: bool) -> str:
        if parallel and f"_gkb_block_add(&{c_name(accumulator)}[" in (code.source or ""):
            return ("per-block partial sums: each thread sums its elements' terms in a register, each block adds "
                    "its threads' sums once by an atomic add (`block_summed`)")
        return super().summation(code, accumulator, parallel)

    def run(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
            values: list) -> None:
        """Launch on CuPy's current stream, passing what the kernel's `abi` lists."""
        if 0 in dim:
            return
        args = []
        for kind, i, a, convert in self._marshalling(typed, code):
            if kind == 0:
                args.append(np.int64(dim[i]))
            elif kind == 1:
                args.append(convert(values[i]) if convert is not None else values[i])
            elif kind == 2:
                args.append(np.int64(values[i].shape[a]))
            else:
                v = values[i]
                args.append(np.int64(v.strides[a] // v.itemsize))
        total = 1
        for n in dim:
            total *= n
        grid = grid_for(total, self._multiprocessors()) if parallel else 1
        entry((grid,), (BLOCK if parallel else 1,), tuple(args))

    def _marshalling(self, typed: ir.Kernel, code: Generated) -> tuple:
        """The abi as (kind, index, axis, scalar conversion) tuples, once per generated kernel."""
        plan = self._plans.get(id(code))
        if plan is None or plan[0] is not code:
            kinds = {"dim": 0, "value": 1, "extent": 2, "stride": 3}
            items = []
            for item in code.info.layout:
                kind = kinds[item[0]]
                i = item[1]
                p = typed.params[i] if kind and i < len(typed.params) else None
                convert = p.type.numpy if kind == 1 and p is not None and not isinstance(p.type, Array) else None
                items.append((kind, i, item[2] if len(item) > 2 else 0, convert))
            plan = self._plans[id(code)] = (code, tuple(items))
        return plan[1]

    def _multiprocessors(self) -> int:
        import cupy
        dev = cupy.cuda.runtime.getDevice()
        sm = self._sm.get(dev)
        if sm is None:
            sm = self._sm[dev] = cupy.cuda.Device(dev).attributes["MultiProcessorCount"]
        return sm

    def array_module(self) -> Any:
        import cupy
        return cupy
