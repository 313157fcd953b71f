"""The A/B verdict engine: every metric's battery, multiplicity, sequential looks, verdicts.

Pure: dataclasses and arrays in, dataclasses out, no Django (services.py stores the
results). analyse() runs it all at a look: this module's battery on every metric, then
design.conclude. The spec is ../shared/STATS.md; in short, per metric and summary
statistic:
  - run-level statistics (one value per run: the value, or per-run p50/mean/p90 of a
    latency's samples; inputs.py): two-sided Brunner-Munzel with a studentized permutation
    p (the primary test; relabellings raised until the look's boundary is resolved),
    Mann-Whitney, Mood's median test and the sign test (k of n runs of B above A's median,
    exact binomial) alongside, Hodges-Lehmann shift (% from logs, or absolute for memory)
    with its 95% CI and the look's repeated CI (both from inverting Brunner-Munzel; the
    verdict rules use the repeated one), P(B>A) and Cliff's delta (methods.py);
  - tail statistics of latencies (pooled p99 and max): ratio B/A, p from permuting whole
    runs between sides, a cluster-bootstrap CI for p99 at the look where the comparison
    ends, at its level (none for the max; tails.py);
  - warnings: drift that differs between the sides, ties, multimodality of every
    run-level statistic (modality.py),
    shape (k-sample Anderson-Darling by permutation; diagnostics.py), too few samples for
    p99;
  - Holm across the benchmarks' primary metrics, each step at its own level's sequential
    boundary, a primary crossed at an earlier look staying crossed; Benjamini-Hochberg
    across the rest, on linear spending (design.adjust);
  - looks at min_runs, min_runs + step, ... max_runs per side against Lan-DeMets
    boundaries (power spending alpha t^3; design.Design, sequential.py); a primary metric
    left inconclusive at a look before the last (undecided, or a regression/improvement
    held back because host contention differs between the sides) asks for the runs up to
    the next look;
  - per benchmark, Boschloo's test of B's kernel failures against A's
    (verdicts.failure_result);
  - each statistic's verdict by the rules of verdicts.py.
No result holds NaN or inf (verdicts.check_reportable refuses one): a statistic the data do
not define is None, with the reason among the result's warnings.
"""

import math
import zlib
from collections.abc import Mapping, Sequence

import numpy as np

from stats import diagnostics, methods, sequential, tails
from stats.design import Design, Resolve, conclude
from stats.inputs import (
    BenchmarkFailures,
    MetricInput,
    contention,
    primary_statistics,
    run_level_statistics,
    side_values,
    statistic_input,
    tails_of,
)
from stats.modality import multimodality
from stats.verdicts import Analysis, Crossed, StatResult, TooFewRuns

P99_MIN_SAMPLES = 1000  # per side, so that >= 10 samples lie beyond the pooled p99


def analyse(
    metrics: Sequence[MetricInput], design: Design, failures: Sequence[BenchmarkFailures] = (),
    crossed_before: Mapping[tuple[str, str, str], Crossed] | None = None,
) -> Analysis:  # fmt: skip
    """Run the whole battery on every metric and decide the look's verdicts.
    `crossed_before`: the primaries that crossed at earlier looks (design.conclude)."""
    if not metrics:
        raise ValueError("no metrics to analyse")
    n = min(min(len(m.runs_a), len(m.runs_b)) for m in metrics)
    look = design.look_at(n)
    resolve = Resolve.of(metrics, design, look)
    results: list[StatResult] = []
    for m in metrics:
        results += metric_results(m, design, look, resolve)
    return conclude(results, design, n, failures, crossed_before)


def metric_results(
    m: MetricInput, design: Design, look: int, resolve: Resolve | None = None
) -> list[StatResult]:
    """Every statistic of one metric at a look (before adjustment and verdicts).
    `resolve`: as analyse computes it for all the metrics; alone, for this one."""
    if len(m.runs_a) < 2 or len(m.runs_b) < 2:
        raise TooFewRuns(f"{m.benchmark}/{m.name}: fewer than 2 runs on a side")
    resolve = resolve or Resolve.of([m], design, look)
    statistics = run_level_statistics(m)
    primaries = primary_statistics(m)
    out = [_run_level(m, s, s in primaries, design, look, resolve) for s in statistics]
    out += [_tail(m, s, q, design, look, resolve) for s, q in tails_of(m).items()]
    return out


def _rng(design: Design, *key: str) -> np.random.Generator:
    return np.random.default_rng([design.seed, zlib.crc32("/".join(key).encode())])


class ThresholdUnset(ValueError):
    """A metric judged on an absolute threshold (memory) declares none: refused, never 0."""


def _threshold(m: MetricInput, design: Design) -> tuple[float, bool]:
    """(threshold, relative): relative thresholds are %, absolute ones in the unit."""
    if m.threshold_is_absolute:
        if m.threshold is None:
            raise ThresholdUnset(f"{m.benchmark}/{m.name}: an absolute threshold (in "
                                 f"{m.unit}) must be declared; none is")  # fmt: skip
        return float(m.threshold), False
    return (m.threshold if m.threshold is not None else design.default_threshold_pct), True


