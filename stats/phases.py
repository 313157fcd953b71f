"""Grace-period phases of A and B from traced diagnostic runs (benchmarks/rcutrace).

Pure NumPy, on methods.py's rules. The unit is the run, as for the verdicts: each traced
run gives one value per phase (the median over its window's grace periods,
rcutrace.parser.summary), and the sides are compared run against run:
  - compare: per phase, the Hodges-Lehmann shift B - A in the phase's unit with its CI
    (inverted Brunner-Munzel, as the verdicts' shifts), the Brunner-Munzel permutation p,
    and Benjamini-Hochberg across the phases (they are read together, as secondaries);
    a phase is flagged when its adjusted p is at most alpha and its CI excludes 0;
  - share: how much of the change in one phase's run-level median (the whole grace
    period) another (the wait before the first scan) accounts for: the ratio of the two
    differences of medians, with a percentile CI from resampling whole runs within each
    side. Callers report it only when the whole's change is itself flagged (a share of no
    change is not a number anyone should read).
These runs never enter a verdict: they are traced, and tracing perturbs what it traces.
"""

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stats.methods import Shift, brunner_munzel, hodges_lehmann
from stats.sequential import benjamini_hochberg

RunValues = Mapping[str, float]
_MIN_RUNS = 3  # a side needs this many usable traced runs for a phase to be compared


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    n_a: int
    n_b: int
    median_a: float
    median_b: float
    shift: float  # B - A, the phase's unit (Hodges-Lehmann)
    low: float
    high: float
    p_value: float
    q_value: float  # Benjamini-Hochberg across the compared phases
    flagged: bool


@dataclass(frozen=True)
class Share:
    part: str
    whole: str
    estimate: float
    low: float
    high: float
    resamples: int


def compare(
    a: Sequence[RunValues], b: Sequence[RunValues], *, alpha: float = 0.05,
    confidence: float = 0.95, phases: Sequence[str] | None = None,
) -> list[PhaseRow]:  # fmt: skip
    """One row per phase that both sides have in at least _MIN_RUNS runs."""
    names = phases or sorted({k for run in (*a, *b) for k in run})
    rows = []
    for name in names:
        xa = np.array([run[name] for run in a if name in run], dtype=np.float64)
        xb = np.array([run[name] for run in b if name in run], dtype=np.float64)
        if xa.size < _MIN_RUNS or xb.size < _MIN_RUNS:
            continue
        rng = np.random.default_rng(_seed(name, xa, xb))
        shift = hodges_lehmann(xa, xb, confidence=confidence, relative=False, rng=rng)
        p = brunner_munzel(xa, xb, rng=rng).p_value
        rows.append((name, xa, xb, shift, p))
    q = benjamini_hochberg([r[4] for r in rows])
    return [_row(*r, float(qv), alpha) for r, qv in zip(rows, q, strict=True)]


def _row(
    name: str, xa: np.ndarray, xb: np.ndarray, s: Shift, p: float, q: float, alpha: float
) -> PhaseRow:
    return PhaseRow(
        phase=name, n_a=xa.size, n_b=xb.size, median_a=float(np.median(xa)),
        median_b=float(np.median(xb)), shift=s.estimate, low=s.low, high=s.high,
        p_value=p, q_value=q, flagged=bool(q <= alpha and (s.low > 0 or s.high < 0)),
    )  # fmt: skip


def share(
    a: Sequence[RunValues], b: Sequence[RunValues], part: str, whole: str, *,
    confidence: float = 0.95, resamples: int = 4000,
) -> Share | None:  # fmt: skip
    """part's change over whole's change, (med B_part - med A_part) / (med B_whole -
    med A_whole); None when a side has too few runs with both, or whole did not move."""
    pa = np.array([[r[part], r[whole]] for r in a if part in r and whole in r])
    pb = np.array([[r[part], r[whole]] for r in b if part in r and whole in r])
    if len(pa) < _MIN_RUNS or len(pb) < _MIN_RUNS:
        return None
    estimate = _ratio(pa, pb)
    if not math.isfinite(estimate):
        return None
    rng = np.random.default_rng(_seed(part + whole, pa.ravel(), pb.ravel()))
    ia = rng.integers(0, len(pa), size=(resamples, len(pa)))
    ib = rng.integers(0, len(pb), size=(resamples, len(pb)))
    da = np.median(pa[ia], axis=1)  # (resamples, 2): medians of part and whole
    db = np.median(pb[ib], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (db[:, 0] - da[:, 0]) / (db[:, 1] - da[:, 1])
    ratios = ratios[np.isfinite(ratios)]
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail]) if ratios.size else (math.nan, math.nan)
    return Share(part, whole, estimate, float(low), float(high), int(ratios.size))


def _ratio(pa: np.ndarray, pb: np.ndarray) -> float:
    da, db = np.median(pa, axis=0), np.median(pb, axis=0)
    change = db[1] - da[1]
    return float((db[0] - da[0]) / change) if change != 0 else math.nan


def _seed(name: str, xa: np.ndarray, xb: np.ndarray) -> int:
    """From the data and the phase's name (not hash(): salted per process): the same runs
    always give the same CI."""
    digest = hashlib.sha256(name.encode() + xa.tobytes() + xb.tobytes()).digest()
    return int.from_bytes(digest[:8], "little")
