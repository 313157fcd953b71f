"""The verdicts: their names and order, and the rules that give each statistic its own.

Pure: dataclasses in, dataclasses out, no Django (services.py stores the results). The spec
is ../shared/STATS.md; battery.py runs the whole engine (analyse) and summarises it. Here:
  - the verdicts and their severity (reliability-regression, regression,
    significant-size-not-estimated, inconclusive, significant-but-small, improvement,
    no-meaningful-change): the report's order, and the
    comparison's verdict, the worst among its primary statistics (Analysis): a kernel that
    fails more often is the worst news, whatever its working runs measure;
  - StatResult, one statistic of one metric at a look, and its verdict once its boundary is
    set (decide, after design.adjust): run-level statistics on their repeated CI (level 1 -
    the result's boundary, at every look): regression/improvement when the boundary is
    crossed and the CI reaches the threshold in the direction of the change;
    significant-but-small when it is crossed and the whole CI lies inside (0, threshold) in
    that direction; no-meaningful-change when the CI lies inside +-threshold; else
    inconclusive (pending before the last look). Before the last look a regression or
    improvement whose estimate is below the threshold waits (hold_small). Tails follow the
    same rules on their CI (the p99's, at the look where the comparison ends); without one
    (the max, or a look where it goes on) a crossing is significant-size-not-estimated.
    A primary decided at an earlier look keeps its verdict (Crossed, keep);
  - host contention: a regression or improvement is held back (inconclusive, pending
    before the last look, so that quieter runs can come in) when the sides' shares of
    contended runs differ by more than the design's imbalance (contention_differs);
  - per benchmark, Boschloo's test of B's kernel failures against A's (failure_result),
    one-sided, at its own level per look: a significant excess is a reliability regression.
No result holds NaN or inf (check_reportable refuses one): a statistic the data do not
define is None, with the reason among the result's warnings.
"""

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from stats import methods
from stats.inputs import BenchmarkFailures

REGRESSION = "regression"
IMPROVEMENT = "improvement"
SMALL = "significant-but-small"
# A tail crossed its boundary but has no CI (the max never does; the p99 has one only at
# the look where the comparison ends): the change is real, its size unknown (STATS.md v3).
SIGNIFICANT = "significant-size-not-estimated"
NO_CHANGE = "no-meaningful-change"
INCONCLUSIVE = "inconclusive"
RELIABILITY = "reliability-regression"  # B's kernel fails more often than A's (Fisher)
# Report order and the comparison's verdict: a kernel that fails more often is the worst
# news, whatever its working runs measure.
SEVERITY = (RELIABILITY, REGRESSION, SIGNIFICANT, INCONCLUSIVE, SMALL, IMPROVEMENT, NO_CHANGE)
# What a crossed primary reported and keeps at later looks (verdicts are final, STATS.md v3).
DECIDED = (REGRESSION, IMPROVEMENT, SMALL)
FAILURE_METRIC = "failure_rate"  # the reliability row's metric and statistic
FAILURE_STATISTIC = "boschloo"


class TooFewRuns(ValueError):
    """Fewer runs per side than the design's minimum: no verdict is given."""


class UnreportableResult(ValueError):
    """A result holds NaN or inf, or a p below what its method can resolve: a bug in the
    engine, refused before it reaches storage or a page."""


@dataclass
class StatResult:
    benchmark: str
    metric: str
    unit: str
    statistic: str  # value, p50, mean, p90 (run level) or p99, max (tails)
    is_primary: bool
    look: int
    n_a: int
    n_b: int
    median_a: float  # of the run-level values (tails: the pooled quantile of each side)
    median_b: float
    # % when relative, else B - A in the unit. None: undefined (a tail ratio to a pooled
    # quantile of 0), the reason among the warnings; likewise the CI's ends.
    shift: float | None
    ci_low: float | None
    ci_high: float | None
    relative: bool
    p_value: float  # the primary test's; details["p_method"] says how it was obtained
    p_mannwhitney: float | None
    p_median: float | None  # Mood's; None when the test does not exist for the data
    prob_b_gt_a: float | None
    cliffs_delta: float | None
    threshold: float
    lower_is_better: bool
    warnings: list[str] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)
    p_adjusted: float = math.nan
    adjustment: str = ""
    verdict: str = INCONCLUSIVE
    pending: bool = False  # undecided at a look before the last
    crossed: bool = False  # the look's boundary (after Holm or BH) is crossed
    # The run-level values (A, B) and whether the shift is relative: the repeated CI is
    # computed once the result's boundary is known (Holm's level depends on the others).
    # Not stored.
    values: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # A tail's CI at a confidence: (low, high) in %, or why there is none. Asked for at the
    # look where the comparison ends, at that look's level (STATS.md v3). Not stored.
    tail_ci: Callable[[float], tuple[float, float] | str] | None = field(default=None, repr=False)

    @property
    def gated_family(self) -> str:
        return "holm" if self.is_primary else "bh"