def _run_level(
    m: MetricInput, statistic: str, primary: bool, design: Design, look: int,
    resolve: Resolve,
) -> StatResult:  # fmt: skip
    """A run-level statistic's battery, each side tested for several modes: every
    run-level statistic the report shows is (a p90 can split into modes where the p50
    does not; STATS.md v3)."""
    what = f"{m.benchmark}/{m.name}"
    a, b = side_values(m, statistic, what)
    m = statistic_input(m, statistic)  # its unit and threshold (a tail share's: points)
    rng = _rng(design, m.benchmark, m.name, statistic)
    threshold, relative = _threshold(m, design)
    warnings: list[str] = []
    threshold_undefined = False
    if relative and ((a <= 0).any() or (b <= 0).any()):
        # No % of a value <= 0: the shift is B - A, and the % threshold becomes that
        # share of A's median in the unit; with A's median 0 there is no threshold.
        relative, base = False, abs(float(np.median(a)))
        threshold_undefined = base == 0
        pct, threshold = threshold, threshold * base / 100
        what_thr = ("threshold is undefined (A's median is 0): size not judged"
                    if threshold_undefined else
                    f"threshold is {threshold:.6g} {m.unit} ({pct:g}% of A's median)")  # fmt: skip
        warnings.append(f"values <= 0: the shift is absolute (B - A), not %; the {pct:g}% "
                        + what_thr)  # fmt: skip
    resolve_p = resolve.primary if primary else resolve.secondary
    bm = methods.brunner_munzel(a, b, n_perm=design.n_perm, resolve=resolve_p, rng=rng)
    mood = methods.mood_median(a, b)
    sign = methods.sign_test(a, b)
    shift = methods.hodges_lehmann(a, b, relative=relative)
    p_shape = diagnostics.anderson_darling_p(a, b, n_perm=design.n_perm_shape, rng=rng)
    spread = _log_sd(a, b) if relative else _sd(a, b)
    details: dict[str, object] = {
        "test": "brunner-munzel",
        **_p_method(bm.method, bm.n_perm),
        "statistic_w": bm.statistic if math.isfinite(bm.statistic) else None,
        "sign_test": {
            "k": sign.above,
            "n": sign.n,
            "below": sign.below,
            "ties": sign.ties,
            "median_a": sign.median_a,
            "p": sign.p_value,
            "above_is": "worse" if m.lower_is_better else "better",
        },
        "p_anderson_darling": p_shape,
        "sd_within": spread,
        "smallest_detectable_shift": _mde(spread, len(a), len(b), design, primary),
        **contention(m.runs_a, m.runs_b),
    }
    if threshold_undefined:
        details["threshold_undefined"] = True
    if not math.isfinite(bm.statistic):  # JSON has no inf: W is None, and this says which
        details["statistic_w_undefined"] = (f"W is {bm.statistic:+}: no rank variance within "
                                            "either side (complete separation)")  # fmt: skip
    warnings += _warnings(m, a, b, bm.p_value, p_shape, design, details)
    warnings += _undefined_cross_checks(a, b, mood, sign)
    return StatResult(
        benchmark=m.benchmark, metric=m.name, unit=m.unit, statistic=statistic,
        is_primary=primary, look=look, n_a=len(a), n_b=len(b),
        median_a=float(np.median(a)), median_b=float(np.median(b)),
        shift=shift.estimate, ci_low=shift.low, ci_high=shift.high, relative=shift.relative,
        p_value=bm.p_value, p_mannwhitney=methods.mann_whitney_p(a, b),
        p_median=mood.p_value, prob_b_gt_a=methods.prob_b_greater(a, b),
        cliffs_delta=methods.cliffs_delta(a, b), threshold=threshold,
        lower_is_better=m.lower_is_better, warnings=warnings, details=details, values=(a, b),
    )  # fmt: skip


