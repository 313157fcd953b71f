"""The A/B verdict engine: every metric's battery, multiplicity, sequential looks, verdicts.

Pure: dataclasses and arrays in, dataclasses out, no Django (services.py stores the
results). The spec is ../shared/STATS.md; in short, per metric and summary statistic:
  - run-level statistics (one value per run: the value, or per-run p50/mean/p90 of a
    latency's samples): two-sided Brunner-Munzel with a studentized permutation p (the
    primary test; relabellings raised until the look's boundary is resolved), Mann-Whitney,
    Mood's median test and the sign test (k of n runs of B above A's median, exact
    binomial) alongside, Hodges-Lehmann shift (% from logs, or absolute for memory) with
    its 95% CI and the look's repeated CI (both from inverting Brunner-Munzel; the verdict
    rules use the repeated one), P(B>A) and Cliff's delta;
  - tail statistics of latencies (pooled p99 and max): ratio B/A, p from permuting whole
    runs between sides, a cluster-bootstrap CI for p99 at the last look (none for the max);
  - warnings: drift that differs between the sides, ties, multimodality (modality.py),
    shape (k-sample Anderson-Darling by permutation), too few samples for p99;
  - Holm across the benchmarks' primary metrics, each step at its own level's sequential
    boundary; Benjamini-Hochberg across the rest;
  - looks at min_runs, min_runs + step, ... max_runs per side against Lan-DeMets
    boundaries (power spending alpha t^3); a primary metric left inconclusive at a look
    before the last (undecided, or a regression/improvement held back because host
    contention differs between the sides) asks for the runs up to the next look;
  - per benchmark, Boschloo's test of B's kernel failures against A's (failure_result).
No result holds NaN or inf (check_reportable refuses one): a statistic the data do not
define is None, with the reason among the result's warnings.
"""

import dataclasses
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from stats import defaults, methods
from stats.defaults import MIN_RUNS
from stats.modality import multimodality

REGRESSION = "regression"
IMPROVEMENT = "improvement"
SMALL = "significant-but-small"
NO_CHANGE = "no-meaningful-change"
INCONCLUSIVE = "inconclusive"
RELIABILITY = "reliability-regression"  # B's kernel fails more often than A's (Fisher)
# Report order and the comparison's verdict: a kernel that fails more often is the worst
# news, whatever its working runs measure.
SEVERITY = (RELIABILITY, REGRESSION, INCONCLUSIVE, SMALL, IMPROVEMENT, NO_CHANGE)
FAILURE_METRIC = "failure_rate"  # the reliability row's metric and statistic
FAILURE_STATISTIC = "boschloo"

RUN_LEVEL = ("p50", "mean", "p90")
TAILS = {"p99": 0.99, "max": 1.0}
P99_MIN_SAMPLES = 1000  # per side, so that >= 10 samples lie beyond the pooled p99


class TooFewRuns(ValueError):
    """Fewer runs per side than the design's minimum: no verdict is given."""


class UnreportableResult(ValueError):
    """A result holds NaN or inf, or a p below what its method can resolve: a bug in the
    engine, refused before it reaches storage or a page."""


@dataclass(frozen=True)
class RunSamples:
    order: int  # position in the comparison's run schedule (drift is checked against it)
    samples: tuple[float, ...]
    contended: bool | None = None  # the host was busy during the run; None: not measured


@dataclass(frozen=True)
class MetricInput:
    benchmark: str
    name: str
    unit: str
    per_run_samples: bool  # a latency (many samples per run) rather than one value per run
    lower_is_better: bool
    primary: bool
    runs_a: Sequence[RunSamples]
    runs_b: Sequence[RunSamples]
    threshold: float | None = None  # practical threshold; None: the design's default %
    threshold_is_absolute: bool = False  # in the metric's unit (memory), not %


