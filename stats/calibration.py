"""A/A calibration: how often does the primary test cry wolf on runs of one kernel?

Runs of one kernel on one target, in run order, are cut into blocks of consecutive runs
(a block keeps runs that ran close in time together, so slow drift of the machine stays
inside a block instead of looking like an A/B difference); each split gives a random half
of the blocks to A and the rest to B and runs the primary test. Splits of one set of runs
overlap, so the rates are correlated estimates: fine for "is the test calibrated on this
machine", not a substitute for 2000 independent A/A comparisons.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from stats import methods, sequential

ALPHAS = (0.01, 0.05, 0.10)


@dataclass(frozen=True)
class Calibration:
    runs: int
    block: int
    splits: int
    runs_per_side: int
    false_alarms: dict[float, float]  # alpha -> share of splits with p <= alpha
    median: float
    cv_pct: float  # run-to-run: SD of log values, in %
    mde_pct: dict[int, float]  # runs per side -> smallest shift found 80% of the time
    mde_alpha: float  # ... by a test at this level: the design's last look's boundary


def aa_calibration(
    values: ArrayLike,
    *,
    block: int = 4,
    splits: int = 1000,
    n_perm: int = 999,
    mde_alpha: float,
    rng: np.random.Generator,
) -> Calibration:
    """`values`: one run-level value per run of one kernel, in run order. `mde_alpha`:
    the level the smallest detectable shifts are computed at, the one the comparison's
    last look holds the test to (not .05: the earlier looks spent some of it)."""
    v = methods.as_values(values, "runs", min_n=4 * block)
    if (v <= 0).any():
        raise methods.StatsInputError("calibration needs positive values (CV from logs)")
    n_blocks = v.size // block
    blocks = v[: n_blocks * block].reshape(n_blocks, block)
    half = n_blocks // 2
    p = np.empty(splits)
    for i in range(splits):
        pick = rng.permutation(n_blocks)
        a = blocks[pick[:half]].ravel()
        b = blocks[pick[half : 2 * half]].ravel()
        p[i] = methods.brunner_munzel(a, b, n_perm=n_perm, rng=rng).p_value
    cv = float(np.std(np.log(v), ddof=1) * 100)
    return Calibration(
        runs=int(v.size), block=block, splits=splits, runs_per_side=half * block,
        false_alarms={alpha: float((p <= alpha).mean()) for alpha in ALPHAS},
        median=float(np.median(v)), cv_pct=cv,
        mde_pct={n: sequential.smallest_detectable_shift(cv, n, n, alpha=mde_alpha)
                 for n in (24, 48, 96)}, mde_alpha=mde_alpha,
    )  # fmt: skip
