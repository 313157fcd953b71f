"""What each primary statistic could have detected at the runs it had (STATS.md v3: "the
report says in one line, for each primary, what it could have detected at this N, in the
metric's own unit").

From the read model only (summary.py's VerdictRows, beside it; summary.py is at the house's
module size limit), like sentence.py. The figure is the engine's smallest detectable shift
(stats.sequential.smallest_detectable_shift: 80% power, the statistic's own family level at
the last look), stored with the row. A relative statistic's is a % of A's level; it is said
in the metric's unit too (ms, kB) through A's median, because a developer reads "0.4 ms"
against their patch faster than "7%". An absolute one (memory, the tail share in points) is
in its unit already.
"""

import math
from collections.abc import Sequence

from webapp.comparisons.summary import VerdictRow, num_text

UNIT_WORDS = {"pp": "points"}  # the tail share: percentage points of a run's grace periods


def two_digits(x: float) -> str:
    """Two significant digits (whole numbers from 100 up), never in exponent form: a power
    figure is not more exact than that."""
    if x == 0:
        return "0"
    return f"{x:,.{max(0, 1 - math.floor(math.log10(abs(x))))}f}"


def detectable_line(r: VerdictRow) -> str | None:
    """One primary row's line; None when the engine stored no figure (no spread: every run
    alike, or a row of an older analysis)."""
    v = r.verdict
    mde = v.details.get("smallest_detectable_shift")
    if not isinstance(mde, float | int) or isinstance(mde, bool) or mde != mde:
        return None
    what = f"{v.benchmark} {v.metric} ({v.statistic})"
    runs = f"{v.n_a} vs {v.n_b} runs"
    unit = UNIT_WORDS.get(r.unit, r.unit)
    if not r.relative:
        size = f"{two_digits(mde)} {unit}".rstrip()
    elif v.median_a is not None and v.median_a > 0 and r.unit:
        in_unit = two_digits(v.median_a * mde / 100)
        size = f"{in_unit} {unit} ({two_digits(mde)}% of A's {num_text(v.median_a)} {unit})"
    else:
        size = f"{two_digits(mde)}%"
    return f"{what}: at {runs} this comparison could detect a shift of {size} (80% power)."


def detectable_lines(rows: Sequence[VerdictRow]) -> list[str]:
    """A line per primary row that has a figure, in the rows' order."""
    lines = (detectable_line(r) for r in rows if r.verdict.is_primary)
    return [line for line in lines if line is not None]
