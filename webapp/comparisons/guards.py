"""A comparison's guard lines: per benchmark, what its primary's change cost, from the
secondaries its spec marks as guards (benchmarks/spec.py Metric.guard: rcuscale's calls,
grace periods and calls per grace period). Part of the read model (summary.py): the report,
the API's summary, the mail and the CLI read them from here, beside the primary's verdict.

A guard line is a pure function of the verdict rows (summary.VerdictRow), so the CLI's
--server client builds the same line from the API's rows. Each item is the guard's shift
with its CI and its own secondary verdict (BH with the other secondaries), never a verdict
of the comparison: a patch that makes grace periods end sooner by starting more of them
shows as "grace periods +x%" beside a primary "improvement".
"""

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.spec import BenchmarkSpec
from webapp.comparisons.summary import VerdictRow, spec_for

# The run-level statistic a guard is read at: its value (a count per run), else its mean.
_STATISTICS = ("value", "mean")


@dataclass(frozen=True)
class GuardItem:
    label: str  # the spec's, "grace periods"
    metric: str
    statistic: str
    shift: str  # "+1.23%" (or B - A in the unit for an absolute metric), "n/a"
    ci: str  # "[-0.50, +2.10]", "" without one
    verdict: str  # the secondary's own verdict
    decided: bool  # the verdict says something moved (not inconclusive, not no-change)

    @property
    def text(self) -> str:
        """ "grace periods +1.23% [-0.50, +2.10]"; the verdict where it decided something."""
        words = [self.label, self.shift, self.ci, f"({self.verdict})" if self.decided else ""]
        return " ".join(w for w in words if w)


@dataclass(frozen=True)
class GuardLine:
    benchmark: str
    items: tuple[GuardItem, ...]

    @property
    def text(self) -> str:
        """One line for mail and terminal: "guards: calls +0.00% [...]; grace periods ..."."""
        return "guards: " + "; ".join(i.text for i in self.items)


def guard_lines(rows: Sequence[VerdictRow]) -> list[GuardLine]:
    """Per benchmark with guard rows, in the rows' order of benchmarks, its guards in the
    spec's order of metrics. A benchmark whose spec has no guard, or is no longer
    registered, has no line."""
    by_bench: dict[str, dict[str, VerdictRow]] = {}
    specs: dict[str, BenchmarkSpec] = {}
    for r in rows:
        v = r.verdict
        spec = spec_for(v.benchmark)
        if spec is None or v.is_primary or v.statistic not in _STATISTICS:
            continue
        metric = next((m for m in spec.metrics if m.name == v.metric), None)
        if metric is None or not metric.guard:
            continue
        specs[v.benchmark] = spec
        # The first statistic in _STATISTICS order wins (a metric has one or the other).
        found = by_bench.setdefault(v.benchmark, {})
        kept = found.get(v.metric)
        if kept is None or _STATISTICS.index(v.statistic) < _STATISTICS.index(
            kept.verdict.statistic
        ):
            found[v.metric] = r
    lines = []
    for bench, found in by_bench.items():
        items = tuple(
            _item(m.guard, found[m.name])
            for m in specs[bench].metrics
            if m.guard and m.name in found
        )
        lines.append(GuardLine(bench, items))
    return lines


def _item(label: str, r: VerdictRow) -> GuardItem:
    v = r.verdict
    shift = r.absolute_shift if not r.relative else r.shift
    return GuardItem(
        label=label, metric=v.metric, statistic=v.statistic, shift=shift or r.shift,
        ci="" if not r.relative else r.ci, verdict=v.verdict, decided=r.decided,
    )  # fmt: skip


def dicts(rows: Sequence[VerdictRow]) -> list[dict[str, object]]:
    """The guard lines as the API's summary gives them."""
    return [
        {
            "benchmark": line.benchmark,
            "text": line.text,
            "guards": [
                {
                    "label": i.label,
                    "metric": i.metric,
                    "statistic": i.statistic,
                    "shift": i.shift,
                    "ci": i.ci,
                    "verdict": i.verdict,
                }
                for i in line.items
            ],
        }
        for line in guard_lines(rows)
    ]
