"""What the verdict engine is given, and the values it takes from the runs (../shared/STATS.md).

Pure: dataclasses in, arrays out, no Django (webapp/analysis/services.py reads the runs
from the database into these). A metric's runs per side (RunSamples: the run's place in
the comparison's schedule, against which drift is checked; its samples; whether the host
was busy during it) and what the metric is (MetricInput: its unit, whether it is a latency
with many samples per run, its direction, whether it is the benchmark's primary, its
practical threshold); a benchmark's finished runs per side by outcome (BenchmarkFailures,
the failure-rate test's input).

From them, what the battery (battery.py) works on: a metric's statistics (run-level: the
value, or per-run p50/mean/p90 of a latency's samples, and for a latency in whole jiffies
its tail share and capped mean (jiffies.py); tails: the pooled p99 and max of a latency),
one value per run of a run-level statistic (run_values; side_values for both sides, which
the jiffy statistics need: their mode is pooled over both), which statistics are primary
(primary_statistics: sync-rcu-latency's tail share is a co-primary), and the contended runs
of each side among those whose host load was measured (contention; whether the two sides'
shares differ enough to hold a verdict back is verdicts.contention_differs).
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from stats import jiffies, methods

RUN_LEVEL = ("p50", "mean", "p90")
TAILS = {"p99": 0.99, "max": 1.0}


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
    # A latency in ms that comes in whole jiffies: a jiffy's length in ms (1000 / HZ of
    # the built kernels); None: not such a metric, or HZ unknown or not the same on both
    # sides (then no jiffy statistic: counts of different jiffies do not compare).
    jiffy_ms: float | None = None
    tail_share_primary: bool = False  # the tail share is a co-primary (Holm with the p50)


@dataclass(frozen=True)
class BenchmarkFailures:
    """A benchmark's finished runs per side by outcome: the failure-rate test's input."""

    benchmark: str
    a: methods.FailureCounts
    b: methods.FailureCounts


def run_values(
    runs: Sequence[RunSamples], statistic: str, what: str, *, jiffy_ms: float | None = None,
    mode: int | None = None,
) -> np.ndarray:  # fmt: skip
    """One value per run: the value itself, or a summary of the run's samples. The jiffy
    statistics need `jiffy_ms` and the modal jiffy count `mode` (side_values pools it)."""
    out = np.empty(len(runs))
    for i, run in enumerate(runs):
        x = methods.as_values(run.samples, f"{what} run {run.order}")
        if statistic in jiffies.STATISTICS:
            if jiffy_ms is None or mode is None:
                raise ValueError(f"{statistic} needs the jiffy's length and the pooled mode")
            out[i] = jiffies.run_statistic(statistic, jiffies.quantise(x, jiffy_ms), mode)
        elif statistic == "value":
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


def side_values(m: MetricInput, statistic: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """One value per run of each side (A, B). A jiffy statistic's modal count is that of
    every sample of both sides pooled: the same for any relabelling of the runs."""
    mode = None
    if statistic in jiffies.STATISTICS:
        if m.jiffy_ms is None:
            raise ValueError(f"{what}: {statistic} of a metric not in jiffies")
        jiffy = m.jiffy_ms
        mode = jiffies.pooled_mode([
            jiffies.quantise(methods.as_values(r.samples, f"{what} run {r.order}"), jiffy)
            for r in (*m.runs_a, *m.runs_b)
        ])  # fmt: skip
    a = run_values(m.runs_a, statistic, f"{what} side A", jiffy_ms=m.jiffy_ms, mode=mode)
    b = run_values(m.runs_b, statistic, f"{what} side B", jiffy_ms=m.jiffy_ms, mode=mode)
    return a, b


def run_level_statistics(m: MetricInput) -> tuple[str, ...]:
    """A metric's run-level statistics: the value, or summaries of a latency's samples
    (and for one in whole jiffies, its tail share and capped mean)."""
    if not m.per_run_samples:
        return ("value",)
    return RUN_LEVEL + (jiffies.STATISTICS if m.jiffy_ms is not None else ())


def primary_statistics(m: MetricInput) -> tuple[str, ...]:
    """The statistics of a metric gated with Holm: a primary metric's first run-level
    statistic, and its tail share where that is a co-primary (STATS.md v3)."""
    if not m.primary:
        return ()
    first = run_level_statistics(m)[0]
    if m.tail_share_primary and m.jiffy_ms is not None:
        return (first, jiffies.TAIL_SHARE)
    return (first,)


def statistic_input(m: MetricInput, statistic: str) -> MetricInput:
    """The metric as one statistic is judged: the tail share in percentage points with an
    absolute threshold in points; the capped mean in jiffies (a % threshold as the
    metric's). Any other statistic: the metric as it is."""
    if statistic == jiffies.TAIL_SHARE:
        pp = jiffies.TAIL_SHARE_THRESHOLD_PP
        return replace(m, unit=jiffies.UNITS[statistic], threshold=pp,
                       threshold_is_absolute=True)  # fmt: skip
    if statistic == jiffies.CAPPED_MEAN:
        return replace(m, unit=jiffies.UNITS[statistic])
    return m


def tails_of(m: MetricInput) -> dict[str, float]:
    """A metric's pooled tail statistics (latencies only), by name: their quantile."""
    return TAILS if m.per_run_samples else {}


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
