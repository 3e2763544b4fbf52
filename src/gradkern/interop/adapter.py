"""The framework-free half of `gk.interop` (docs/interop.md): what an operation returns and copies, the
role of each argument, a forward that keeps its tape and a backward that consumes it, on NumPy or CuPy
arrays. torch_op.py and jax_op.py only convert arrays and register with their framework.

The operation is functional: the arrays `f` may write are copies (the outputs' copies are what it
returns), so the caller's inputs never change. The forward is split mode's augmented primal on those
copies, with zero shadows made for it; the backward copies the incoming gradients into the output
shadows (the reverse consumes them: a write-only output's shadow leaves it zeroed, docs/shadows-and-modes.md)
and runs the reverse; every float array's shadow is then the gradient of its initial value.
"""

from __future__ import annotations

import inspect
import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..annotations import Active, BatchDuplicated, Const, Duplicated
from ..api import autodiff_thunk, launch
from ..environment import env_int
from ..errors import InteropError
from ..kernel import DeviceFunction, KernelFunction
from ..runtime.arrays import module_of as array_module
from ..runtime.binding import default_dim

ARRAY = "array"  # a float array: Duplicated; its shadow is its gradient
DATA = "data"  # an integer or boolean array: Const, no gradient
ACTIVE = "active"  # a 0-d float array: an Active scalar; its derivative comes back as a 0-d array
CONST = "const"  # a Python number (or anything not an array): Const, passed as it is

# gradkern runs one call at a time: JAX may call its host callbacks from several threads
LOCK = threading.RLock()


FLOATS = ("float32", "float64")  # the dtypes gradkern's kernels take (runtime/binding.py)
INTEGERS = ("int32", "int64")


def role(ndim: int, dtype: str, where: str) -> str:
    """The role of an array argument from its rank and dtype name ('float64', 'int32', 'bool', 'bfloat16',
    ...): a 0-d integer or boolean array is a constant, as a Python number. A dtype gradkern's kernels do
    not take is refused here, before anything runs (docs/interop.md, "Dtypes and devices")."""
    if dtype in FLOATS:
        return ACTIVE if ndim == 0 else ARRAY
    if dtype in INTEGERS:
        return CONST if ndim == 0 else DATA
    if ndim == 0 and (dtype == "bool" or dtype.startswith(("int", "uint"))):
        return CONST
    if dtype.startswith("complex"):
        raise InteropError(f"{where} has dtype {dtype}; gradkern takes real float arrays",
                           hint="pass the real and imaginary parts as separate float arrays")
    raise InteropError(f"{where} has dtype {dtype}; gradkern's kernels take arrays of float32, float64, int32 "
                       "or int64", hint="convert it first (torch: .double() or .long(); JAX: .astype(jnp.float64) "
                       "or .astype(jnp.int32)); a mask as 0/1 integers")


def host_value(r: str, a: Any) -> Any:
    """What `f` is given for an array argument of role `r`: a float for an Active scalar, a Python number
    for a 0-d integer array, else the array."""
    if r == ACTIVE:
        return float(a)
    if r == CONST and getattr(a, "ndim", None) == 0:
        return a.item()
    return a


