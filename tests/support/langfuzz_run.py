"""The primal's oracle of the language fuzzers: the generated text of a tests/support/langfuzz.py kernel run as
plain Python, thread by thread in float64, with a stand-in for `gk` (`FakeGk`), and the fuzzers' random inputs."""

from __future__ import annotations

import math

import numpy as np

from support.langfuzz import FUNCS, PARAMS


class FakeGk:
    sin, cos, tanh, exp, sqrt, log = math.sin, math.cos, math.tanh, math.exp, math.sqrt, math.log
    sinh, cosh, erf, expm1, hypot, atan2 = math.sinh, math.cosh, math.erf, math.expm1, math.hypot, math.atan2

    class _Vec(tuple):
        x, y, z = property(lambda v: v[0]), property(lambda v: v[1]), property(lambda v: v[2])

        def __mul__(self, k):
            return type(self)(a * k for a in self)

        __rmul__ = __mul__

        def __add__(self, o):  # elementwise, not tuple concatenation
            return type(self)(a + b for a, b in zip(self, o, strict=True))

        def __sub__(self, o):
            return type(self)(a - b for a, b in zip(self, o, strict=True))

        def __neg__(self):
            return type(self)(-a for a in self)

    @classmethod
    def vec3(cls, a, b, c):
        return cls._Vec((a, b, c))

    @staticmethod
    def dot(u, v):
        return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]

    @classmethod
    def length(cls, v):
        return math.sqrt(cls.dot(v, v))

    @classmethod
    def normalize(cls, v):
        return v * (1.0 / cls.length(v))

    @classmethod
    def cross(cls, u, v):
        return cls._Vec((u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]))

    def __init__(self):
        self.thread = 0

    def tid(self):
        return self.thread

    @staticmethod
    def func(f):
        return f

    @staticmethod
    def local(shape):
        return np.zeros(shape)

    @staticmethod
    def atomic_add(a, index, v):
        a[index] += v


def python_run(text: str, name: str, dims: tuple, values: dict, fake: FakeGk | None = None) -> tuple[dict, float]:
    """Run the generated text thread by thread on float64 copies of `values`: the arrays after the launch, and
    the least distance of a condition or kink argument from its kink. `fake` stands for `gk` (its `thread` is
    set per thread): one that records accesses (tests/fuzz/test_new_features_fuzz.py)."""
    fake = FakeGk() if fake is None else fake
    margin = [math.inf]

    def near(d):
        if d != 0.0:  # an exact tie is structural (a kink of constants, MIN(t, t)): no difference crosses it
            margin[0] = min(margin[0], abs(d))

    def gt(p, q):
        near(p - q)
        return p > q

    def clamp(v, lo, hi):
        near(v - lo), near(v - hi)
        return min(max(v, lo), hi)

    def floor(v):
        near(v - round(v))
        return float(math.floor(v))

    def sign(v):
        near(v)
        return float(np.sign(v))

    def fmod(a, b):
        near(a / b - round(a / b))
        return math.fmod(a, b)

    def to_int(v):
        near(v - round(v))
        return int(v)

    ns = {"gk": fake, "math": math, "np": np, "GT": gt, "CLAMP": clamp, "FLOOR": floor, "SIGN": sign, "FMOD": fmod,
          "INT": to_int,
          "ABS": lambda v: (near(v), abs(v))[1], "MIN": lambda a, b: (near(a - b), min(a, b))[1],
          "MAX": lambda a, b: (near(a - b), max(a, b))[1]}
    exec(FUNCS, ns)
    exec(text, ns)
    f = ns[name]
    data = {k: v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else
            v.copy() if isinstance(v, np.ndarray) else float(v) if k == "c" else v for k, v in values.items()}
    for t in np.ndindex(*dims):
        fake.thread = t if len(dims) > 1 else t[0]
        with np.errstate(all="raise"):
            f(*(data[p] for p in PARAMS))
    return data, margin[0]


def inputs(rng: np.random.Generator, dims: tuple) -> dict:
    big = int(rng.integers(3, 6))
    m = int(rng.integers(1, big + 1))

    def u(*shape):
        return rng.uniform(-0.2, 1.2, shape)
    return {"x": u(*dims), "y": u(*dims), "out": u(*dims), "w": u(big),
            "idx": rng.integers(0, min(big, 3), dims).astype(np.int64), "tot": u(big),
            "c": float(rng.uniform(0.5, 1.5)), "m": m}