@dataclass(frozen=True)
class Design:
    alpha: float = defaults.ALPHA
    min_runs: int = MIN_RUNS
    max_runs: int = defaults.MAX_RUNS
    step: int = MIN_RUNS  # a look every MIN_RUNS runs per side
    default_threshold_pct: float = defaults.THRESHOLD_PCT
    n_perm: int = 9999
    n_boot: int = 2000
    n_perm_shape: int = 999
    seed: int = 0
    # Contended runs' shares of the two sides further apart than this hold back a
    # regression/improvement verdict (STATS.md v2 "Host contention"); services pass
    # settings.RCUBENCH_CONTENTION_IMBALANCE.
    contention_imbalance: float = defaults.CONTENTION_IMBALANCE
    # Tests of the orchestrator may run fewer than 24 runs per side; nothing else may.
    allow_few_runs: bool = False
    # The share of alpha spent on the secondary statistics (BH); the primary ones (Holm)
    # get the rest. Each family controls its own error, so a comparison's chance of any
    # false regression or improvement verdict, over every metric and look, is at most
    # alpha (Bonferroni across the two families; STATS.md v2's 20-metric target).
    secondary_share: float = defaults.SECONDARY_SHARE

    def __post_init__(self) -> None:
        if self.min_runs < MIN_RUNS and not self.allow_few_runs:
            raise TooFewRuns(f"min_runs {self.min_runs} is below the floor of {MIN_RUNS} runs")
        if not 2 <= self.min_runs <= self.max_runs or self.step < 1:
            raise ValueError(f"bad design: runs {self.min_runs}..{self.max_runs} by {self.step}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha {self.alpha} is not in (0, 1)")
        if not 0 < self.secondary_share < 1:
            raise ValueError(f"secondary_share {self.secondary_share} is not in (0, 1)")

    @property
    def primary_alpha(self) -> float:
        """What the primary statistics (Holm) may spend over all looks."""
        return self.alpha * (1 - self.secondary_share)

    @property
    def secondary_alpha(self) -> float:
        """What the secondary statistics (BH) may spend over all looks."""
        return self.alpha * self.secondary_share

    @property
    def looks(self) -> tuple[int, ...]:
        looks = list(range(self.min_runs, self.max_runs + 1, self.step))
        if looks[-1] != self.max_runs:
            looks.append(self.max_runs)
        return tuple(looks)

    @cached_property
    def bounds(self) -> tuple[float, ...]:
        """|z| boundary per look of a lone primary statistic (level primary_alpha)."""
        return self.bounds_at(self.primary_alpha)

    def bounds_at(self, level: float) -> tuple[float, ...]:
        """|z| boundary per look for a test held to `level` overall (Holm's local levels)."""
        return methods.sequential_bounds(tuple(n / self.max_runs for n in self.looks), level)

    def look_at(self, n: int) -> int:
        """1-based index of the last look reached with n runs per side."""
        if n < self.min_runs:
            raise TooFewRuns(f"{n} runs per side; at least {self.min_runs} are needed")
        return sum(1 for look in self.looks if look <= n)

    def alpha_at(self, look: int, level: float | None = None) -> float:
        """The nominal p boundary at a look: a lone primary statistic's, or at `level`."""
        bounds = self.bounds if level is None else self.bounds_at(level)
        return methods.z_to_p(bounds[look - 1])


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
class BenchmarkFailures:
    """A benchmark's finished runs per side by outcome: the failure-rate test's input."""

    benchmark: str
    a: methods.FailureCounts
    b: methods.FailureCounts


def analyse(
    metrics: Sequence[MetricInput], design: Design, failures: Sequence[BenchmarkFailures] = ()
) -> Analysis:
    """Run the whole battery on every metric and decide the look's verdicts."""
    if not metrics:
        raise ValueError("no metrics to analyse")
    n = min(min(len(m.runs_a), len(m.runs_b)) for m in metrics)
    look = design.look_at(n)
    resolve = Resolve.of(metrics, design, look)
    results: list[StatResult] = []
    for m in metrics:
        results += metric_results(m, design, look, resolve)
    return conclude(results, design, n, failures)


@dataclass(frozen=True)
class Resolve:
    """The smallest boundary p each family's results may be held to at a look: the
    permutation counts are raised until these are resolved (STATS.md v2)."""

    primary: float  # Holm's first step: the boundary at level alpha / (primary metrics)
    secondary: float  # BH's first step: the look's boundary / (secondary statistics)

    @classmethod
    def of(cls, metrics: Sequence["MetricInput"], design: Design, look: int) -> "Resolve":
        primaries = max(sum(m.primary for m in metrics), 1)
        per_metric = [len(run_level_statistics(m)) + len(tails_of(m)) for m in metrics]
        secondaries = max(sum(per_metric) - primaries, 1)
        return cls(design.alpha_at(look, design.primary_alpha / primaries),
                   design.alpha_at(look, design.secondary_alpha) / secondaries)  # fmt: skip