@dataclass(frozen=True)
class Operation:
    """A kernel or program as a framework operation: its parameters' names, the positions of the
    parameters it returns, the launch shape, and the positions it may write (None: not known before it
    runs, as for a program: every array is copied)."""

    f: Any
    name: str
    params: tuple[str, ...]
    outputs: tuple[int, ...]
    dim: Any
    program: bool
    written: frozenset[int] | None
    arrays: frozenset[int] | None = None  # a kernel's array parameters (None: a program's, not known)
    scalars: frozenset[int] = frozenset()  # a kernel's scalar parameters (used ones)

    def where(self, position: int) -> str:
        return f"{self.name}: argument '{self.params[position]}'"

    def check(self, roles: Sequence[str], types: Sequence[str] | None = None) -> None:
        """Refuse an argument list the operation cannot take, naming the parameter (`types`: the
        arguments' type names, for the message)."""
        if len(roles) != len(self.params):
            raise InteropError(f"{self.name} takes {len(self.params)} arguments ({', '.join(self.params)}); "
                               f"got {len(roles)}")
        for n, r in enumerate(roles):  # what gk.launch would refuse inside a JAX callback, refused here
            got = f"; got {types[n]}" if types else ""
            if self.arrays is not None and n in self.arrays and r not in (ARRAY, DATA):
                raise InteropError(f"{self.where(n)} is indexed by the kernel, so it must be an array of rank "
                                   f">= 1 (a torch tensor or a JAX array){got}")
            if n in self.scalars and r in (ARRAY, DATA):
                raise InteropError(f"{self.where(n)} is a scalar of the kernel: pass a number or a 0-d array{got}")
        for n in self.outputs:
            if roles[n] not in (ARRAY, DATA):
                raise InteropError(f"{self.where(n)} is an output, so it must be an array of rank >= 1 "
                                   "(its initial value: zeros for a write-only output)")

    def check_constant(self, n: int, value: Any) -> None:
        """Refuse a number argument `value` at a kernel's scalar parameter `n` that gk.launch would refuse (a
        complex, a string, an int outside int64): here, by name, and not as an OverflowError in a custom op's
        Scalar[] (torch) or a launch error wrapped in a JaxRuntimeError (JAX). A program's are its own."""
        if self.program or n not in self.scalars:
            return
        if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)) or isinstance(value, np.timedelta64):
            raise InteropError(f"{self.where(n)} is a scalar of the kernel: pass a real number or a 0-d array; "
                               f"got {type(value).__name__}")
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
                and not -2**63 <= int(value) < 2**63:
            raise InteropError(f"{self.where(n)} = {value} does not fit in int64, as gk.launch takes integers")

    def copied(self, roles: Sequence[str], copy_all: bool) -> frozenset[int]:
        """The array positions that run on copies: the outputs, and whatever `f` may write."""
        arrays = {n for n, r in enumerate(roles) if r in (ARRAY, DATA)}
        if copy_all or self.written is None:
            return frozenset(arrays)
        return frozenset(arrays & (self.written | set(self.outputs)))


def operation(f: Any, outputs: str | Sequence[str], dim: Any) -> Operation:
    """Check `f` and `outputs` once, when the operation is made."""
    if isinstance(f, DeviceFunction) or not callable(f):
        raise InteropError(f"gk.interop wraps a @gk.kernel or a Python function that launches kernels (a "
                           f"program); got {type(f).__name__}")
    if isinstance(f, KernelFunction):
        params = tuple(p.name for p in f.ir.params)
        written = frozenset(n for n, p in enumerate(f.ir.params) if p.written)
        arrays = frozenset(n for n, p in enumerate(f.ir.params) if p.is_array)
        scalars = frozenset(n for n, p in enumerate(f.ir.params) if p.used and not p.is_array)
        name, program = f"kernel '{f.name}'", False
    else:
        if dim is not None:
            raise InteropError("dim= belongs to the launches inside a program, not to the operation made of it")
        signature = inspect.signature(f)
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if any(p.kind not in kinds for p in signature.parameters.values()):
            raise InteropError(f"program '{f.__name__}': gk.interop passes every argument by position; "
                               "*args, **kwargs and keyword-only parameters cannot be named as outputs")
        params = tuple(signature.parameters)
        written, name, program = None, f"program '{getattr(f, '__name__', f)}'", True
        arrays, scalars = None, frozenset()
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    if not names:
        raise InteropError(f"{name}: outputs= names no parameter; name those whose final values are returned")
    unknown = [o for o in names if o not in params]
    if unknown or len(set(names)) != len(names):
        raise InteropError(f"{name}: outputs {list(names)} must be distinct parameter names, of {list(params)}")
    return Operation(f, name, params, tuple(params.index(o) for o in names), dim, program, written, arrays, scalars)


_MISSING = object()


def bind(op: Operation, args: Sequence, kwargs: dict) -> tuple:
    """The arguments in `f`'s order, from positional and keyword arguments (as a Python call binds them)."""
    if not kwargs:
        return tuple(args)
    out = [*args, *[_MISSING] * (len(op.params) - len(args))]
    for key, value in kwargs.items():
        if key not in op.params:
            raise InteropError(f"{op.name} has no parameter '{key}'; its parameters are {list(op.params)}")
        n = op.params.index(key)
        if n < len(args):
            raise InteropError(f"{op.where(n)} is given twice, by position and by name")
        out[n] = value
    missing = [op.params[n] for n, v in enumerate(out) if v is _MISSING]
    if missing:
        raise InteropError(f"{op.name}: no value for {missing}", hint="pass every argument of f")
    return tuple(out)


def check_dim(op: Operation, roles: Sequence[str], args: Sequence, shapes: dict[int, tuple]) -> None:
    """A kernel's launch shape when `dim` is not given (the first array's shape, gk.launch's rule), worked
    out from the arguments' shapes before anything runs: gk.launch's refusal (a rank that gk.tid() does not
    unpack, Warp's issue 1380 done silently) would otherwise arrive wrapped in a JAX callback's error."""
    if op.program or op.dim is not None:
        return
    like = [np.broadcast_to(np.zeros(()), shapes[n]) if roles[n] in (ARRAY, DATA) else 0.0 if n in shapes else a
            for n, a in enumerate(args)]  # a 0-d array runs as a number (host_value)
    default_dim(op.f.ir, tuple(like))


