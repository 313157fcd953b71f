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

from benchmarks.spec import BenchmarkSpec, Kind
from webapp.comparisons.summary import VerdictRow, spec_for

# The run-level statistic a guard is read at: a one-value metric's value, a sampled one's
# mean.
_STATISTIC = {Kind.VALUE: "value", Kind.SAMPLES: "mean"}


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
        """The guards: "guards: calls +0.00% [...]; grace periods ..."."""
        return "guards: " + "; ".join(i.text for i in self.items)

    @property
    def line(self) -> str:
        """The line mail and terminal print: the benchmark, then `text`."""
        return f"{self.benchmark} {self.text}"


def guard_lines(rows: Sequence[VerdictRow]) -> list[GuardLine]:
    """Per benchmark with guard rows, in the rows' order of benchmarks, its guards in the
    spec's order of metrics. A benchmark whose spec has no guard, or is no longer
    registered, has no line."""
    found: dict[str, tuple[BenchmarkSpec, dict[str, VerdictRow]]] = {}
    for r in rows:
        v = r.verdict
        spec = spec_for(v.benchmark)
        if spec is None or v.is_primary:
            continue
        metric = next((m for m in spec.metrics if m.name == v.metric), None)
        if metric is None or not metric.guard or v.statistic != _STATISTIC[metric.kind]:
            continue
        found.setdefault(v.benchmark, (spec, {}))[1][v.metric] = r
    return [
        GuardLine(bench, tuple(_item(m.guard, got[m.name])
                               for m in spec.metrics if m.guard and m.name in got))
        for bench, (spec, got) in found.items()
    ]  # fmt: skip


def _item(label: str, r: VerdictRow) -> GuardItem:
    v = r.verdict
    # A memory metric's B - A in its unit (with its CI in it) where the engine gave one.
    shift = (not r.relative and r.absolute_shift) or r.shift
    return GuardItem(
        label=label, metric=v.metric, statistic=v.statistic, shift=shift,
        ci=r.ci if r.relative else "", verdict=v.verdict, decided=r.decided,
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