def _tail(
    m: MetricInput, statistic: str, q: float, design: Design, look: int, resolve: Resolve
) -> StatResult:
    """A pooled tail's battery. Its CI is asked for at the look where the comparison ends,
    at that look's level (tail_ci; design.conclude): a tail is a secondary held to the
    look's boundary, and does not end a comparison. The max has no CI at all
    (tails._max_test)."""
    what = f"{m.benchmark}/{m.name}"
    ra = [methods.as_values(r.samples, f"{what} side A run {r.order}") for r in m.runs_a]
    rb = [methods.as_values(r.samples, f"{what} side B run {r.order}") for r in m.runs_b]
    rng = _rng(design, m.benchmark, m.name, statistic)
    t = tails.tail_test(ra, rb, q=q, n_perm=design.n_perm, confidence=None,
                        resolve=resolve.secondary, rng=rng)  # fmt: skip

    def tail_ci(confidence: float) -> tuple[float, float] | str:
        # >= 10 draws beyond each end of the percentile CI
        n_boot = max(design.n_boot, math.ceil(20 / (1 - confidence)))
        ci_rng = _rng(design, m.benchmark, m.name, statistic, "ci")
        return tails.bootstrap_ci(ra, rb, q=q, n_boot=n_boot, confidence=confidence, rng=ci_rng)

    if q >= 1.0:
        ci_note = "none: no percentile-bootstrap CI of a maximum is valid"
    else:
        ci_note = "none at a look where the comparison goes on (given where it ends)"
    threshold, _ = _threshold(m, design)
    warnings = list(t.undefined)
    n_a, n_b = sum(r.size for r in ra), sum(r.size for r in rb)
    if q < 1 and min(n_a, n_b) < P99_MIN_SAMPLES:
        warnings.append(f"too few samples for p99: {min(n_a, n_b)} on a side, want "
                        f">= {P99_MIN_SAMPLES} (>= 10 beyond the quantile)")  # fmt: skip
    return StatResult(
        benchmark=m.benchmark, metric=m.name, unit=m.unit, statistic=statistic,
        is_primary=False, look=look, n_a=len(ra), n_b=len(rb),
        median_a=t.value_a, median_b=t.value_b, shift=_pct(t.ratio), ci_low=None,
        ci_high=None, relative=True, p_value=t.p_value, p_mannwhitney=None,
        p_median=None, prob_b_gt_a=None, cliffs_delta=None,
        threshold=threshold if not m.threshold_is_absolute else design.default_threshold_pct,
        lower_is_better=m.lower_is_better, warnings=warnings,
        details={"test": "whole-run permutation of pooled " + statistic,
                 **_p_method(methods.PERMUTATION, t.n_perm), "samples_a": n_a,
                 "samples_b": n_b, "ratio": t.ratio, "ci_level": ci_note,
                 **contention(m.runs_a, m.runs_b)},
        tail_ci=tail_ci if q < 1.0 else None,
    )  # fmt: skip


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else 100 * (ratio - 1)


def _p_method(method: str, n_perm: int | None) -> dict[str, object]:
    """How the p was obtained, for the report's marker: exact, or permutation with its
    count B (raised where a boundary needed it), whose resolution is 1/(B+1)."""
    return {"p_method": method,
            "p_permutations": None if method == methods.EXACT else n_perm}  # fmt: skip


def _undefined_cross_checks(
    a: np.ndarray, b: np.ndarray, mood: methods.MedianTest, sign: methods.SignTest
) -> list[str]:
    """Why Mood's test or the sign test has no p: one line for constant data, else each."""
    if mood.p_value is None and sign.p_value is None and np.ptp(np.r_[a, b]) == 0:
        return [f"constant data (every run {a[0]:.6g}): Mood's median test and the sign test "
                "are undefined"]  # fmt: skip
    return [t.reason for t in (mood, sign) if t.p_value is None]


def _log_sd(a: np.ndarray, b: np.ndarray) -> float:
    return _sd(np.log(a), np.log(b)) * 100  # ~ CV in %


def _sd(a: np.ndarray, b: np.ndarray) -> float:
    """Pooled within-side standard deviation."""
    ss = ((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()
    return float(math.sqrt(ss / max(a.size + b.size - 2, 1)))


def _mde(sd: float, n_a: int, n_b: int, design: Design, primary: bool) -> float:
    """Smallest shift found 80% of the time at this N, at the final look's boundary of
    the statistic's own family: a lone primary's, or the secondaries' (STATS.md v3)."""
    last = len(design.looks)
    alpha = design.alpha_at(last) if primary else design.secondary_boundary(last)
    return sequential.smallest_detectable_shift(sd, n_a, n_b, alpha=alpha)


def _warnings(
    m: MetricInput, a: np.ndarray, b: np.ndarray, p: float, p_shape: float, design: Design,
    details: dict[str, object],
) -> list[str]:  # fmt: skip
    out = []
    if len(a) >= 4 and len(b) >= 4:
        # A drift common to both sides is what ABBA balances; only a difference matters.
        d = diagnostics.drift_difference(
            [r.order for r in m.runs_a], a, [r.order for r in m.runs_b], b
        )
        details.update(p_drift=d.p_value, drift_rho_a=d.rho_a, drift_rho_b=d.rho_b)
        if d.p_value < 0.01:
            out.append(f"drift: the sides trend differently with run order (Spearman rho A "
                       f"{d.rho_a:+.2f}, B {d.rho_b:+.2f}; p {d.p_value:.2g})")  # fmt: skip
    for side, values in (("A", a), ("B", b)):
        t = multimodality(values)
        details[f"modality_{side.lower()}"] = {"multimodal": t.multimodal,
                                               "statistic": t.statistic, "p": t.p_value,
                                               "method": t.method}  # fmt: skip
        if t.multimodal:
            out.append(f"multimodal? side {side}: {t.detail}")
    tied = diagnostics.tied_fraction(np.r_[a, b])
    details["tied_fraction"] = tied
    if tied > 0.25:
        out.append(f"ties: {tied:.0%} of run values are tied (midranks used)")
    if p_shape < 0.01 and p > design.alpha:
        out.append(f"shape: distributions differ (Anderson-Darling p {p_shape:.2g}) "
                   "though the location test does not")  # fmt: skip
    return out