@dataclass(frozen=True)
class Analysis:
    results: list[StatResult]
    look: int
    n_per_side: int
    need_more_runs: int  # per side, before the next look; 0 when done
    bounds: tuple[float, ...]

    @property
    def verdict(self) -> str:
        """The worst verdict among primary statistics. A failure-rate row counts only as
        a reliability regression: no excess of failures says nothing about the metrics."""
        primaries = [r.verdict for r in self.results if r.is_primary and
                     (r.statistic != FAILURE_STATISTIC or r.verdict == RELIABILITY)]  # fmt: skip
        # No primary metric: nothing was decided, which is not "no meaningful change".
        return min(primaries or [INCONCLUSIVE], key=SEVERITY.index)


@dataclass(frozen=True)
class Crossed:
    """A primary statistic that crossed its boundary at an earlier look: what it reported
    then. It stays crossed at later looks (Maurer and Bretz: its Holm level is released to
    the others), and a decided verdict (DECIDED) is kept (STATS.md v3 "verdicts are
    final"); services.py reads these from the stored rows before replacing them."""

    verdict: str
    look: int


def result_key(r: StatResult) -> tuple[str, str, str]:
    """What identifies a statistic across looks (the stored row's key)."""
    return r.benchmark, r.metric, r.statistic


def decide(
    r: StatResult, final: bool, imbalance: float | None = None, *, wait_if_small: bool = False
) -> None:
    """The verdict of one statistic at a look, once adjust() has set its boundary.

    Run-level statistics follow STATS.md v2 on their repeated CI (level 1 - the result's
    boundary, at every look, the last included): regression/improvement when the boundary
    is crossed and the CI reaches the threshold in the direction of the change;
    significant-but-small when it is crossed and the whole CI lies inside (0, threshold)
    in that direction; no-meaningful-change when the CI lies inside +-threshold; else
    inconclusive. Tails follow the same rules on their CI where they have one (the p99 at
    the look where the comparison ends); without one a crossing is "significant, size not
    estimated" (_decide_tail). `wait_if_small` (a look before the last): a regression or
    improvement whose estimate is below the threshold waits for the next look (hold_small,
    STATS.md v3). A regression or improvement is then held back when host contention
    differs between the sides by more than `imbalance` (_contention_hold)."""
    boundary = float(r.details["boundary"])  # type: ignore[arg-type]
    r.details["alpha_look"] = boundary
    r.pending = False
    if r.values is not None:
        # Only the repeated CI (level 1 - boundary) may end a comparison early as "no
        # meaningful change": an unadjusted 95% CI looked at four times claims
        # equivalence too often.
        ci = methods.hodges_lehmann(*r.values, relative=r.relative, confidence=1 - boundary)
        r.details["repeated_ci"] = [ci.low, ci.high]
    repeated = r.details.get("repeated_ci")
    if isinstance(repeated, list):
        _decide_on_ci(r, float(repeated[0]), float(repeated[1]))
    else:
        _decide_tail(r)
    if wait_if_small:
        hold_small(r)
    if r.verdict in (REGRESSION, IMPROVEMENT):
        _contention_hold(r, imbalance)
    if r.verdict == INCONCLUSIVE:
        r.pending = r.pending or not final
        mde = r.details.get("smallest_detectable_shift")
        if isinstance(mde, float) and not r.details.get("waits_below_threshold"):
            unit = "%" if r.relative else f" {r.unit}"
            r.warnings.append(f"inconclusive at {r.n_a}+{r.n_b} runs: smallest detectable "
                              f"shift {mde:.2f}{unit} (80% power)")  # fmt: skip