def conclude(
    results: list[StatResult], design: Design, n: int, failures: Sequence[BenchmarkFailures] = ()
) -> Analysis:
    """Adjust the p-values of one look's results, decide each verdict, test each
    benchmark's failure rate, and say whether the comparison needs more runs."""
    look = design.look_at(n)
    adjust(results, design, look)
    final = look == len(design.looks)
    for r in results:
        decide(r, final, design.contention_imbalance)
        check_reportable(r)
    pending = any(r.pending for r in results if r.is_primary)
    reliability = [failure_result(f, look, len(design.looks)) for f in failures]
    results = results + reliability
    # B found unreliable: that is the answer, whatever more runs would measure.
    pending = pending and not any(r.verdict == RELIABILITY for r in reliability)
    need = design.looks[look] - n if pending and not final else 0
    results.sort(key=lambda r: (SEVERITY.index(r.verdict), not r.is_primary, r.benchmark,
                                r.metric, r.statistic))  # fmt: skip
    return Analysis(results, look, n, max(need, 0), design.bounds)


def run_values(runs: Sequence[RunSamples], statistic: str, what: str) -> np.ndarray:
    """One value per run: the value itself, or a summary of the run's samples."""
    out = np.empty(len(runs))
    for i, run in enumerate(runs):
        x = methods.as_values(run.samples, f"{what} run {run.order}")
        if statistic == "value":
            if x.size != 1:
                raise methods.StatsInputError(
                    f"{what} run {run.order}: {x.size} values, expected 1"
                )
            out[i] = x[0]
        elif statistic == "p50":
            out[i] = np.median(x)
        elif statistic == "mean":
            out[i] = x.mean()
        elif statistic == "p90":
            out[i] = np.quantile(x, 0.9)
        else:
            raise ValueError(f"unknown run-level statistic {statistic!r}")
    return out


def metric_results(
    m: MetricInput, design: Design, look: int, resolve: Resolve | None = None
) -> list[StatResult]:
    """Every statistic of one metric at a look (before adjustment and verdicts).
    `resolve`: as analyse computes it for all the metrics; alone, for this one."""
    if len(m.runs_a) < 2 or len(m.runs_b) < 2:
        raise TooFewRuns(f"{m.benchmark}/{m.name}: fewer than 2 runs on a side")
    resolve = resolve or Resolve.of([m], design, look)
    statistics = run_level_statistics(m)
    out = [_run_level(m, s, s == statistics[0] and m.primary, design, look, resolve,
                      modality=s == statistics[0]) for s in statistics]  # fmt: skip
    out += [_tail(m, s, q, design, look, resolve) for s, q in tails_of(m).items()]
    return out


def run_level_statistics(m: MetricInput) -> tuple[str, ...]:
    """A metric's run-level statistics: the value, or summaries of a latency's samples."""
    return RUN_LEVEL if m.per_run_samples else ("value",)


