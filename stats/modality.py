"""Is one side's run-level distribution multimodal? The "multimodal?" warning of STATS.md v2.

Pure NumPy/SciPy: an array of run-level values in, a `ModalityTest` out, no Django.

Method: a two-component normal mixture with one shared within-group spread, fitted by EM
(from the best two-means split and three fixed splits) to the log values (raw values where
any is <= 0), against a single normal. The warning fires only when all three hold:

1. the mixture fits significantly better than one normal: the likelihood-ratio statistic
   (2 x log-likelihood gain) has p <= `ALPHA` (`ALPHA_LARGE` from `LARGE_N` runs). Its
   null distribution depends on n only (the statistic is location-scale invariant), so it
   is tabulated once by simulation
   (`NULL_QUANTILES`, from perf/modality_calibration.py --table) rather than bootstrapped
   per call: exact to the table's precision, and about 1 ms a call;
2. both groups are real groups: the fit only admits mixtures whose smaller group holds at
   least `MIN_WEIGHT` of the runs (3.6 of 24), so a run or two far out is an outlier, not a
   mode;
3. the groups are far apart: their means differ by at least `MIN_SEPARATION` within-group
   standard deviations. With many runs the test alone also rejects skewed unimodal sides
   (a mixture fits skew better than one normal); their best fits are less separated.

It runs on every run-level statistic the report shows (battery._warnings), and the report
draws each one's run values in run order and as an ECDF per side, so a missed warning
costs little: STATS.md v3 wants the warning specific (<= 3% of unimodal sides at 24, 48
and 96 runs), with the detection rates perf/stats_targets_v3.py checks.

Known limit, v3's one target missed: a side skewed even in logs (1000 + Gamma(2) x 50,
skewness 1.4) fires on 16-31% of sides at 24-96 runs: with few runs a long tail and a
small second group look alike. Making the test skew-blind (a Box-Cox transform first) cut
that to 5-10% but also cut the bimodal case's detection from 59% to 24% at 24 runs. Also
tried (1,000 sides a cell, issue 32): the sample's kurtosis, the groups' SD ratio and the
groups' own skewness as a further condition, and a larger MIN_SEPARATION: none brings the
gamma side to 3% while the bimodal case keeps 60% at 24 runs (MIN_SEPARATION 3.5: gamma
17.7% / 14.6% / 5.5% at 24 / 48 / 96 runs, bimodal 62.6% / 75.5% / 81.3% at 24 / 36 / 48).

Why not Sarle's bimodality coefficient (the warning's rule before): it reads skewness and
kurtosis, so it fires on outliers and skew, and misses an unbalanced pair of modes.
Hartigan's dip test (PyPI `diptest`, GPL) is robust but calibrated against the uniform: on
STATS.md's bimodal model it fires 4% at 24 runs and 7% at 96. Power at 24 runs is bounded:
even the best invariant test that knows the true mixture shape (30% of runs, 3.85 SDs
apart) detects ~81% at a 5% false-alarm rate; this general test ~71% at 5%, ~62% at ALPHA.

Nothing here returns NaN or inf: constant data, data on two distinct values and fewer than
`MIN_N` finite values give `multimodal=False`, statistic 0 and no p-value.
"""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

Array = NDArray[np.float64]

MIN_N = 10  # fewer runs than this: no verdict on shape
ALPHA = 0.03  # p at or below this (and the two conditions below) fires; in NULL_LEVELS
# From LARGE_N runs, a stricter level: one normal fires ~3.2% at 48 runs at ALPHA, over v3's
# 3%, where the bimodal case has power to spare (94% at 48 runs, target 90%).
LARGE_N = 40
ALPHA_LARGE = 0.02  # in NULL_LEVELS
MIN_WEIGHT = 0.15  # the smaller group holds at least this share of the runs
MIN_SEPARATION = 3.0  # group means at least this many within-group SDs apart
N_ITER = 40  # EM iterations from each start (separated groups converge in a few)
VAR_FLOOR = 0.01  # within-group variance at least this share of the total variance
START_FRACTIONS = (0.25, 0.5, 0.75)  # hard-split starts besides the best split