def check_devices(op: Operation, devices: dict[int, str]) -> None:
    """Refuse arrays on different devices, naming two of them (gradkern runs a call on one device)."""
    first = next(iter(devices.items()), None)
    for n, device in devices.items():
        if device != first[1]:
            raise InteropError(f"{op.name}: argument '{op.params[first[0]]}' is on {first[1]} but "
                               f"'{op.params[n]}' is on {device}",
                               hint="move every array argument to one device")


def _copy(a: Any) -> Any:
    return array_module(a).array(a, order="C", copy=True)


@dataclass(eq=False)
class Call:
    """One forward's state, kept for its backward: the arguments as annotated (copies, shadows), the
    reverse and its tape. Used once: a second backward runs the forward again (`backward`)."""

    op: Operation
    roles: tuple[str, ...]
    args: tuple
    reverse: Callable
    tape: Any
    nbytes: int
    aliases: frozenset[int] = frozenset()  # positions whose array an earlier position also holds
    used: bool = False

    def outputs(self) -> tuple:
        """The outputs' final values (the copies the forward ran on)."""
        return tuple(self.args[n].val for n in self.op.outputs)


def _arguments(op: Operation, roles: Sequence[str], values: Sequence, copy_all: bool) -> list:
    """The values `f` runs on: copies where it may write, the caller's arrays elsewhere."""
    copied = op.copied(roles, copy_all)
    return [_copy(v) if n in copied else v for n, v in enumerate(values)]


def primal(op: Operation, roles: Sequence[str], values: Sequence, copy_all: bool = False) -> tuple:
    """The operation without derivatives: `f` on copies; returns the outputs' final values."""
    op.check(roles)
    args = _arguments(op, roles, values, copy_all)
    with LOCK:
        if op.program:
            op.f(*args)
        else:
            launch(op.f, default_dim(op.f.ir, tuple(args)) if op.dim is None else op.dim, *args)
    return tuple(args[n] for n in op.outputs)


def forward(op: Operation, roles: Sequence[str], values: Sequence, copy_all: bool = False, lanes: int = 0) -> Call:
    """The augmented primal on copies, with a zero shadow for every float array: the Call its backward
    takes. `values`: arrays (NumPy or CuPy) for ARRAY and DATA, Python floats for ACTIVE. `lanes` k >= 1:
    vector mode, k shadows per array (gk.BatchDuplicated), for k adjoints of the same inputs at once."""
    op.check(roles)
    roles = tuple(roles)
    primals = _arguments(op, roles, values, copy_all)
    copied = op.copied(roles, copy_all)
    args, nbytes, seen, aliases = [], 0, {}, set()
    for n, (r, v) in enumerate(zip(roles, primals)):
        if r == ARRAY:
            first = seen.setdefault(_identity(v), n)
            if first != n:  # one array passed twice, read in both places: one shadow (as gradkern requires)
                aliases.add(n)
            if lanes:  # the JAX adapter's: every array is a copy, none aliased
                args.append(BatchDuplicated(v, tuple(array_module(v).zeros_like(v) for _ in range(lanes))))
            else:
                args.append(Duplicated(v, args[first].dval if first != n else array_module(v).zeros_like(v)))
            nbytes += v.nbytes * (max(lanes, 1) + (n in copied))
        elif r == ACTIVE:
            args.append(Active(float(v)))
        else:
            args.append(Const(v))
            nbytes += v.nbytes if n in copied else 0
    with LOCK:
        if op.program:
            augmented, reverse = autodiff_thunk(op.f, *args)
        else:
            augmented, reverse = autodiff_thunk(op.f, *args, dim=op.dim)
        tape = augmented(*args)
    nbytes += getattr(tape, "bytes", None) or getattr(tape, "nbytes", 0)
    return Call(op, roles, tuple(args), reverse, tape, nbytes, frozenset(aliases))


def _identity(a: Any) -> tuple:
    """What makes two arrays the same array: memory, shape, strides, dtype."""
    address = a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr
    return address, a.shape, a.strides, a.dtype.str


