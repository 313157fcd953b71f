"""Tail statistics of latencies: the pooled p99 and maximum of B over A (../shared/STATS.md).

Pure NumPy: each run's raw samples in, a TailTest out, no Django; methods.py's rules hold
(the unit is the run; permutation p-values are (1 + #{T* >= T}) / (1 + B); nothing is NaN
or inf). Pooling samples and permuting samples would treat 2400 samples of 24 boots as 2400
boots; here every permutation and bootstrap draw moves whole runs:
  - the p-value permutes whole-run labels between the sides, two-sided on |log ratio| of
    the pooled quantiles (|difference| when a sample is not positive), with the
    permutation count raised where a boundary needs it, as brunner_munzel's is
    (methods.adaptive_perm_p);
  - the p99's CI is a cluster bootstrap (runs resampled within each side), percentile, at
    the asked level; the maximum has none (a percentile bootstrap of a sample maximum is
    inconsistent), only its permutation test.
Quantiles of the permuted and resampled groups come from counts on one grid per test (1024
points from just below the pooled quantile to the maximum), so the battery stays a few
matrix products however many samples a run has. A ratio to a pooled quantile of 0 (the
change is unbounded in %), or a CI where a bootstrap draw's ratio does not exist, is None
with a sentence saying why.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from stats.methods import Array, PermP, StatsInputError, adaptive_perm_p, as_values


@dataclass(frozen=True)
class TailTest:
    quantile: float  # 0.99, or 1.0 for the maximum
    value_a: float
    value_b: float
    ratio: float | None  # value_b / value_a; None when value_a is not positive
    p_value: float  # whole-run label permutation, two-sided on |log ratio| (see _distance)
    # Cluster bootstrap (runs resampled within each side), percentile, at the asked level;
    # None where a draw's ratio does not exist, where no level was asked (an interim look),
    # and always for the maximum (no percentile-bootstrap CI of a maximum is valid).
    ci_low: float | None
    ci_high: float | None
    undefined: tuple[str, ...] = ()  # why ratio or CI is None, one sentence each
    n_perm: int = 0  # relabellings behind p

    @property
    def name(self) -> str:
        return tail_name(self.quantile)


def tail_name(q: float) -> str:
    """ "p99" for 0.99, "max" for 1."""
    return "max" if q >= 1.0 else f"p{q * 100:g}"


def _grid_quantile(counts: Array, totals: Array, grid: Array, q: float) -> Array:
    """Pooled q-quantile per row from counts of samples <= each grid value (interpolated)."""
    target = q * totals[:, None]
    above = counts >= target
    k = np.where(above.any(axis=1), above.argmax(axis=1), grid.size - 1)
    k0 = np.maximum(k - 1, 0)
    rows = np.arange(counts.shape[0])
    c0, c1 = counts[rows, k0], counts[rows, k]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(c1 > c0, (target[:, 0] - c0) / (c1 - c0), 1.0)
    frac = np.clip(frac, 0.0, 1.0)
    return np.asarray(np.where(k == 0, grid[0], grid[k0] + frac * (grid[k] - grid[k0])))


def _count_matrix(runs: Sequence[Array], grid: Array) -> Array:
    """C[r, g] = number of run r's samples <= grid[g]."""
    return np.stack([np.searchsorted(np.sort(r), grid, side="right") for r in runs]).astype(
        np.float64
    )


def _quantile_grid(pooled: Array, q: float, points: int) -> Array:
    """Grid for group quantiles near q: the pooled minimum, then pooled quantiles from
    q - 0.03 to the maximum (dense where the data are, whatever the tail's length)."""
    levels = np.linspace(max(0.0, q - 0.03), 1.0, points)
    return np.unique(np.r_[pooled.min(), np.quantile(pooled, levels)])


def tail_test(
    runs_a: Sequence[ArrayLike],
    runs_b: Sequence[ArrayLike],
    *,
    q: float = 0.99,
    n_perm: int = 9999,
    n_boot: int = 2000,
    confidence: float | None = 0.95,
    resolve: float | None = None,
    grid_points: int = 1024,
    rng: np.random.Generator,
) -> TailTest:
    """Pooled q-quantile (q = 1: maximum) of B over A, tested by permuting whole-run labels.

    Pooling samples and permuting samples would treat 2400 samples of 24 boots as 2400
    boots; here every permutation and bootstrap draw moves whole runs. Quantiles of the
    permuted and resampled groups come from counts on one grid per test (1024 points from
    just below the pooled quantile to the maximum), so the battery stays a few matrix
    products however many samples a run has. `resolve` raises the permutation count as
    brunner_munzel's does; `confidence` None asks for no CI.
    """
    ra = [as_values(r, f"side A run {i}") for i, r in enumerate(runs_a)]
    rb = [as_values(r, f"side B run {i}") for i, r in enumerate(runs_b)]
    if len(ra) < 2 or len(rb) < 2:
        raise StatsInputError("a tail test needs at least 2 runs per side")
    logs = all((r > 0).all() for r in ra + rb)
    if q >= 1.0:
        return _max_test(ra, rb, n_perm, resolve, logs, rng)
    pooled_a, pooled_b = np.concatenate(ra), np.concatenate(rb)
    va = float(np.quantile(pooled_a, q, method="inverted_cdf"))
    vb = float(np.quantile(pooled_b, q, method="inverted_cdf"))
    runs = ra + rb
    sizes = np.array([r.size for r in runs], dtype=np.float64)
    grid = _quantile_grid(np.r_[pooled_a, pooled_b], q, grid_points)
    counts = _count_matrix(runs, grid)

    def distance(labels: Array) -> Array:
        qa = _grid_quantile(labels @ counts, labels @ sizes, grid, q)
        rest = 1.0 - labels
        return _distance(_grid_quantile(rest @ counts, rest @ sizes, grid, q), qa, logs)

    perm = adaptive_perm_p(distance, len(ra), len(rb), n_perm=n_perm, resolve=resolve, rng=rng)
    ci: tuple[float, float] | str | None = None
    if confidence is not None:
        ci = bootstrap_ci(ra, rb, q=q, n_boot=n_boot, confidence=confidence,
                          grid_points=grid_points, rng=rng)  # fmt: skip
    return _tail_result(q, va, vb, perm, ci)


