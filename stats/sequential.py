"""Multiplicity and the group-sequential boundaries (../shared/STATS.md).

Pure NumPy/SciPy, on methods.py's rules (numbers in, numbers out, never NaN):
  - holm, benjamini_hochberg: adjusted p-values across a comparison's statistics: Holm's
    step-down (family-wise error) for the primary ones, Benjamini-Hochberg (false
    discovery rate) for the rest;
  - sequential_bounds, z_to_p: the two-sided |z| boundaries of the looks at their
    information fractions (Lan-DeMets with the power spending function alpha t^3, Kim and
    DeMets' family: SPENDING_RHO says why not O'Brien-Fleming's), and a boundary's nominal
    p;
  - smallest_detectable_shift: the shift a two-sided rank test finds with 80% power at
    given sizes, for an inconclusive result's report and for calibration.
design.py applies them: a comparison's looks, Holm's levels, the boundary each p is held to.
"""

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as st
from scipy.optimize import brentq

from stats.methods import Array, StatsInputError


def holm(p: ArrayLike) -> Array:
    """Holm step-down adjusted p-values (family-wise error)."""
    pv = np.asarray(p, dtype=np.float64)
    if pv.size == 0:
        return pv
    order = np.argsort(pv)
    m = pv.size
    adj = np.maximum.accumulate((m - np.arange(m)) * pv[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def benjamini_hochberg(p: ArrayLike) -> Array:
    """Benjamini-Hochberg adjusted p-values (false discovery rate)."""
    pv = np.asarray(p, dtype=np.float64)
    if pv.size == 0:
        return pv
    return np.asarray(st.false_discovery_control(pv, method="bh"))


# The alpha-spending family's exponent: alpha(t) = alpha * t**3 (Kim and DeMets' power
# family). O'Brien-Fleming's spending put the first of four looks at p 8.86e-5, which
# 9,999 permutations cannot resolve; rho = 3 puts it at 7.8e-4 (the others 0.0058,
# 0.0183, 0.0424), within reach of ~12,800, at about the same power by the last look.
SPENDING_RHO = 3.0


@functools.lru_cache(maxsize=256)
def sequential_bounds(
    fractions: Sequence[float], alpha: float = 0.05, rho: float = SPENDING_RHO
) -> tuple[float, ...]:
    """Two-sided group-sequential boundaries |z| >= c_k at information fractions.

    Lan-DeMets with the power spending function alpha(t) = alpha t^rho; each c_k solves
    P(no earlier crossing, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1}) under H0. The density
    of the score S = Z sqrt(t) in the continuation region is carried across the looks on a
    grid (Armitage, McPherson and Rowe 1969); each look's crossing probability integrates
    the normal increment exactly, so c_k is not limited by the grid's step.
    """
    t = np.asarray(fractions, dtype=np.float64)
    if t.size == 0 or (np.diff(t) <= 0).any() or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise StatsInputError(f"information fractions must rise in (0, 1]: {list(fractions)}")
    spent = alpha * t**rho
    grid = np.linspace(-10, 10, 2001)
    weights = np.zeros_like(grid)  # probability mass of S on the grid, still running
    weights[grid.size // 2] = 1.0  # S = 0 before the first look
    bounds: list[float] = []
    prev_t, prev_spent = 0.0, 0.0
    for tk, ak in zip(t, spent, strict=True):
        sd = math.sqrt(tk - prev_t)

        def excess(c: float, w: Array = weights, tk: float = tk, sd: float = sd,
                   target: float = ak - prev_spent) -> float:  # fmt: skip
            edge = c * math.sqrt(tk)
            crossing = st.norm.cdf((-edge - grid) / sd) + st.norm.sf((edge - grid) / sd)
            return float(w @ crossing) - target

        c = float(brentq(excess, 0.1, 15.0, xtol=1e-8))
        bounds.append(c)
        step = grid[1] - grid[0]
        moved = st.norm.pdf((grid[:, None] - grid[None, :]) / sd) / sd * step @ weights
        weights = np.where(np.abs(grid) < c * math.sqrt(tk), moved, 0.0)
        prev_t, prev_spent = tk, ak
    return tuple(bounds)


def z_to_p(z: float) -> float:
    """Two-sided nominal p of a |z| boundary."""
    return float(2 * st.norm.sf(abs(z)))


def smallest_detectable_shift(
    sd: float, n_a: int, n_b: int, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Shift (in sd's unit) a two-sided rank test finds with `power` at these sizes.

    Normal theory, divided by sqrt(3/pi), the rank tests' efficiency against the t test:
    at 24 runs per side and 2% CV that is 1.7%, 5% CV 4.2% (STATS.md's simulations round
    these up to 1.8% and 4.5%).
    """
    z = st.norm.isf(alpha / 2) + st.norm.isf(1 - power)
    return float(z * sd * math.sqrt(1 / n_a + 1 / n_b) / math.sqrt(3 / math.pi))
