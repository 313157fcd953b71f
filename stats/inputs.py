"""What the verdict engine is given, and the values it takes from the runs (../shared/STATS.md).

Pure: dataclasses in, arrays out, no Django (webapp/analysis/services.py reads the runs
from the database into these). A metric's runs per side (RunSamples: the run's place in
the comparison's schedule, against which drift is checked; its samples; whether the host
was busy during it) and what the metric is (MetricInput: its unit, whether it is a latency
with many samples per run, its direction, whether it is the benchmark's primary, its
practical threshold); a benchmark's finished runs per side by outcome (BenchmarkFailures,
the failure-rate test's input).

From them, what the battery (battery.py) works on: a metric's statistics (run-level: the
value, or per-run p50/mean/p90 of a latency's samples; tails: the pooled p99 and max of a
latency), one value per run of a run-level statistic (run_values), and the contended runs
of each side among those whose host load was measured (contention; whether the two sides'
shares differ enough to hold a verdict back is verdicts.contention_differs).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stats import methods

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


@dataclass(frozen=True)
class BenchmarkFailures:
    """A benchmark's finished runs per side by outcome: the failure-rate test's input."""

    benchmark: str
    a: methods.FailureCounts
    b: methods.FailureCounts


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


def run_level_statistics(m: MetricInput) -> tuple[str, ...]:
    """A metric's run-level statistics: the value, or summaries of a latency's samples."""
    return RUN_LEVEL if m.per_run_samples else ("value",)


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
