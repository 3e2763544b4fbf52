"""Spectral operators on a periodic 1-D domain (numpy.fft or cupy.fft), with
custom rules (docs/custom-rules.md): a Poisson solve and a derivative, over the last axis.

Both are u = S f for a real Fourier multiplier S = F^{-1} diag(σ) F on n
points of a domain of length L, κ_k = 2πk/L: σ_k = 1/κ_k² (σ_0 = 0: the
mean of f is dropped, u has zero mean) for -u'' = f, and σ_k = iκ_k for
u = f' (σ_{n/2} = 0 for even n). The matrix of S is
S_jl = (1/n) Σ_k σ_k e^{iκ_k (x_j - x_l)}: it depends on j - l only, and
S_lj = (1/n) Σ_k σ_{-k} e^{iκ_k (x_j - x_l)}. So an even symbol (1/κ², real)
gives S^T = S, and an odd one (iκ, odd on all of Z_n only once the Nyquist
mode k = n/2 ≡ -n/2 is zeroed) gives S^T = -S. Hence

    reverse:  f̄ += S^T ū = ±S ū,  ū ← 0 (u is overwritten; ū ← S^T ū if u is f);
    forward:  u̇ = S ḟ + (p/L) L̇ u,

with p the power of L in S: σ ∝ L² for the Poisson solve (∂u/∂L = 2u/L) and
∝ 1/L for the derivative (∂u/∂L = -u/L); an Active length's derivative is
L̄ = (p/L) ⟨ū, u⟩, with the new u.
"""

from __future__ import annotations

import math
from typing import Any

import gradkern as gk

from ._arguments import (
    active,
    array_module,
    check_float_arrays,
    check_length,
    check_output,
    lanes,
    per_lane,
    same_memory,
    value,
)

__all__ = ["poisson_periodic", "spectral_derivative"]


def _symbol(xp: Any, n: int, length: float, derivative: bool) -> Any:
    """σ_k for k = 0 .. n//2 (the rfft modes)."""
    kappa = (2.0 * math.pi) * xp.fft.rfftfreq(n, d=length / n)
    if derivative:
        sigma = 1j * kappa
        if n % 2 == 0:
            sigma[-1] = 0.0  # Nyquist: i κ would not be odd on Z_n (irfft would drop it; said, not assumed)
        return sigma
    sigma = xp.zeros_like(kappa)
    sigma[1:] = 1.0 / kappa[1:] ** 2
    return sigma


def _apply(xp: Any, f: Any, length: float, derivative: bool) -> Any:
    """S f over the last axis, as a new array."""
    n = f.shape[-1]
    return xp.fft.irfft(xp.fft.rfft(f, axis=-1) * _symbol(xp, n, length, derivative), n=n, axis=-1)


def _check(rule: str, f: Any, u: Any, names: tuple, length: Any) -> tuple:
    """Validate a call; returns (array module, length as a float)."""
    xp = check_float_arrays(rule, **{names[0]: f, names[1]: u})
    if u.shape != f.shape:
        raise gk.LaunchError(f"{rule}: argument '{names[1]}' has shape {u.shape} but '{names[0]}' has {f.shape}; "
                             f"they must have one shape")
    if f.ndim < 1 or f.shape[-1] < 1:
        raise gk.LaunchError(f"{rule}: argument '{names[0]}' must have at least one point on its last axis, "
                             f"got shape {f.shape}")
    length = check_length(rule, length)
    check_output(rule, names[1], u, {names[0]: f}, in_place=names[0])
    return xp, length


def _primal(rule: str, names: tuple, derivative: bool, f: Any, u: Any, length: Any) -> None:
    xp, length = _check(rule, f, u, names, length)
    u[...] = _apply(xp, f, length, derivative)


def _power(derivative: bool) -> float:
    """The power p of L in σ: 1/κ² ∝ L², iκ ∝ 1/L."""
    return -1.0 if derivative else 2.0


def _reverse(config: Any, f: Any, u: Any, length: Any, derivative: bool) -> tuple:
    """f̄ += S^T ū, ū ← 0 (S^T ū if u is f); the derivative of an Active length."""
    fv, uv, lv = value(f), value(u), float(value(length))
    xp = array_module(fv, "spectral rule", "f")
    in_place = same_memory(fv, uv)
    sign = -1.0 if derivative else 1.0  # S^T = -S for the derivative, S for the Poisson solve
    power = _power(derivative)
    k = config.width
    length_bars = []
    for ubar, fbar in zip(lanes(u, k), lanes(f, k)):
        if ubar is None:
            length_bars.append(0.0)
            continue
        length_bars.append(power / lv * float(xp.vdot(ubar, uv)) if active(length) else 0.0)
        if in_place:
            ubar[...] = sign * _apply(xp, ubar, lv, derivative)
            continue
        if fbar is not None:
            fbar += sign * _apply(xp, ubar, lv, derivative)
        ubar.fill(0)
    return (None, None, per_lane(length_bars, k) if active(length) else None)


def _forward(config: Any, f: Any, u: Any, length: Any, primal: Any, derivative: bool) -> None:
    """u̇ = S ḟ + (p/L) L̇ u with the new u."""
    fv, uv, lv = value(f), value(u), value(length)
    primal(fv, uv, lv)  # u̇ needs the new u
    xp = array_module(fv, "spectral rule", "f")
    lv, power = float(lv), _power(derivative)
    k = config.width
    for udot, fdot, ldot in zip(lanes(u, k), lanes(f, k), lanes(length, k)):
        if udot is None:
            continue
        tangent = _apply(xp, fdot, lv, derivative) if fdot is not None else xp.zeros_like(uv)
        if ldot is not None:
            tangent += (power * float(ldot) / lv) * uv
        udot[...] = tangent


@gk.custom_rule(reads=("u",), writes=("u",))
def poisson_periodic(f: Any, u: Any, length: Any) -> None:
    """Solve -u'' = f on the periodic domain [0, length) sampled at n points,
    over the last axis of f and u (arrays of one shape, NumPy or CuPy, one
    float dtype): u gets the zero-mean solution (the mean of f is dropped).
    Overwrites u, which may be f itself. Raises gk.LaunchError before touching
    any buffer on bad input."""
    _primal("poisson_periodic", ("f", "u"), False, f, u, length)


@poisson_periodic.reverse
def _(config: Any, tape: Any, f: Any, u: Any, length: Any) -> tuple:
    return _reverse(config, f, u, length, derivative=False)


@poisson_periodic.forward
def _(config: Any, f: Any, u: Any, length: Any) -> None:
    _forward(config, f, u, length, poisson_periodic.primal, derivative=False)


@gk.custom_rule(reads=("df",), writes=("df",))
def spectral_derivative(f: Any, df: Any, length: Any) -> None:
    """df = ∂f/∂x on the periodic domain [0, length) sampled at n points, over
    the last axis (arrays of one shape, NumPy or CuPy, one float dtype), by
    Fourier multiplication; for even n the Nyquist mode is zeroed. Overwrites
    df, which may be f itself. Raises gk.LaunchError before touching any
    buffer on bad input."""
    _primal("spectral_derivative", ("f", "df"), True, f, df, length)


@spectral_derivative.reverse
def _(config: Any, tape: Any, f: Any, df: Any, length: Any) -> tuple:
    return _reverse(config, f, df, length, derivative=True)


@spectral_derivative.forward
def _(config: Any, f: Any, df: Any, length: Any) -> None:
    _forward(config, f, df, length, spectral_derivative.primal, derivative=True)
