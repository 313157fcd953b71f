"""Change points in a history of tested heads: one value per head (the median of its
comparison's B-side per-run values), in push order.

Pure: numbers in, dataclasses out; numpy and ruptures only (no Django).

Method (docs/statistics.md "Drift detection"; chosen and calibrated by
perf/drift_simulation.py):
  - PELT (Killick et al. 2012: the exact optimal segmentation under a linear penalty)
    from ruptures (Truong, Oudre, Vayatis, Signal Processing 2020), minimum segment
    MIN_SIZE heads;
  - the "rank" cost (Lung-Yut-Fong, Levy-Leduc, Cappe 2015: a change in the mean rank,
    Kruskal-Wallis-like): distribution-free, so an odd head (a noisy host week, one
    bad build) weighs no more than any other head above the median;
  - penalty PENALTY_FACTOR * log(n) per change (BIC-like in n);
  - confirmation (confirmed()): the history is searched again after every push, so a
    change point is reported only when the searches of the last CONFIRM_CHECKS histories
    agree on it (within CONFIRM_HEADS heads).
Simulated on 60 heads, each the median of 24 runs at CV 5% (per-head sd ~1.3%): "rank"
at 3 log n found a 3% step within 2 heads as often as "l2" (97% of trials) with no false
change point in 300 flat histories, where "l2" at 3-4 log n gave 1-3% (7% with 5% of the
heads 5% off); with such outlier heads "rank" stayed below 1% and "l1" at 2 log n lost
detections as the penalty rose. The values are also standardised by a robust noise scale
(MAD of successive differences / sqrt(2), on logs when positive) so that the "l1"/"l2"
costs can be tried with the same penalty; "rank" does not need it (ranks are
scale-free), but a scale of 0 is how a constant series is recognised.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import ruptures as rpt

COST = "rank"
MIN_SIZE = 3  # heads per segment: a change needs 3 heads after it to be reported
MIN_POINTS = 2 * MIN_SIZE  # fewer heads than this: no change point can be found
PENALTY_FACTOR = 3.0  # penalty = PENALTY_FACTOR * log(n)
# The history is searched again after every push: a change point is reported only once the
# last CONFIRM_CHECKS histories (this one and the 4 before, one head shorter each) all find
# it within CONFIRM_HEADS heads. Unconfirmed, a flat branch searched after each of 60
# pushes got a false change point in 11-15% of simulated branches (each search alone
# ~1-2%); confirmed, 1-5%, at the cost of 4 more heads before it is reported.
CONFIRM_CHECKS = 5
CONFIRM_HEADS = 2
# MAD -> standard deviation for normal noise; successive differences have sqrt(2) x it.
_MAD_TO_SD = 1.4826
_DIFF_TO_SD = math.sqrt(2.0)


@dataclass(frozen=True)
class ChangePointFound:
    index: int  # the first head after the change (0-based position in `values`)
    before_median: float  # median of the segment before the change
    after_median: float  # median of the segment from `index` on
    change_pct: float  # 100 * (after - before) / |before|


def noise_scale(x: np.ndarray) -> float:
    """Robust head-to-head noise sd: MAD of successive differences / sqrt(2); when that
    is 0 (most differences exactly equal), the mean absolute difference instead; 0 only
    for a constant series."""
    d = np.diff(x)
    if d.size == 0:
        return 0.0
    mad = float(np.median(np.abs(d - np.median(d)))) * _MAD_TO_SD / _DIFF_TO_SD
    if mad > 0:
        return mad
    return float(np.mean(np.abs(d))) / _DIFF_TO_SD


def detect(
    values: Sequence[float] | npt.NDArray[np.floating],
    *,
    penalty_factor: float = PENALTY_FACTOR,
    cost: str = COST,
    min_size: int = MIN_SIZE,
) -> list[ChangePointFound]:
    """The change points of `values` (one per tested head, in push order), oldest first.

    Raises ValueError on NaN or inf (a history must never hold one). Fewer than
    2 * min_size values, or a constant series: none. A change whose segment before has
    a median of 0 has no % size and is left out.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values hold NaN or inf")
    n = x.size
    if n < 2 * min_size:
        return []
    signal = np.log(x) if (x > 0).all() else x
    scale = noise_scale(signal)
    if scale == 0:  # constant
        return []
    z = (signal - np.median(signal)) / scale
    algo = rpt.Pelt(model=cost, min_size=min_size, jump=1).fit(z.reshape(-1, 1))
    ends = algo.predict(pen=penalty_factor * math.log(n))  # segment ends; the last is n
    bounds = [0, *ends]
    found = []
    for k in range(1, len(bounds) - 1):
        before = float(np.median(x[bounds[k - 1] : bounds[k]]))
        after = float(np.median(x[bounds[k] : bounds[k + 1]]))
        if before == 0:
            continue
        change_pct = 100.0 * (after - before) / abs(before)
        found.append(ChangePointFound(bounds[k], before, after, change_pct))
    return found


def agree(
    latest: Sequence[ChangePointFound], earlier: Sequence[Sequence[ChangePointFound]]
) -> list[ChangePointFound]:
    """The change points of `latest` that each of the `earlier` searches also found within
    CONFIRM_HEADS heads."""
    return [
        c for c in latest
        if all(any(abs(c.index - e.index) <= CONFIRM_HEADS for e in found) for found in earlier)
    ]  # fmt: skip


def confirmed(
    values: Sequence[float] | npt.NDArray[np.floating], *, checks: int = CONFIRM_CHECKS
) -> list[ChangePointFound]:
    """detect() on `values` and on its `checks` - 1 shorter prefixes (the histories as they
    were at the previous pushes); the change points they all agree on, with the sizes of
    the latest search. None while a prefix is shorter than MIN_POINTS."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n - (checks - 1) < MIN_POINTS:
        if not np.isfinite(x).all():
            raise ValueError("values hold NaN or inf")
        return []
    latest = detect(x)
    if not latest:
        return []
    return agree(latest, [detect(x[: n - k]) for k in range(1, checks)])


def is_regression(change_pct: float, lower_is_better: bool) -> bool:
    """Whether a change of `change_pct` % goes in the metric's worse direction."""
    return change_pct > 0 if lower_is_better else change_pct < 0