def hold_small(r: StatResult) -> None:
    """Before the last look, a regression/improvement whose estimate is below the threshold
    (the wide CI of an early look reaches it) waits for the next look: inconclusive and
    pending, the held verdict in details. A true shift of half the threshold otherwise ends
    as a regression alert in ~39% of comparisons (STATS.md v3)."""
    if r.verdict not in (REGRESSION, IMPROVEMENT) or r.shift is None:
        return
    if r.details.get("threshold_undefined") or abs(r.shift) >= r.threshold:
        return
    r.details.update(held_back=r.verdict, waits_below_threshold=True)
    r.warnings = [w for w in r.warnings if not w.startswith("size uncertain")]
    unit = "%" if r.relative else f" {r.unit}"
    r.warnings.append(f"crossed, but the estimate ({r.shift:+.2f}{unit}) is below the "
                      f"threshold ({r.threshold:g}{unit}): the {r.verdict} waits for the next "
                      "look's runs")  # fmt: skip
    r.verdict = INCONCLUSIVE
    r.pending = True


def keep(r: StatResult, before: Crossed) -> None:
    """A primary decided at an earlier look keeps its verdict (STATS.md v3): more runs for
    the other benchmarks do not re-decide it."""
    r.crossed, r.verdict, r.pending = True, before.verdict, False
    r.details.update(decided_at_look=before.look, alpha_look=r.details.get("boundary"))
    r.warnings.append(f"{before.verdict} decided at look {before.look}; verdicts are final")


def _direction(up: bool, r: StatResult) -> str:
    """Regression or improvement for a change upwards (B above A) or downwards."""
    return REGRESSION if up == r.lower_is_better else IMPROVEMENT


def _decide_on_ci(r: StatResult, low: float, high: float) -> None:
    """The v2 rules of a run-level statistic on its repeated CI (low, high)."""
    thr, shift = r.threshold, r.shift if r.shift is not None else 0.0
    r.verdict = INCONCLUSIVE
    up, down = shift > 0, shift < 0  # a zero estimate has no direction
    if r.details.get("threshold_undefined"):
        # No threshold (values <= 0 around a median of 0): a crossing is a change of
        # unjudged size; nothing can be "no meaningful change".
        if r.crossed and (up or down):
            r.verdict = _direction(up, r)
            r.warnings.append("size not judged: no threshold applies (A's median is 0)")
        elif low == high == 0:  # every pairwise difference is 0: no shift at all
            r.verdict = NO_CHANGE
        return
    if r.crossed:
        # The direction of the change is the estimate's; the CI's end on that side
        # decides whether the change can be as large as the threshold.
        if (up and high >= thr) or (down and low <= -thr):
            r.verdict = _direction(up, r)
            if abs(shift) < thr:
                r.warnings.append("size uncertain: the estimate is below the threshold; "
                                  "the interval reaches it")  # fmt: skip
            return
        if (up and low > 0 and high < thr) or (down and low > -thr and high < 0):
            r.verdict = SMALL
            return
    if -thr < low and high < thr:
        r.verdict = NO_CHANGE


def _decide_tail(r: StatResult) -> None:
    """A tail's verdict: on its CI where it has one (the p99 at the look where the
    comparison ends: the run-level rules); without one a crossing says the change is
    significant, its size not estimated, never its size from the point estimate."""
    if r.ci_low is not None and r.ci_high is not None:
        _decide_on_ci(r, r.ci_low, r.ci_high)
        return
    r.verdict = INCONCLUSIVE
    if not r.crossed:
        return
    change = r.median_b - r.median_a
    if r.shift is None and change != 0:
        # No ratio to A (A's pooled quantile 0): the change is unbounded in %, beyond any
        # threshold, in the direction of the two values.
        r.verdict = _direction(change > 0, r)
    else:
        r.verdict = SIGNIFICANT


def contention_differs(a: tuple[int, int], b: tuple[int, int], imbalance: float) -> bool:
    """Whether the sides' shares of contended runs, each (contended, measured), differ by
    more than `imbalance`; a side with no measured run says nothing."""
    (ka, na), (kb, nb) = a, b
    return bool(na and nb) and abs(ka / na - kb / nb) > imbalance


def _contention_hold(r: StatResult, imbalance: float | None) -> None:
    """Hold back a regression/improvement (inconclusive, pending before the last look so
    that quieter runs can come in) when the sides' shares of contended runs differ by more
    than `imbalance`: the host, not the kernel, may explain the shift."""
    counts = r.details.get("contended")
    if imbalance is None or not isinstance(counts, dict):
        return
    (ka, na), (kb, nb) = counts["a"], counts["b"]
    if not contention_differs((ka, na), (kb, nb), imbalance):
        return
    share_a, share_b = ka / na, kb / nb
    r.details["held_back"] = r.verdict
    r.verdict = INCONCLUSIVE
    r.warnings.append(f"host contention differs between the sides: {share_a:.0%} of A's runs "
                      f"({ka} of {na}) and {share_b:.0%} of B's ({kb} of {nb}) were contended, "
                      f"more than {imbalance:.0%} apart: the {r.details['held_back']} is held "
                      "back until more quiet runs are in")  # fmt: skip