def bootstrap_ci(
    runs_a: Sequence[ArrayLike], runs_b: Sequence[ArrayLike], *, q: float, n_boot: int,
    confidence: float, grid_points: int = 1024, rng: np.random.Generator,
) -> tuple[float, float] | str:  # fmt: skip
    """The cluster-bootstrap percentile CI of the pooled q-quantile's ratio B/A (whole runs
    resampled), or why it does not exist. Apart from tail_test, for the battery to ask for
    it once it knows the comparison ends at this look (STATS.md v3)."""
    ra = [as_values(r, f"side A run {i}") for i, r in enumerate(runs_a)]
    rb = [as_values(r, f"side B run {i}") for i, r in enumerate(runs_b)]
    boot_b = _boot_quantiles(rb, q, n_boot, grid_points, rng)  # B first: as before
    boot_a = _boot_quantiles(ra, q, n_boot, grid_points, rng)
    return _percentile_ci(q, boot_a, boot_b, confidence)


def _distance(b: Array, a: Array, logs: bool) -> Array:
    """|log(b / a)| per row when every sample is positive (`logs`), else |b - a|.

    The choice depends on the data alone, never on the labelling, so the permutation
    test stays valid across chunks of relabellings; a mix of logs and differences within
    one permutation distribution would not be comparable.
    """
    if logs:
        return np.asarray(np.abs(np.log(b / a)))
    return np.asarray(np.abs(b - a))


def _percentile_ci(
    q: float, boot_a: Array, boot_b: Array, confidence: float
) -> tuple[float, float] | str:
    """The percentile CI of the ratio B/A, or why it does not exist."""
    bad = int((boot_a <= 0).sum())
    if bad:
        name = tail_name(q)
        return (f"{name} CI undefined: side A's pooled {name} is <= 0 in {bad} of "
                f"{boot_a.size} bootstrap draws")  # fmt: skip
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(boot_b / boot_a, [tail, 1 - tail])
    return float(lo), float(hi)


def _tail_result(
    q: float, va: float, vb: float, perm: PermP, ci: tuple[float, float] | str | None
) -> TailTest:
    """The test's estimates, with None and the reason where a ratio to A does not exist
    (A's quantile 0: the change is unbounded in %; 0 on both sides: 0 / 0) or the CI
    does not (`ci` is then the reason; None: no CI was asked for, nothing to explain)."""
    name = tail_name(q)
    why: list[str] = []
    ratio: float | None = vb / va if va > 0 and vb >= 0 else None
    if va <= 0 and vb == va:
        why.append(f"{name} ratio undefined: sides A's and B's pooled {name} are both {va:.6g}")
    elif va <= 0:
        why.append(f"{name} ratio undefined: side A's pooled {name} is {va:.6g}")
    elif vb < 0:
        why.append(f"{name} ratio undefined: side B's pooled {name} is {vb:.6g}")
    lo = hi = None
    if ratio is not None and isinstance(ci, tuple):
        lo, hi = ci
    elif ratio is not None and isinstance(ci, str):
        why.append(ci)
    return TailTest(q, va, vb, ratio, perm.p_value, lo, hi, tuple(why), perm.n_perm)


def _boot_quantiles(
    runs: list[Array], q: float, n_boot: int, grid_points: int, rng: np.random.Generator
) -> Array:
    """Pooled q-quantile of n_boot resamples of whole runs (with replacement)."""
    pooled = np.concatenate(runs)
    grid = _quantile_grid(pooled, q, grid_points)
    counts = _count_matrix(runs, grid)
    sizes = np.array([r.size for r in runs], dtype=np.float64)
    w = rng.multinomial(len(runs), np.full(len(runs), 1 / len(runs)), size=n_boot)
    w = w.astype(np.float64)
    return _grid_quantile(w @ counts, w @ sizes, grid, q)


def _max_test(
    ra: list[Array], rb: list[Array], n_perm: int, resolve: float | None, logs: bool,
    rng: np.random.Generator,
) -> TailTest:  # fmt: skip
    """The maximum's permutation test. No CI: a percentile bootstrap of a sample maximum
    is inconsistent (a resample's max is the sample's with probability ~63%), and an
    m-out-of-n bootstrap needs a choice of m the data cannot check at 24 runs."""
    maxima = np.array([r.max() for r in ra + rb])

    def distance(labels: Array) -> Array:
        ma = np.where(labels == 1, maxima, -np.inf).max(axis=1)
        mb = np.where(labels == 0, maxima, -np.inf).max(axis=1)
        return _distance(mb, ma, logs)

    perm = adaptive_perm_p(distance, len(ra), len(rb), n_perm=n_perm, resolve=resolve, rng=rng)
    va, vb = float(maxima[: len(ra)].max()), float(maxima[len(ra) :].max())
    return _tail_result(1.0, va, vb, perm, None)