# The statistic's null distribution (one normal) depends on n only: it is location-scale
# invariant. Tabulated by perf/modality_calibration.py --table: for each n of NULL_SIZES the
# statistic's upper quantiles at the tail probabilities NULL_LEVELS.
NULL_SIZES = (*range(10, 31), 32, 36, 40, 44, 48, 56, 64, 72, 80, 96, 128, 192, 256)
NULL_LEVELS = (0.5, 0.2, 0.1, 0.05, 0.04, 0.03, 0.02, 0.01, 0.005, 0.002, 0.001)
# 40000 standard-normal samples per n, seed 20261124, 454 s
NULL_QUANTILES = (
    (1.471, 3.846, 5.551, 7.216, 7.728, 8.436, 9.464, 11.248, 12.968, 15.184, 16.981),  # n=10
    (1.470, 3.861, 5.572, 7.279, 7.824, 8.561, 9.616, 11.499, 13.304, 15.676, 17.508),  # n=11
    (1.472, 3.838, 5.465, 7.153, 7.676, 8.343, 9.303, 10.955, 12.584, 14.751, 16.108),  # n=12
    (1.429, 3.747, 5.441, 7.153, 7.692, 8.356, 9.358, 10.939, 12.355, 14.203, 15.713),  # n=13
    (1.262, 3.520, 5.113, 6.684, 7.231, 7.873, 8.756, 10.248, 11.713, 13.852, 15.800),  # n=14
    (1.218, 3.457, 5.089, 6.736, 7.236, 7.908, 8.805, 10.224, 11.996, 13.961, 15.604),  # n=15
    (1.186, 3.444, 5.059, 6.645, 7.164, 7.809, 8.735, 10.435, 11.978, 14.125, 15.953),  # n=16
    (1.192, 3.432, 5.062, 6.690, 7.157, 7.863, 8.760, 10.274, 11.826, 13.648, 15.560),  # n=17
    (1.145, 3.397, 5.004, 6.576, 7.093, 7.751, 8.686, 10.363, 12.189, 14.555, 16.148),  # n=18
    (1.148, 3.333, 4.961, 6.576, 7.058, 7.702, 8.669, 10.148, 11.685, 13.358, 15.108),  # n=19
    (1.136, 3.337, 4.934, 6.521, 6.995, 7.662, 8.666, 10.363, 11.872, 14.183, 16.012),  # n=20
    (1.132, 3.288, 4.899, 6.430, 6.866, 7.504, 8.370, 9.994, 11.532, 13.643, 15.716),  # n=21
    (1.082, 3.257, 4.803, 6.356, 6.816, 7.449, 8.306, 9.929, 11.339, 13.575, 15.276),  # n=22
    (1.068, 3.218, 4.783, 6.380, 6.927, 7.578, 8.516, 9.944, 11.425, 13.107, 14.433),  # n=23
    (1.087, 3.224, 4.840, 6.430, 6.904, 7.546, 8.352, 9.662, 11.277, 12.899, 14.264),  # n=24
    (1.053, 3.195, 4.788, 6.428, 6.972, 7.530, 8.454, 10.002, 11.524, 13.813, 15.253),  # n=25
    (1.061, 3.190, 4.751, 6.324, 6.817, 7.419, 8.305, 9.844, 11.322, 13.087, 14.323),  # n=26
    (1.058, 3.191, 4.760, 6.309, 6.771, 7.459, 8.384, 9.885, 11.408, 13.690, 15.333),  # n=27
    (1.027, 3.146, 4.699, 6.240, 6.722, 7.352, 8.322, 10.104, 11.632, 13.564, 15.235),  # n=28
    (1.013, 3.076, 4.626, 6.138, 6.644, 7.209, 8.097, 9.536, 11.094, 12.859, 14.388),  # n=29
    (1.035, 3.135, 4.647, 6.162, 6.650, 7.281, 8.113, 9.624, 11.126, 13.266, 14.650),  # n=30
    (1.013, 3.089, 4.651, 6.207, 6.672, 7.323, 8.226, 9.638, 11.146, 12.888, 14.259),  # n=32
    (0.999, 3.045, 4.633, 6.173, 6.637, 7.265, 8.200, 9.686, 11.119, 13.471, 14.715),  # n=36
    (1.002, 2.969, 4.558, 6.003, 6.473, 7.135, 7.993, 9.550, 11.080, 13.067, 14.540),  # n=40
    (1.000, 2.972, 4.432, 5.949, 6.417, 7.028, 7.930, 9.436, 10.731, 13.006, 14.496),  # n=44
    (0.990, 2.890, 4.404, 5.883, 6.341, 6.919, 7.761, 9.119, 10.801, 13.199, 14.940),  # n=48
    (0.978, 2.862, 4.322, 5.829, 6.290, 6.940, 7.863, 9.333, 10.938, 12.960, 14.254),  # n=56
    (0.996, 2.832, 4.306, 5.832, 6.302, 6.971, 7.764, 9.268, 10.512, 12.465, 13.738),  # n=64
    (0.997, 2.806, 4.220, 5.624, 6.076, 6.690, 7.516, 8.979, 10.499, 12.255, 13.877),  # n=72
    (0.974, 2.809, 4.249, 5.745, 6.213, 6.785, 7.602, 9.186, 10.515, 12.213, 13.641),  # n=80
    (0.976, 2.796, 4.154, 5.588, 6.064, 6.646, 7.523, 8.902, 10.392, 12.271, 14.009),  # n=96
    (0.994, 2.823, 4.226, 5.607, 6.069, 6.694, 7.569, 8.957, 10.506, 12.452, 13.860),  # n=128
    (0.981, 2.796, 4.254, 5.701, 6.130, 6.671, 7.458, 8.733, 10.324, 12.106, 13.950),  # n=192
    (0.970, 2.746, 4.166, 5.476, 5.939, 6.528, 7.336, 8.710, 10.304, 11.961, 13.341),  # n=256
)