def backward(call: Call, grads: Sequence) -> tuple:
    """The reverse of `call`: each output's incoming gradient (an array, or None for zero) is copied
    into its shadow, which the reverse consumes; the caller's gradient arrays are never written. Returns
    per argument the gradient of its initial value: the shadow for ARRAY, a float for ACTIVE, else None.
    In vector mode each incoming gradient has a leading axis of k lanes, and so has each result."""
    if call.used:
        raise InteropError(f"{call.op.name}: this forward's tape was consumed by its backward",
                           hint="run the forward again (the framework adapters do)")
    call.used = True
    batch = any(isinstance(a, BatchDuplicated) for a in call.args)
    for n, g in zip(call.op.outputs, grads):
        if call.roles[n] == ARRAY and g is not None:
            for shadow, lane in zip(call.args[n].dvals, g) if batch else ((call.args[n].dval, g),):
                array_module(shadow).copyto(shadow, lane)
    with LOCK:
        derivatives = call.reverse(*call.args, call.tape)
    call.tape = None  # what the reverse held (a program's tape is spent; a kernel's is freed here)
    if batch:  # each array's k gradients stacked on a leading axis, each Active scalar's k derivatives
        return tuple(array_module(a.val).stack(a.dvals) if r == ARRAY else np.asarray(derivatives[n])
                     if r == ACTIVE else None for n, (r, a) in enumerate(zip(call.roles, call.args)))
    # an array passed twice has its whole gradient in its first place (the frameworks add the places up)
    return tuple((array_module(a.dval).zeros_like(a.dval) if n in call.aliases else a.dval) if r == ARRAY
                 else derivatives[n] if r == ACTIVE else None for n, (r, a) in enumerate(zip(call.roles, call.args)))


class _Holder(bytearray):
    """The memory of a handle array, carrying the Call it names: a framework tensor made on this
    memory keeps the Call alive exactly as long as the tensor lives (torch_op.py)."""

    call: Call | None = None


@dataclass
class Pending:
    """Forwards waiting for their backward, by an integer handle the framework carries from one to the
    other. `keep` holds a Call strongly, within a byte budget (oldest dropped first: its backward then runs
    the forward again, so dropping costs time, never correctness); `tie` lets a handle array own it."""

    budget: int = 1 << 30
    _strong: OrderedDict = field(default_factory=OrderedDict)
    _weak: weakref.WeakValueDictionary = field(default_factory=weakref.WeakValueDictionary)
    _keys: Any = field(default_factory=lambda: itertools.count(1))

    def _key(self) -> int:
        return next(self._keys) % (2**31 - 1) + 1  # fits the int32 a JAX handle is without x64

    def keep(self, call: Call) -> int:
        with LOCK:
            key = self._key()
            self._strong[key] = call
            held = sum(c.nbytes for c in self._strong.values())
            while held > self.budget and len(self._strong) > 1:
                held -= self._strong.popitem(last=False)[1].nbytes
            return key

    def tie(self, call: Call) -> np.ndarray:
        """A one-element int64 array holding the handle, whose memory owns `call`."""
        holder = _Holder(8)
        holder.call = call
        handle = np.frombuffer(holder, np.int64)
        with LOCK:
            key = self._key()
            self._weak[key] = holder
        handle[0] = key
        return handle

    def take(self, key: int) -> Call | None:
        """The Call of a handle, released from the store; None if it was dropped or already used."""
        with LOCK:
            call = self._strong.pop(key, None)
            holder = self._weak.pop(key, None)
            if holder is not None:
                call, holder.call = holder.call, None
        return None if call is None or call.used else call

    def __len__(self) -> int:
        return len(self._strong) + sum(1 for h in self._weak.values() if h.call is not None)


# docs/environment.md: what a forward may hold for a backward that may never come (JAX: a vjp not called)
PENDING = Pending(env_int("GRADKERN_INTEROP_PENDING_BYTES", 1 << 30))


def gradients(op: Operation, roles: Sequence[str], values: Sequence, grads: Sequence, call: Call | None,
              copy_all: bool = False, lanes: int = 0) -> tuple:
    """The backward of one forward: its Call when the store still has it, else the forward run again on
    `values` (the inputs as the forward saw them: the frameworks' saved tensors or residuals); with
    `lanes`, k adjoints at once in vector mode (a forward of its own: the stored one has one shadow)."""
    if call is None or lanes:
        call = forward(op, roles, values, copy_all, lanes=lanes)
    return backward(call, grads)


def outputs_like(op: Operation, shapes: Sequence[tuple], dtypes: Sequence) -> tuple:
    """(shape, dtype) of each output: those of its argument (contiguous, as the copies are)."""
    return tuple((tuple(shapes[n]), dtypes[n]) for n in op.outputs)


def differentiable(roles: Sequence[str]) -> tuple[int, ...]:
    """The positions that get a gradient: float arrays and Active scalars."""
    return tuple(n for n, r in enumerate(roles) if r in (ARRAY, ACTIVE))