def tails_of(m: MetricInput) -> dict[str, float]:
    """A metric's pooled tail statistics (latencies only), by name: their quantile."""
    return TAILS if m.per_run_samples else {}


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
    resolve: Resolve, *, modality: bool = False,
) -> StatResult:  # fmt: skip
    """A run-level statistic's battery; `modality`: test each side for several modes (on
    one statistic per metric: one warning, not three, for one metric's runs)."""
    what = f"{m.benchmark}/{m.name}"
    a = run_values(m.runs_a, statistic, f"{what} side A")
    b = run_values(m.runs_b, statistic, f"{what} side B")
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
    p_shape = methods.anderson_darling_p(a, b, n_perm=design.n_perm_shape, rng=rng)
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
        "smallest_detectable_shift": _mde(spread, len(a), len(b), design),
        **contention(m.runs_a, m.runs_b),
    }
    if threshold_undefined:
        details["threshold_undefined"] = True
    if not math.isfinite(bm.statistic):  # JSON has no inf: W is None, and this says which
        details["statistic_w_undefined"] = (f"W is {bm.statistic:+}: no rank variance within "
                                            "either side (complete separation)")  # fmt: skip
    warnings += _warnings(m, a, b, bm.p_value, p_shape, design, details, modality)
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
    """A pooled tail's battery. Its CI is at the look's level (a tail is a secondary held
    to the look's boundary), at the last look only: at an interim look's level (99.98% at
    the first) the percentile bootstrap would need tens of thousands of draws, and a tail
    does not end a comparison early. The max has no CI at all (methods._max_test)."""
    what = f"{m.benchmark}/{m.name}"
    ra = [methods.as_values(r.samples, f"{what} side A run {r.order}") for r in m.runs_a]
    rb = [methods.as_values(r.samples, f"{what} side B run {r.order}") for r in m.runs_b]
    rng = _rng(design, m.benchmark, m.name, statistic)
    final = look == len(design.looks)
    level = 1 - design.alpha_at(look, design.secondary_alpha) if final else None
    # >= 10 draws beyond each end of the percentile CI
    n_boot = max(design.n_boot, math.ceil(20 / (1 - level))) if level else design.n_boot
    t = methods.tail_test(ra, rb, q=q, n_perm=design.n_perm, n_boot=n_boot,
                        confidence=level, resolve=resolve.secondary, rng=rng)  # fmt: skip
    if q >= 1.0:
        ci_note = "none: no percentile-bootstrap CI of a maximum is valid"
    elif level is None:
        ci_note = "none at an interim look (given at the last look, at its level)"
    else:
        ci_note = f"{level:.1%} (the last look's level), cluster bootstrap"
    threshold, _ = _threshold(m, design)
    warnings = list(t.undefined)
    n_a, n_b = sum(r.size for r in ra), sum(r.size for r in rb)
    if q < 1 and min(n_a, n_b) < P99_MIN_SAMPLES:
        warnings.append(f"too few samples for p99: {min(n_a, n_b)} on a side, want "
                        f">= {P99_MIN_SAMPLES} (>= 10 beyond the quantile)")  # fmt: skip
    return StatResult(
        benchmark=m.benchmark, metric=m.name, unit=m.unit, statistic=statistic,
        is_primary=False, look=look, n_a=len(ra), n_b=len(rb),
        median_a=t.value_a, median_b=t.value_b, shift=_pct(t.ratio), ci_low=_pct(t.ci_low),
        ci_high=_pct(t.ci_high), relative=True, p_value=t.p_value, p_mannwhitney=None,
        p_median=None, prob_b_gt_a=None, cliffs_delta=None,
        threshold=threshold if not m.threshold_is_absolute else design.default_threshold_pct,
        lower_is_better=m.lower_is_better, warnings=warnings,
        details={"test": "whole-run permutation of pooled " + statistic,
                 **_p_method(methods.PERMUTATION, t.n_perm), "samples_a": n_a,
                 "samples_b": n_b, "ratio": t.ratio, "ci_level": ci_note,
                 **contention(m.runs_a, m.runs_b)},
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


def _mde(sd: float, n_a: int, n_b: int, design: Design) -> float:
    """Smallest shift found 80% of the time at this N, at the final look's boundary."""
    return methods.smallest_detectable_shift(sd, n_a, n_b, alpha=methods.z_to_p(design.bounds[-1]))


def _warnings(
    m: MetricInput, a: np.ndarray, b: np.ndarray, p: float, p_shape: float, design: Design,
    details: dict[str, object], modality: bool,
) -> list[str]:  # fmt: skip
    out = []
    if len(a) >= 4 and len(b) >= 4:
        # A drift common to both sides is what ABBA balances; only a difference matters.
        d = methods.drift_difference([r.order for r in m.runs_a], a, [r.order for r in m.runs_b], b)
        details.update(p_drift=d.p_value, drift_rho_a=d.rho_a, drift_rho_b=d.rho_b)
        if d.p_value < 0.01:
            out.append(f"drift: the sides trend differently with run order (Spearman rho A "
                       f"{d.rho_a:+.2f}, B {d.rho_b:+.2f}; p {d.p_value:.2g})")  # fmt: skip
    if modality:
        for side, values in (("A", a), ("B", b)):
            t = multimodality(values)
            details[f"modality_{side.lower()}"] = {"multimodal": t.multimodal,
                                                   "statistic": t.statistic, "p": t.p_value,
                                                   "method": t.method}  # fmt: skip
            if t.multimodal:
                out.append(f"multimodal? side {side}: {t.detail}")
    tied = methods.tied_fraction(np.r_[a, b])
    details["tied_fraction"] = tied
    if tied > 0.25:
        out.append(f"ties: {tied:.0%} of run values are tied (midranks used)")
    if p_shape < 0.01 and p > design.alpha:
        out.append(f"shape: distributions differ (Anderson-Darling p {p_shape:.2g}) "
                   "though the location test does not")  # fmt: skip
    return out


def adjust(results: list[StatResult], design: Design, look: int) -> None:
    """Each result's boundary at this look and whether it is crossed.

    Primary statistics (one per benchmark): Holm with group-sequential boundaries (Maurer
    and Bretz 2013): sorted by p, the j-th of m is held to the look's boundary at level
    primary_alpha / (m - j + 1), each level with its own spending over the looks, and the
    steps stop at the first not crossed. Its p_adjusted is Holm's single-look adjusted p,
    shown for reference. The others: Benjamini-Hochberg, adjusted p against the look's
    boundary at secondary_alpha.
    """
    holm = sorted((r for r in results if r.gated_family == "holm"), key=lambda r: r.p_value)
    for r, p in zip(holm, methods.holm([r.p_value for r in holm]), strict=True):
        r.p_adjusted, r.adjustment = float(p), "holm"
    going = True
    for j, r in enumerate(holm):
        level = design.primary_alpha / (len(holm) - j)
        boundary = design.alpha_at(look, level)
        going = going and r.p_value <= boundary
        r.crossed = going
        r.details.update(boundary=boundary, holm_level=level)
    bh = [r for r in results if r.gated_family == "bh"]
    boundary = design.alpha_at(look, design.secondary_alpha)
    for r, p in zip(bh, methods.benjamini_hochberg([r.p_value for r in bh]), strict=True):
        r.p_adjusted, r.adjustment = float(p), "bh"
        r.crossed = r.p_adjusted <= boundary
        r.details["boundary"] = boundary


def decide(r: StatResult, final: bool, imbalance: float | None = None) -> None:
    """The verdict of one statistic at a look, once adjust() has set its boundary.

    Run-level statistics follow STATS.md v2 on their repeated CI (level 1 - the result's
    boundary, at every look, the last included): regression/improvement when the boundary
    is crossed and the CI reaches the threshold in the direction of the change;
    significant-but-small when it is crossed and the whole CI lies inside (0, threshold)
    in that direction; no-meaningful-change when the CI lies inside +-threshold; else
    inconclusive. Tails keep the point-estimate rule (their CI exists at the last look
    only, and never for the max). A regression or improvement is then held back when host
    contention differs between the sides by more than `imbalance` (_contention_hold)."""
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
    if r.verdict in (REGRESSION, IMPROVEMENT):
        _contention_hold(r, imbalance)
    if r.verdict == INCONCLUSIVE:
        r.pending = not final
        mde = r.details.get("smallest_detectable_shift")
        if isinstance(mde, float):
            unit = "%" if r.relative else f" {r.unit}"
            r.warnings.append(f"inconclusive at {r.n_a}+{r.n_b} runs: smallest detectable "
                              f"shift {mde:.2f}{unit} (80% power)")  # fmt: skip


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
    """A tail's verdict: the threshold on the point estimate, no change on its CI."""
    thr = r.threshold
    if r.shift is None:
        # A tail whose ratio to A does not exist (A's pooled quantile 0): the change is
        # unbounded in %, beyond any threshold, in the direction of the two values.
        change = r.median_b - r.median_a
        size = math.inf if change != 0 else 0.0
    else:
        change = size = r.shift
    if r.crossed:
        r.verdict = _direction(change > 0, r) if abs(size) >= thr else SMALL
    elif r.ci_low is not None and r.ci_high is not None and -thr < r.ci_low <= r.ci_high < thr:
        r.verdict = NO_CHANGE
    else:
        r.verdict = INCONCLUSIVE


def contention(runs_a: Sequence[RunSamples], runs_b: Sequence[RunSamples]) -> dict[str, object]:
    """Contended runs per side as [contended, measured] (runs whose host load was not
    measured do not count); empty when a side has no measured run."""
    counts: dict[str, list[int]] = {}
    for side, runs in (("a", runs_a), ("b", runs_b)):
        known = [r.contended for r in runs if r.contended is not None]
        if not known:
            return {}
        counts[side] = [sum(known), len(known)]
    return {"contended": counts}


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