@dataclass(frozen=True)
class ModalityTest:
    """The verdict of `multimodality` on one side's run-level values.

    `multimodal` is whether the warning fires; `statistic` the likelihood-ratio statistic
    (2 x log-likelihood gain of the two-group fit over one normal, 0 when no admissible
    two-group fit exists), always finite; `p_value` its p from the tabulated null, never
    below the table's smallest level 0.001 (None when the test did not run: too few values
    or constant data); `method` a short name; `detail`
    one sentence describing the groups for the report (empty when not multimodal).
    """

    multimodal: bool
    statistic: float
    p_value: float | None
    method: str
    detail: str


METHOD = "normal-mixture LRT"


@dataclass(frozen=True)
class _Fit:
    lrt: Array  # (R,) 2 x log-likelihood gain over one normal, >= 0
    weight: Array  # (R,) share of the upper group
    mu_low: Array  # (R,) means, in standardised units
    mu_high: Array
    sigma: Array  # (R,) shared within-group SD, standardised units


def _best_split_starts(z: Array, k_min: int) -> Array:
    """Per row of sorted `z` (R, n): the split point k (lower group z[:k]) with the largest
    between-group variance among groups of at least k_min values (1-D two-means)."""
    n = z.shape[1]
    c = np.cumsum(z, axis=1)
    ks = np.arange(k_min, n - k_min + 1)
    left = c[:, ks - 1] / ks
    right = (c[:, -1:] - c[:, ks - 1]) / (n - ks)
    between = ks * (n - ks) * (right - left) ** 2
    return np.asarray(ks[np.argmax(between, axis=1)])


def _fit(z: Array, var_floor: float) -> _Fit:
    """Fit the shared-spread two-component mixture to each row of sorted, standardised
    `z` (R, n) from several hard-split starts; keep per row the best fit whose smaller
    group holds at least MIN_WEIGHT of the values (none: LRT 0)."""
    r, n = z.shape
    k_min = max(1, math.ceil(MIN_WEIGHT * n))
    splits = [_best_split_starts(z, k_min)]
    splits += [np.full(r, min(max(round(f * n), k_min), n - k_min)) for f in START_FRACTIONS]
    k = np.stack(splits, axis=1)  # (R, S)
    x = z[:, None, :]  # (R, 1, n)
    upper = np.arange(n)[None, None, :] >= k[:, :, None]  # (R, S, n) hard start
    resp = upper.astype(np.float64)
    for _ in range(N_ITER + 1):
        w = resp.mean(axis=2)  # (R, S)
        sw = np.maximum(resp.sum(axis=2), 1e-12)
        sl = np.maximum((1 - resp).sum(axis=2), 1e-12)
        mu2 = (resp * x).sum(axis=2) / sw
        mu1 = ((1 - resp) * x).sum(axis=2) / sl
        var = ((1 - resp) * (x - mu1[..., None]) ** 2 + resp * (x - mu2[..., None]) ** 2).mean(
            axis=2
        )
        var = np.maximum(var, var_floor)
        wc = np.clip(w, 1e-12, 1 - 1e-12)
        a1 = np.log1p(-wc)[..., None] - (x - mu1[..., None]) ** 2 / (2 * var[..., None])
        a2 = np.log(wc)[..., None] - (x - mu2[..., None]) ** 2 / (2 * var[..., None])
        resp = special.expit(a2 - a1)
    # Log-likelihood of the last parameters (the E-step above used them).
    ll = (np.logaddexp(a1, a2) - 0.5 * np.log(2 * np.pi * var)[..., None]).sum(axis=2)
    ll0 = -0.5 * n * (math.log(2 * math.pi) + 1)  # one normal, standardised data
    gain = np.maximum(2 * (ll - ll0), 0.0)
    ok = np.minimum(w, 1 - w) >= MIN_WEIGHT - 1e-9
    gain = np.where(ok, gain, -1.0)
    best = np.argmax(gain, axis=1)
    rows = np.arange(r)
    return _Fit(
        lrt=np.maximum(gain[rows, best], 0.0),
        weight=w[rows, best],
        mu_low=np.minimum(mu1, mu2)[rows, best],
        mu_high=np.maximum(mu1, mu2)[rows, best],
        sigma=np.sqrt(var[rows, best]),
    )


