"""Shape and design checks behind the engine's warnings (../shared/STATS.md).

Pure NumPy/SciPy, on one value per run, on methods.py's rules (permutation p-values are
(1 + #{T* >= T}) / (1 + B); nothing is NaN or inf). None of them decides a verdict; each
tells the reader when the location test's answer needs a second look:
  - anderson_darling_p: do the two distributions differ anywhere, shape included? The
    two-sample Anderson-Darling statistic (k-sample form, Scholz-Stephens midranks for
    ties), its p from relabelling the runs;
  - drift_difference: do A and B trend differently against run order? A drift common to
    both sides (the host warming up) is what the ABBA interleaving balances; only a
    difference biases the comparison. Fisher's z of the two Spearman correlations;
  - tied_fraction: the share of values equal to another (the rank tests use midranks).
"""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as st

from stats.methods import Array, _perm_p, _with_relabellings, as_values


def _ad_statistic(labels: Array, inverse: NDArray[np.intp], ties: Array) -> Array:
    """Scholz-Stephens midrank A2_akN (k = 2) for each row of `labels` (1 = side A).

    `inverse` maps each value to its distinct value, `ties` counts each distinct value.
    The standardisation scipy applies is the same for every relabelling, so the raw
    statistic orders permutations alike.
    """
    n = labels.shape[1]
    onehot = np.zeros((n, ties.size))
    onehot[np.arange(n), inverse] = 1.0
    b = np.cumsum(ties) - ties / 2  # pooled midrank position of each distinct value
    denom = b * (n - b) - n * ties / 4
    total = np.zeros(labels.shape[0])
    for lab in (labels, 1.0 - labels):
        f = lab @ onehot
        m = np.cumsum(f, axis=1) - f / 2
        size = lab[0].sum()
        total += (ties / n * (n * m - b * size) ** 2 / denom).sum(axis=1) / size
    return np.asarray(total * (n - 1) / n)


def anderson_darling_p(
    a: ArrayLike, b: ArrayLike, *, n_perm: int = 999, rng: np.random.Generator
) -> float:
    """Two-sample Anderson-Darling (k-sample form, midranks for ties), permutation p: do
    the two distributions differ anywhere, shape included?"""
    xa, xb = as_values(a, "side A", min_n=2), as_values(b, "side B", min_n=2)
    _, inverse, ties = np.unique(np.r_[xa, xb], return_inverse=True, return_counts=True)
    if ties.size < 2:
        return 1.0
    labels = _with_relabellings(xa.size, xb.size, n_perm, rng)
    return _perm_p(_ad_statistic(labels, inverse, ties.astype(np.float64)))


@dataclass(frozen=True)
class DriftTest:
    rho_a: float  # Spearman of each side's values against run order (0 when constant)
    rho_b: float
    p_value: float  # two-sided: do the sides trend differently?


def _spearman(order: Array, values: Array) -> float:
    if np.ptp(order) == 0 or np.ptp(values) == 0:
        return 0.0
    return float(st.spearmanr(order, values).statistic)


def drift_difference(
    order_a: ArrayLike, a: ArrayLike, order_b: ArrayLike, b: ArrayLike
) -> DriftTest:
    """Do A and B trend differently against run order? A drift common to both sides (the
    host warming up) is what the ABBA interleaving balances; only a difference biases
    the comparison. Fisher's z of the two Spearman correlations, with the 1.06/(n - 3)
    variance of Spearman's z (Fieller, Hartley and Pearson 1957). Needs 4 runs a side."""
    oa, xa = as_values(order_a, "run order A", min_n=4), as_values(a, "side A", min_n=4)
    ob, xb = as_values(order_b, "run order B", min_n=4), as_values(b, "side B", min_n=4)
    ra, rb = _spearman(oa, xa), _spearman(ob, xb)
    clip = 1 - 1e-9  # |rho| = 1 (a perfectly monotone side) has z = +-inf
    z = np.arctanh(np.clip([ra, rb], -clip, clip))
    se = math.sqrt(1.06 / (xa.size - 3) + 1.06 / (xb.size - 3))
    return DriftTest(ra, rb, float(2 * st.norm.sf(abs(z[0] - z[1]) / se)))


def tied_fraction(x: ArrayLike) -> float:
    """Share of values equal to at least one other value."""
    v = as_values(x, "values")
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    return float((counts[inverse] > 1).mean())