def failure_result(f: BenchmarkFailures, look: int, looks: int = 1) -> StatResult:
    """The failure-rate row of one benchmark: Boschloo's exact test, one-sided for an
    excess of kernel failures in B, held to its own level at this look of `looks`
    (methods.reliability_level: 0.01 over the whole comparison; not Holm with the metrics,
    not their boundaries). A significant excess is a reliability regression; otherwise
    the row carries the counts and the verdict no-meaningful-change, which the
    comparison's verdict ignores."""
    t = methods.failure_excess(f.a, f.b)
    level = methods.reliability_level(look, looks)
    significant = t.p_value <= level
    warnings = []
    if significant:
        warnings.append(f"B's kernel failed {f.b.kernel_failures} of {f.b.attempts} boots, "
                        f"A's {f.a.kernel_failures} of {f.a.attempts} (Boschloo one-sided "
                        f"p {t.p_value:.2g} <= {level:.3g} at look {look})")  # fmt: skip
    elif t.rate_a is not None and t.rate_b is not None and t.rate_a > t.rate_b:
        warnings.append(f"A's kernel failed more often than B's ({f.a.kernel_failures} of "
                        f"{f.a.attempts} vs {f.b.kernel_failures} of {f.b.attempts}); "
                        "the test is one-sided and alerts on B only")  # fmt: skip

    def side(c: methods.FailureCounts) -> dict[str, object]:
        return {"attempts": c.attempts, "ok": c.ok, "kernel_failures": c.kernel_failures,
                "host_failures": c.host_failures, "by_outcome": dict(c.failures)}  # fmt: skip

    rate_a, rate_b = t.rate_a or 0.0, t.rate_b or 0.0
    r = StatResult(
        benchmark=f.benchmark, metric=FAILURE_METRIC, unit="%", statistic=FAILURE_STATISTIC,
        is_primary=True, look=look, n_a=f.a.attempts, n_b=f.b.attempts,
        median_a=100 * rate_a, median_b=100 * rate_b, shift=100 * (rate_b - rate_a),
        ci_low=None, ci_high=None, relative=False, p_value=t.p_value, p_mannwhitney=None,
        p_median=None, prob_b_gt_a=None, cliffs_delta=None, threshold=0.0,
        lower_is_better=True, warnings=warnings,
        details={"test": "boschloo-exact, one-sided (B fails more often)",
                 "p_method": methods.EXACT, "p_permutations": None, "alpha": level,
                 "alpha_comparison": methods.RELIABILITY_ALPHA,
                 "a": side(f.a), "b": side(f.b), "p_fisher": t.p_fisher,
                 "rate_a": t.rate_a, "rate_b": t.rate_b},
        p_adjusted=t.p_value, adjustment="none",
        verdict=RELIABILITY if significant else NO_CHANGE,
    )  # fmt: skip
    check_reportable(r)
    return r


def non_finite(value: object, path: str = "") -> list[str]:
    """Where `value` (a number, or dicts, lists and dataclasses of them) holds NaN or inf."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        named = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return [p for k, v in named.items() for p in non_finite(v, f"{path}.{k}".lstrip("."))]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite(v, f"{path}[{k!r}]")]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in non_finite(v, f"{path}[{i}]")]
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        return [f"{path} = {value}"]
    return []


def check_reportable(r: StatResult) -> None:
    """Refuse a result with NaN or inf anywhere, or whose p is below 1/(B+1) without being
    exact or marked approximate (STATS.md v2): neither may reach storage or a page."""
    where = f"{r.benchmark}/{r.metric}[{r.statistic}]"
    bad = non_finite(r)
    if bad:
        raise UnreportableResult(f"{where}: not a finite number: {', '.join(bad)}")
    method, b = r.details.get("p_method"), r.details.get("p_permutations")
    if method == methods.PERMUTATION and isinstance(b, int) and r.p_value < 1 / (b + 1) - 1e-15:
        raise UnreportableResult(f"{where}: permutation p {r.p_value:.3g} is below 1/({b} + 1)")
    if method not in (methods.EXACT, methods.PERMUTATION, methods.T_APPROXIMATION):
        raise UnreportableResult(f"{where}: p_method {method!r} does not say how p was obtained")
