"""Sweeps: how a kernel's primary scales along an axis, and whether two changes interact.

Pure: numbers in, answers out, NumPy only, no Django (issue 36). A sweep measures the
run-level primary (one value per run) at several values of an axis (vCPUs, writers, a
parameter), per side. Two questions, each with a verdict like a comparison's:

Scaling. Per side, the slope of the primary against the axis: Theil-Sen (the median of the
slopes of every pair of runs at different axis values), because one odd boot moves a
least-squares slope and does not move a median. On log scales (the primary always, the
axis too when it is a count) the slope is the growth exponent: 0.5 means "grows like the
square root of the vCPUs", whatever the unit. Its CI is a bootstrap that resamples whole
runs within each axis value (the run is the independent unit, STATS.md; resampling within
each value keeps the design's run counts), percentile interval at 1 - alpha. B against A
is the ratio of the slopes, B/A, with its CI from the same replicates: replicate k of the
ratio is B's replicate k over A's, the two sides drawn independently. The verdict, on the
ratio and a relative threshold the benchmark declares (0.10: a slope 10% steeper counts):
  - scales-worse / scales-better: the ratio's CI excludes 1 AND the estimate lies beyond
    the threshold on that side (a significant but small difference of slopes is not an
    alert, as hold_small keeps a sub-threshold comparison from one); worse or better by
    the metric's direction: B's primary grows faster along the axis than A's (the
    difference of slopes B - A > 0) is worse when lower is better (a time), better when
    higher is better (a throughput). The sign of A's slope matters: when the primary falls
    along the axis, a ratio above 1 means B falls faster;
  - same: the ratio's CI lies inside (1 - threshold, 1 + threshold);
  - inconclusive otherwise, with the reason.
When A's slope CI includes 0 the ratio is undefined (replicates of A's slope near 0 send
it to +-infinity, and "10% steeper than flat" means nothing), yet a flat A is exactly where
a B that grows is news. Then the verdict rests on the difference of slopes B - A in the
slope's own units (an exponent on log scales) against `slope_threshold`, an absolute
threshold the benchmark declares, with the same three rules (CI excludes 0 and the
estimate beyond it; CI inside +-slope_threshold; else inconclusive). Without one the
verdict is inconclusive and says why. The difference and its CI are reported either way.

Interaction (a 2 x 2: two changes, or a change and a parameter at two levels 0 and 1):
the difference-in-differences of the log medians, reported as (B1/A1)/(B0/A0) - 1 in %:
how much B's effect at level 1 differs from its effect at level 0. Its CI resamples whole
runs in each of the four cells independently. Verdicts: interaction (the CI excludes 0
and the estimate is beyond +-threshold_pct), no-interaction (the CI inside
+-threshold_pct), else inconclusive.

Limits. Measured by perf/sweep_simulation.py at the design's sizes (3 points x 24 runs
per side; a 2 x 2 of 24 runs per cell), A/A: the scaling verdict alarmed in 0 of 400 sweeps
at CV 2% and in 95 of 2,000 (4.75%) at CV 5%, where the 10% threshold is only about two
standard errors of the ratio and the CI alone decides: a 5% test, not a stricter one; the
interaction verdict in 1.5% and 2.35% (at a 2% threshold; the bootstrap of a median of 24
runs is lumpy and errs wide). Power: a 20% steeper exponent 100% (CV 2%) and 96% (CV 5%),
a 5% interaction 99.8% and 46%. There is no multiplicity correction across several sweeps
and no sequential looks: a sweep is analysed once, at its planned runs. Theil-Sen assumes
a straight line on the chosen scales; a knee (scales until the cache runs out) is averaged
over, not found: look at the per-point medians. Each point needs >= 2 runs and the axis
>= 2 distinct values; 3 or more are what make a slope worth stating.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import binom

from stats import defaults, methods

Array = NDArray[np.float64]

N_RESAMPLES = 2000  # bootstrap replicates per CI
ALPHA = defaults.ALPHA  # two-sided: CIs at 1 - ALPHA
SEED = 20261201  # the default seed: the same data give the same CI
MIN_RUNS_PER_POINT = 2
_CELLS_PER_CHUNK = 4_000_000  # pairwise slopes held at once by the bootstrap (32 MB)

SCALES_WORSE = "scales-worse"
SCALES_BETTER = "scales-better"
SAME = "same"
INCONCLUSIVE = "inconclusive"
SCALING_VERDICTS = (SCALES_WORSE, SCALES_BETTER, SAME, INCONCLUSIVE)

INTERACTION = "interaction"
NO_INTERACTION = "no-interaction"
INTERACTION_VERDICTS = (INTERACTION, NO_INTERACTION, INCONCLUSIVE)

RATIO = "ratio"  # the scaling verdict's basis: B's slope over A's
DIFFERENCE = "difference"  # B's slope minus A's, when A's slope CI includes 0


class Point(NamedTuple):
    """One axis value and the run-level primary of each run measured at it."""

    x: float
    runs: ArrayLike


@dataclass(frozen=True)
class Slope:
    """A side's Theil-Sen slope: of log(value) on log(x) (the growth exponent) when both
    scales are logs, else in the scales' units per axis unit."""

    estimate: float
    ci_low: float
    ci_high: float
    n_points: int
    n_runs: int
    log_x: bool
    log_y: bool

    @property
    def excludes_zero(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0


@dataclass(frozen=True)
class Scaling:
    a: Slope
    b: Slope
    # B/A; None (with the reason) when A's slope CI includes 0.
    ratio: float | None
    ratio_ci_low: float | None
    ratio_ci_high: float | None
    difference: float  # B - A, in the slope's units; always defined
    difference_ci_low: float
    difference_ci_high: float
    basis: str  # RATIO or DIFFERENCE: what the verdict was decided on
    threshold: float  # relative, on the ratio
    slope_threshold: float | None  # absolute, on the difference
    verdict: str
    reason: str


@dataclass(frozen=True)
class Interaction:
    effect_0: float  # B0/A0 - 1, in %
    effect_1: float  # B1/A1 - 1, in %
    estimate: float  # (B1/A1)/(B0/A0) - 1, in %
    ci_low: float
    ci_high: float
    threshold_pct: float
    verdict: str
    # B's effect at level 1 against level 0 by the metric's direction: "worse", "better";
    # "" when the estimate is 0.
    direction: str
    reason: str


# -- input ---------------------------------------------------------------------------------


def _runs(values: ArrayLike, what: str, log: bool) -> Array:
    v = methods.as_values(values, what, min_n=MIN_RUNS_PER_POINT)
    if log and (v <= 0).any():
        raise methods.StatsInputError(f"{what}: {int((v <= 0).sum())} value(s) <= 0 on a "
                                      "log scale")  # fmt: skip
    return np.log(v) if log else v


def _points(points: Sequence[tuple[float, ArrayLike]], log_x: bool,
            log_y: bool) -> tuple[Array, list[Array]]:  # fmt: skip
    """The axis values (log when log_x) and each point's y values, checked; sorted by x."""
    xs, ys = [], []
    for x, runs in points:
        what = f"the point at x={x}"
        if not math.isfinite(x):
            raise methods.StatsInputError(f"{what}: the axis value is not finite")
        if log_x and x <= 0:
            raise methods.StatsInputError(f"{what}: an axis value <= 0 on a log scale")
        xs.append(math.log(x) if log_x else float(x))
        ys.append(_runs(runs, what, log_y))
    if len(set(xs)) != len(xs):
        raise methods.StatsInputError("an axis value appears twice: one point per value")
    if len(xs) < 2:
        raise methods.StatsInputError(f"{len(xs)} distinct axis value(s): a slope needs >= 2")
    order = np.argsort(xs)
    return np.asarray(xs)[order], [ys[i] for i in order]


# -- slopes --------------------------------------------------------------------------------


def _pair_slopes(x: Array, ys: Sequence[Array]) -> Array:
    """Every pairwise slope between runs at different axis values; ys[i] may be (R, n_i)
    (R replicates: the result is (R, pairs)) or (n_i,) (the result is (pairs,))."""
    parts = []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            d = ys[j][..., :, None] - ys[i][..., None, :]
            parts.append(d.reshape(*d.shape[:-2], -1) / (x[j] - x[i]))
    return np.concatenate(parts, axis=-1)


def _theil_sen(x: Array, ys: Sequence[Array], n_resamples: int,
               rng: np.random.Generator) -> tuple[float, Array]:  # fmt: skip
    """The Theil-Sen slope and n_resamples bootstrap replicates of it (whole runs resampled
    within each point)."""
    estimate = float(np.median(_pair_slopes(x, ys)))
    sizes = [y.size for y in ys]
    cells = sum(sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1, len(sizes)))
    chunk = max(1, _CELLS_PER_CHUNK // cells)
    reps = np.empty(n_resamples)
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        drawn = [y[rng.integers(0, y.size, (r, y.size))] for y in ys]
        reps[start:start + r] = _row_medians(_pair_slopes(x, drawn))  # fmt: skip
    return estimate, reps


def _row_medians(m: Array) -> Array:
    """np.median(m, axis=1) from one single-kth partition (4x faster than np.median's, which
    the bootstrap spends most of its time in): the upper middle value, and for an even
    count the largest value left of it."""
    k = m.shape[1] // 2
    part = np.partition(m, k, axis=1)
    if m.shape[1] % 2:
        return part[:, k]
    return 0.5 * (part[:, :k].max(axis=1) + part[:, k])


def _ci(reps: Array, alpha: float) -> tuple[float, float]:
    low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _check_design(n_resamples: int, alpha: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples {n_resamples}: at least 1")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha}: not in (0, 1)")


def _slope(points: Sequence[tuple[float, ArrayLike]], log_x: bool, log_y: bool,
           n_resamples: int, alpha: float,
           rng: np.random.Generator) -> tuple[Slope, Array]:  # fmt: skip
    _check_design(n_resamples, alpha)
    x, ys = _points(points, log_x, log_y)
    estimate, reps = _theil_sen(x, ys, n_resamples, rng)
    low, high = _ci(reps, alpha)
    n_runs = sum(y.size for y in ys)
    return Slope(estimate, low, high, len(x), n_runs, log_x, log_y), reps


def slope(
    points: Sequence[tuple[float, ArrayLike]],
    *,
    log_x: bool,
    log_y: bool = True,
    n_resamples: int = N_RESAMPLES,
    alpha: float = ALPHA,
    rng: np.random.Generator | None = None,
) -> Slope:
    """One side's Theil-Sen slope of the run-level primary against the axis, with its
    bootstrap CI (whole runs resampled within each point). `points`: (x, run values)
    pairs, one per axis value; log_x and log_y: the slope of logs (both: the growth
    exponent). Refuses (StatsInputError, a ValueError) fewer than 2 distinct axis values,
    a point with < 2 runs, NaN or inf, and values <= 0 on a log scale."""
    rng = rng if rng is not None else np.random.default_rng(SEED)
    return _slope(points, log_x, log_y, n_resamples, alpha, rng)[0]


# -- verdict rules ---------------------------------------------------------------------------


def _worse(up: bool, lower_is_better: bool) -> bool:
    """Whether B's primary moving up (relative to A's) is worse."""
    return up == lower_is_better


def _decide(est: float, low: float, high: float, null: float, band: float) -> tuple[str, bool]:
    """The rules shared by both verdicts, on an estimate and its CI around `null` (1 for a
    ratio, 0 for a difference) with a band +-band: ("changed", up) when the CI excludes the
    null and the estimate is beyond the band on that side; ("same", _) when the CI lies
    inside the band; else ("inconclusive", _)."""
    if low > null and est >= null + band:
        return "changed", True
    if high < null and est <= null - band:
        return "changed", False
    if null - band < low and high < null + band:
        return "same", est > null
    return "inconclusive", est > null


def _fmt_slope(s: Slope) -> str:
    what = "exponent" if s.log_x and s.log_y else "slope"
    return f"{what} {s.estimate:.3g} [{s.ci_low:.3g}, {s.ci_high:.3g}]"


def scaling(
    a_points: Sequence[tuple[float, ArrayLike]],
    b_points: Sequence[tuple[float, ArrayLike]],
    *,
    log_x: bool,
    lower_is_better: bool,
    threshold: float,
    slope_threshold: float | None = None,
    log_y: bool = True,
    alpha: float = ALPHA,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Scaling:
    """Does B scale worse than A along the axis? Each side's slope (see `slope`), B/A with
    its CI from paired replicates (replicate k of each side, drawn independently), and the
    verdict by the rules of the module docstring. `threshold`: relative, on the ratio
    (0.10: 10% steeper counts); `slope_threshold`: absolute, on B - A in the slope's units,
    used only when A's slope CI includes 0 (None: that case is inconclusive)."""
    if not threshold > 0:
        raise ValueError(f"threshold {threshold}: a relative threshold > 0 (0.10 = 10%)")
    if slope_threshold is not None and not slope_threshold > 0:
        raise ValueError(f"slope_threshold {slope_threshold}: > 0, or None")
    rng_a, rng_b = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    a, reps_a = _slope(a_points, log_x, log_y, n_resamples, alpha, rng_a)
    b, reps_b = _slope(b_points, log_x, log_y, n_resamples, alpha, rng_b)
    diff = b.estimate - a.estimate
    d_low, d_high = _ci(reps_b - reps_a, alpha)
    sides = f"A's {_fmt_slope(a)}, B's {_fmt_slope(b)}"
    ratio = r_low = r_high = None
    if a.excludes_zero and a.estimate != 0 and not (reps_a == 0).any():
        basis, ratio = RATIO, b.estimate / a.estimate
        r_low, r_high = _ci(reps_b / reps_a, alpha)
        outcome, b_steeper = _decide(ratio, r_low, r_high, 1.0, threshold)
        up = b_steeper == (a.estimate > 0)  # B's primary grows faster along the axis
        verdict, reason = _scaling_verdict(
            outcome, up, lower_is_better, f"B/A {ratio:.3g} [{r_low:.3g}, {r_high:.3g}]",
            f"+-{threshold:.0%}", sides)  # fmt: skip
    else:
        basis = DIFFERENCE
        undefined = "A's slope CI includes 0 (or a replicate of it is 0): a ratio is undefined"
        if slope_threshold is None:
            verdict = INCONCLUSIVE
            reason = f"{undefined}, and no absolute slope threshold is declared ({sides})"
        else:
            outcome, up = _decide(diff, d_low, d_high, 0.0, slope_threshold)
            verdict, reason = _scaling_verdict(
                outcome, up, lower_is_better,
                f"{undefined}; B - A {diff:+.3g} [{d_low:+.3g}, {d_high:+.3g}]",
                f"+-{slope_threshold:g}", sides)  # fmt: skip
    return Scaling(a, b, ratio, r_low, r_high, diff, d_low, d_high, basis, threshold,
                   slope_threshold, verdict, reason)  # fmt: skip


def _scaling_verdict(outcome: str, up: bool, lower_is_better: bool, ci: str, band: str,
                     sides: str) -> tuple[str, str]:  # fmt: skip
    if outcome == "changed":
        worse = _worse(up, lower_is_better)
        grows = "grows faster" if up else "grows slower"
        return (SCALES_WORSE if worse else SCALES_BETTER,
                f"{ci} is beyond {band} and excludes no change: B's primary {grows} along "
                f"the axis than A's ({sides})")  # fmt: skip
    if outcome == "same":
        return SAME, f"{ci} lies inside {band} ({sides})"
    return INCONCLUSIVE, f"{ci} neither beyond nor inside {band} ({sides})"


# -- interaction -----------------------------------------------------------------------------


def _medians(y: Array, n_resamples: int, rng: np.random.Generator) -> Array:
    """n_resamples bootstrap replicates of the median of y (whole runs resampled)."""
    return _row_medians(y[rng.integers(0, y.size, (n_resamples, y.size))])


def interaction(
    a0: ArrayLike,
    a1: ArrayLike,
    b0: ArrayLike,
    b1: ArrayLike,
    *,
    lower_is_better: bool,
    threshold_pct: float,
    alpha: float = ALPHA,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> Interaction:
    """Does B's effect on the primary depend on the level (0 or 1) of the other factor?
    The difference-in-differences of the log medians as (B1/A1)/(B0/A0) - 1 in %, its CI
    from resampling whole runs in each of the four cells, and the verdict (module
    docstring). Each cell: one positive value per run, >= 2 runs."""
    _check_design(n_resamples, alpha)
    if not threshold_pct > 0:
        raise ValueError(f"threshold_pct {threshold_pct}: > 0")
    cells = {name: _runs(v, f"cell {name}", log=True)
             for name, v in (("A0", a0), ("A1", a1), ("B0", b0), ("B1", b1))}  # fmt: skip
    m = {k: float(np.median(v)) for k, v in cells.items()}
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]
    r = {k: _medians(v, n_resamples, g) for (k, v), g in zip(cells.items(), rngs, strict=True)}
    did = (m["B1"] - m["A1"]) - (m["B0"] - m["A0"])
    reps = (r["B1"] - r["A1"]) - (r["B0"] - r["A0"])
    low, high = _ci(reps, alpha)

    def pct(log_ratio: float) -> float:
        return 100 * math.expm1(log_ratio)

    est, low_pct, high_pct = pct(did), pct(low), pct(high)
    outcome, _ = _decide(est, low_pct, high_pct, 0.0, threshold_pct)
    direction = "" if did == 0 else ("worse" if _worse(did > 0, lower_is_better) else "better")
    ci = f"(B1/A1)/(B0/A0) {est:+.2f}% [{low_pct:+.2f}%, {high_pct:+.2f}%]"
    band = f"+-{threshold_pct:g}%"
    effects = (f"B's effect {pct(m['B0'] - m['A0']):+.2f}% at level 0, "
               f"{pct(m['B1'] - m['A1']):+.2f}% at level 1")  # fmt: skip
    if outcome == "changed":
        verdict = INTERACTION
        reason = (f"{ci} is beyond {band} and excludes 0: B is {direction} at level 1 than at "
                  f"level 0 ({effects})")  # fmt: skip
    elif outcome == "same":
        verdict, reason = NO_INTERACTION, f"{ci} lies inside {band} ({effects})"
    else:
        verdict, reason = INCONCLUSIVE, f"{ci} neither beyond nor inside {band} ({effects})"
    return Interaction(
        effect_0=pct(m["B0"] - m["A0"]), effect_1=pct(m["B1"] - m["A1"]), estimate=est,
        ci_low=low_pct, ci_high=high_pct, threshold_pct=threshold_pct, verdict=verdict,
        direction=direction, reason=reason,
    )  # fmt: skip


def median_ci(values: ArrayLike, alpha: float = ALPHA) -> tuple[float, float]:
    """A distribution-free CI of the median of `values` (the sweep's curves draw it at
    each point): the order statistics x(k) and x(n+1-k) with the largest k whose binomial
    tail P(Bin(n, 1/2) < k) is at most alpha/2; the sample's range when n is too small
    for any k (n <= 5 at 95%), which then covers more than 1 - alpha."""
    x = np.sort(_runs(values, "median_ci", log=False))
    n = x.size
    k = int(binom.ppf(alpha / 2, n, 0.5))  # P(Bin < k) <= alpha/2 for this k, checked below
    while k > 0 and binom.cdf(k - 1, n, 0.5) > alpha / 2:
        k -= 1
    if k < 1:
        return float(x[0]), float(x[-1])
    return float(x[k - 1]), float(x[n - k])