def _standardise(x: Array) -> Array:
    sd = x.std(axis=-1, keepdims=True)
    return np.sort((x - x.mean(axis=-1, keepdims=True)) / sd, axis=-1)


def _quiet(statistic: float = 0.0, p_value: float | None = None) -> ModalityTest:
    return ModalityTest(False, statistic, p_value, METHOD, "")


def null_p(statistic: float, n: int) -> float:
    """The statistic's p-value at n from the null table: log p interpolated linearly between
    the tabulated quantiles (and between neighbouring n); at most 1, and never below the
    table's smallest level (a statistic beyond it gets that level: "p <= 0.001")."""
    sizes = np.asarray(NULL_SIZES, dtype=np.float64)
    table = np.asarray(NULL_QUANTILES, dtype=np.float64)
    m = float(min(max(n, NULL_SIZES[0]), NULL_SIZES[-1]))
    q = np.array([np.interp(m, sizes, table[:, j]) for j in range(table.shape[1])])
    knots = np.maximum.accumulate(np.r_[0.0, q])
    logp = np.log(np.r_[1.0, NULL_LEVELS])
    if statistic >= knots[-1]:
        return NULL_LEVELS[-1]
    return min(1.0, float(np.exp(np.interp(statistic, knots, logp))))


def multimodality(values: ArrayLike) -> ModalityTest:
    """Test one side's run-level values (one per run) for two modes.

    Works on log values when all are positive, else on the raw values. Never NaN or inf:
    NaN/inf values are dropped, and fewer than MIN_N finite values, constant data or data
    on only two distinct values give multimodal False, statistic 0, p None. Deterministic:
    the null distribution is tabulated, nothing is drawn.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    n = v.size
    if n < MIN_N:
        return _quiet()
    logs = bool((v > 0).all())
    x = np.log(v) if logs else v
    sd = float(x.std())
    if not sd > 1e-12 * max(1.0, float(np.abs(x).max())):
        return _quiet()
    # Within-group variance floor: VAR_FLOOR of the total, and at least the variance of
    # rounding to the data's resolution (the smallest gap between distinct values), so
    # tied, quantised values cannot make a group of zero spread. A floor above VAR_FLOOR
    # only lowers the statistic: the tabulated null stays conservative.
    gaps = np.diff(np.unique(x))
    if gaps.size < 2:  # two distinct values: quantisation (see the ties warning), not modes
        return _quiet()
    resolution = float(gaps.min()) / sd
    var_floor = max(VAR_FLOOR, resolution**2 / 12)
    fit = _fit(_standardise(x)[None, :], var_floor)
    t = float(fit.lrt[0])
    p = null_p(t, n)
    if t <= 0:
        return _quiet(0.0, p)
    w_high = float(fit.weight[0])
    separation = float((fit.mu_high[0] - fit.mu_low[0]) / fit.sigma[0])
    fires = (
        p <= (ALPHA if n < LARGE_N else ALPHA_LARGE) + 1e-12
        and min(w_high, 1 - w_high) >= MIN_WEIGHT - 1e-9
        and separation >= MIN_SEPARATION
    )
    if not fires:
        return _quiet(t, p)
    gap = float((fit.mu_high[0] - fit.mu_low[0]) * sd)
    share, where = (w_high, "above") if w_high <= 0.5 else (1 - w_high, "below")
    if logs:  # the smaller group against the rest, as a % of the rest's typical value
        size = math.expm1(gap) if where == "above" else -math.expm1(-gap)
        amount = f"about {size:.1%} {where} the rest"
    else:
        amount = f"about {gap:.3g} {where} the rest"
    shown_p = f"p < {NULL_LEVELS[-1]:g}" if p <= NULL_LEVELS[-1] else f"p {p:.2g}"
    return ModalityTest(
        True,
        t,
        p,
        METHOD,
        f"two modes: {share:.0%} of runs {amount} "
        f"({separation:.1f} within-group SDs apart, {shown_p})",
    )
