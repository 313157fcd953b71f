"""The sequential design of a comparison, and what each of its looks concludes (../shared/STATS.md).

Pure: dataclasses in, dataclasses out, no Django.
  - Design: looks at min_runs, min_runs + step, ... max_runs per side against Lan-DeMets
    boundaries (the primaries' power spending alpha t^3, sequential.py; the secondaries'
    linear spending alpha t, secondary_boundary); alpha split between the primary
    statistics (Holm) and the secondary ones (Benjamini-Hochberg), each family controlling
    its own error, so that a comparison's chance of any false regression or improvement
    verdict, over every metric and look, is at most alpha; no fewer runs than the floor;
  - Resolve: the smallest boundary p each family's results may be held to at a look; the
    permutation counts are raised until these are resolved;
  - adjust: Holm across the benchmarks' primary metrics, each step at its own level's
    sequential boundary, those crossed at an earlier look staying crossed (their levels
    released to the others); Benjamini-Hochberg across the rest;
  - conclude: each statistic's verdict (verdicts.decide; a primary decided at an earlier
    look keeps its verdict, verdicts.keep), each benchmark's failure-rate row
    (verdicts.failure_result), and whether the comparison needs more runs: a primary metric
    left inconclusive at a look before the last (undecided, a crossing whose estimate is
    below the threshold, or a regression/improvement held back because host contention
    differs between the sides) asks for the runs up to the next look, unless B is found
    unreliable. Where the comparison ends, the p99's CI is computed at that look's level.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from stats import defaults, sequential
from stats.defaults import MIN_RUNS
from stats.inputs import (
    BenchmarkFailures,
    MetricInput,
    primary_statistics,
    run_level_statistics,
    tails_of,
)
from stats.verdicts import (
    DECIDED,
    RELIABILITY,
    SEVERITY,
    Analysis,
    Crossed,
    StatResult,
    TooFewRuns,
    check_reportable,
    decide,
    failure_result,
    keep,
    result_key,
)

# The secondary family's spending exponent: linear, alpha t (STATS.md v3).
SECONDARY_RHO = 1.0


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
    # Before the last look, a regression/improvement whose estimate is below the threshold
    # waits for the next look (STATS.md v3); False: the v2 rule, which
    # perf/stats_simulation.py compares it with.
    small_waits: bool = True

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

    def bounds_at(self, level: float, rho: float = sequential.SPENDING_RHO) -> tuple[float, ...]:
        """|z| boundary per look for a test held to `level` overall (Holm's local levels),
        spending level t^rho."""
        fractions = tuple(n / self.max_runs for n in self.looks)
        return sequential.sequential_bounds(fractions, level, rho)

    def look_at(self, n: int) -> int:
        """1-based index of the last look reached with n runs per side."""
        if n < self.min_runs:
            raise TooFewRuns(f"{n} runs per side; at least {self.min_runs} are needed")
        return sum(1 for look in self.looks if look <= n)

    def alpha_at(self, look: int, level: float | None = None) -> float:
        """The nominal p boundary at a look: a lone primary statistic's, or at `level`."""
        bounds = self.bounds if level is None else self.bounds_at(level)
        return sequential.z_to_p(bounds[look - 1])

    def secondary_boundary(self, look: int) -> float:
        """The secondary family's (BH) nominal p boundary at a look: linear spending
        (secondary_alpha t). Secondaries never stop a comparison, so nothing is gained by
        spending little early, and a steep spending put the first look's BH steps beyond
        what permutations resolve (STATS.md v3)."""
        bounds = self.bounds_at(self.secondary_alpha, SECONDARY_RHO)
        return sequential.z_to_p(bounds[look - 1])


@dataclass(frozen=True)
class Resolve:
    """The smallest boundary p each family's results may be held to at a look: the
    permutation counts are raised until these are resolved (STATS.md v2)."""

    primary: float  # Holm's first step: the boundary at level alpha / (primary metrics)
    secondary: float  # BH's first step: the look's boundary / (secondary statistics)

    @classmethod
    def of(cls, metrics: Sequence["MetricInput"], design: Design, look: int) -> "Resolve":
        primaries = max(sum(len(primary_statistics(m)) for m in metrics), 1)
        per_metric = [len(run_level_statistics(m)) + len(tails_of(m)) for m in metrics]
        secondaries = max(sum(per_metric) - primaries, 1)
        return cls(design.alpha_at(look, design.primary_alpha / primaries),
                   design.secondary_boundary(look) / secondaries)  # fmt: skip


def adjust(
    results: list[StatResult], design: Design, look: int,
    crossed_before: Collection[tuple[str, str, str]] = (),
) -> None:  # fmt: skip
    """Each result's boundary at this look and whether it is crossed.

    Primary statistics (one per benchmark): Holm with group-sequential boundaries (Maurer
    and Bretz 2013): sorted by p, the j-th of m is held to the look's boundary at level
    primary_alpha / (m - j + 1), each level with its own spending over the looks, and the
    steps stop at the first not crossed. Those in `crossed_before` (result_key) crossed at
    an earlier look: they stay crossed and come first, so that the others get their
    released levels. Its p_adjusted is Holm's single-look adjusted p, shown for reference.
    The others: Benjamini-Hochberg, adjusted p against the secondary family's boundary at
    the look (linear spending of secondary_alpha).
    """
    holm = sorted((r for r in results if r.gated_family == "holm"),
                  key=lambda r: (result_key(r) not in crossed_before, r.p_value))  # fmt: skip
    for r, p in zip(holm, sequential.holm([r.p_value for r in holm]), strict=True):
        r.p_adjusted, r.adjustment = float(p), "holm"
    going = True
    for j, r in enumerate(holm):
        level = design.primary_alpha / (len(holm) - j)
        boundary = design.alpha_at(look, level)
        going = going and (result_key(r) in crossed_before or r.p_value <= boundary)
        r.crossed = going
        r.details.update(boundary=boundary, holm_level=level)
    bh = [r for r in results if r.gated_family == "bh"]
    boundary = design.secondary_boundary(look)
    for r, p in zip(bh, sequential.benjamini_hochberg([r.p_value for r in bh]), strict=True):
        r.p_adjusted, r.adjustment = float(p), "bh"
        r.crossed = r.p_adjusted <= boundary
        r.details["boundary"] = boundary


def conclude(
    results: list[StatResult], design: Design, n: int, failures: Sequence[BenchmarkFailures] = (),
    crossed_before: Mapping[tuple[str, str, str], Crossed] | None = None,
) -> Analysis:  # fmt: skip
    """Adjust the p-values of one look's results, decide each verdict, test each
    benchmark's failure rate, and say whether the comparison needs more runs.

    `crossed_before`: the primaries that crossed at an earlier look (by result_key), with
    what they reported: they stay crossed, and a decided verdict is kept (STATS.md v3)."""
    crossed_before = crossed_before or {}
    look = design.look_at(n)
    adjust(results, design, look, crossed_before)
    final = look == len(design.looks)
    wait = design.small_waits and not final
    for r in (r for r in results if r.is_primary):
        before = crossed_before.get(result_key(r))
        if before is not None and before.verdict in DECIDED:
            keep(r, before)
        else:
            decide(r, final, design.contention_imbalance, wait_if_small=wait)
    pending = any(r.pending for r in results if r.is_primary)
    reliability = [failure_result(f, look, len(design.looks)) for f in failures]
    # B found unreliable: that is the answer, whatever more runs would measure.
    pending = pending and not any(r.verdict == RELIABILITY for r in reliability)
    need = design.looks[look] - n if pending and not final else 0
    for r in (r for r in results if not r.is_primary):
        if need <= 0 and r.tail_ci is not None:
            _set_tail_ci(r, r.tail_ci(1 - float(r.details["boundary"])))  # type: ignore[arg-type]
        # Where the comparison goes on, a sub-threshold crossing waits like a primary's;
        # where it ends here, the v2 rules stand, as at the last look.
        decide(r, final, design.contention_imbalance, wait_if_small=wait and need > 0)
    for r in results:
        check_reportable(r)
    results = results + reliability
    results.sort(key=lambda r: (SEVERITY.index(r.verdict), not r.is_primary, r.benchmark,
                                r.metric, r.statistic))  # fmt: skip
    return Analysis(results, look, n, max(need, 0), design.bounds)


def _set_tail_ci(r: StatResult, ci: tuple[float, float] | str) -> None:
    """A tail's CI (ratio B/A) as its shift's, in %, or the reason there is none."""
    level = 1 - float(r.details["boundary"])  # type: ignore[arg-type]
    if r.shift is None:  # no ratio to A: no CI of it either (the reason is a warning)
        return
    if isinstance(ci, str):
        r.warnings.append(ci)
        return
    r.ci_low, r.ci_high = 100 * (ci[0] - 1), 100 * (ci[1] - 1)
    r.details["ci_level"] = (f"{level:.2%} (the level of the look where the comparison "
                             "ends), cluster bootstrap")  # fmt: skip
