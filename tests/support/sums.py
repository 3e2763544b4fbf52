"""The bound of a reordered floating-point sum, for tests of sums whose order changed."""

from __future__ import annotations

import numpy as np


def reordered_bound(terms: np.ndarray, start: float, summands: int) -> float:
    """How far any order of summing `terms` and `start` in the terms' dtype, with at most `summands`
    additions, may fall from the exact sum: γ_k Σ|x|, γ_k = k u / (1 - k u), k = summands, u the unit
    roundoff (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., (4.4))."""
    u = np.finfo(np.asarray(terms).dtype).eps / 2
    gamma = summands * u / (1 - summands * u)
    return float(gamma * (np.abs(np.asarray(terms, np.float64)).sum() + abs(float(start))))
