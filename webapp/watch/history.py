"""A watched tree's history: each tested head's primary metrics, in push order, and the
change points found in it.

A series is one (branch, target, benchmark, primary metric): per tested head (a Push in
state tested, not an anchor, by received_at) whose comparison on that target is done
with result ok, the median of its B side's per-run values (the engine's run-level
statistic: the value, or a latency run's p50) with a distribution-free CI for it, and the
comparison's verdict on that metric. Change points come from
stats.changepoints over the series' medians (docs/statistics.md, "Drift
detection").
"""

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.expressions import RawSQL
from scipy import stats as st

from benchmarks.registry import get as get_benchmark
from benchmarks.spec import Better, Metric
from stats import changepoints
from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.analysis.models import MetricVerdict
from webapp.comparisons.models import Comparison, Measurement
from webapp.states import Result, State
from webapp.trees.models import Tree
from webapp.watch.models import ChangePoint, Push

log = logs.get(__name__)

CI_LEVEL = 0.95


@dataclass(frozen=True)
class MedianCI:
    low: float
    high: float
    coverage: float  # the exact coverage of the order-statistic interval (>= CI_LEVEL)


def median_ci(values: Sequence[float], level: float = CI_LEVEL) -> MedianCI | None:
    """Distribution-free CI for the median: the order statistics x_(k), x_(n-k+1) (1-based)
    with the largest k whose coverage 1 - 2 P(Bin(n, 1/2) <= k - 1) is still >= level
    (benchstat's interval). None below 6 values, where even [min, max] covers < 95%."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n == 0:
        return None
    k = int(st.binom.ppf((1 - level) / 2, n, 0.5))  # P(Bin <= k) >= (1 - level) / 2 first
    if st.binom.cdf(k, n, 0.5) > (1 - level) / 2:
        k -= 1  # so that P(Bin <= k) <= (1 - level) / 2; x_(k+1) is then the lower end
    if k < 0:
        return None
    coverage = 1 - 2 * float(st.binom.cdf(k, n, 0.5))
    return MedianCI(float(x[k]), float(x[n - 1 - k]), coverage)


@dataclass(frozen=True)
class HistoryPoint:
    push_id: int
    sha: str  # the tested head
    received_at: datetime
    comparison_id: int
    median: float
    ci_low: float | None  # None: too few runs for a 95% interval
    ci_high: float | None
    n_runs: int
    verdict: str  # the comparison's verdict on this metric; "" when it has none


@dataclass(frozen=True)
class ChangeMark:
    push_id: int
    sha: str
    before_median: float
    after_median: float
    change_pct: float
    regression: bool


@dataclass
class Series:
    branch: str
    target_id: int
    target: str
    benchmark: str
    metric: str
    unit: str
    lower_is_better: bool
    points: list[HistoryPoint] = field(default_factory=list)
    change_points: list[ChangeMark] = field(default_factory=list)
    # The practical threshold the newest head's comparison judged the metric on: % of the
    # value, or absolute (memory) in the unit (the chart's band around the heads' median).
    threshold: float | None = None
    threshold_relative: bool = True

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.branch, self.target_id, self.benchmark, self.metric)


@dataclass(frozen=True)
class TreeHistory:
    tree: Tree
    series: list[Series]


def history_pushes(tree: Tree, branch: str | None) -> QuerySet[Push]:
    """The tree's tested, non-anchor pushes in push order (oldest first)."""
    qs = Push.objects.filter(tree=tree, state=Push.State.TESTED, anchor=False)
    if branch is not None:
        qs = qs.filter(branch=branch)
    return qs.order_by("received_at", "pk")


def _primary(benchmark: str) -> Metric | None:
    try:
        return get_benchmark(benchmark).spec.primary
    except KeyError:  # a benchmark no longer in the registry: no history for it
        return None


# A run's value in SQL, as engine.run_values computes it: the median of its samples (p50)
# for a latency, the one value otherwise; percentile_cont(0.5) is numpy's median. Done in the
# database so that a history of many heads does not load every latency sample.
_RUN_MEDIAN = RawSQL(
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) FROM unnest(samples) AS v", ()
)


def _b_values(
    comparison_ids: Sequence[int], metrics: Iterable[str]
) -> dict[tuple[int, str, str], list[float]]:
    """Per (comparison, benchmark, metric) of `metrics`: B's per-run values over its counted
    runs (as webapp.analysis.services.counted_runs: done and ok), in run order."""
    rows = (
        Measurement.objects.filter(
            run__comparison_id__in=comparison_ids, run__side="B", run__state=State.DONE,
            run__result=Result.OK, run__traced=False, metric__in=set(metrics),
        )
        .annotate(run_value=_RUN_MEDIAN)
        .order_by("run__order")
        .values_list("run__comparison_id", "benchmark", "metric", "run_value")
    )  # fmt: skip
    out: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    for comparison_id, benchmark, metric, value in rows:
        if value is not None and math.isfinite(value):
            out[comparison_id, benchmark, metric].append(float(value))
    return out


def build_series(pushes: Iterable[Push], comparisons: QuerySet[Comparison]) -> list[Series]:
    """Every series of `pushes` (in their order) over those of their comparisons that are
    in `comparisons` (the caller's visibility) and done with result ok."""
    pushes = list(pushes)
    done = comparisons.filter(pushes__in=pushes, state=State.DONE, result=Result.OK).distinct()
    by_pk = {c.pk: c for c in done.select_related("target")}
    links = Push.comparisons.through.objects.filter(
        push_id__in=[p.pk for p in pushes], comparison_id__in=list(by_pk)
    ).values_list("push_id", "comparison_id")
    by_push: dict[int, list[Comparison]] = defaultdict(list)
    for push_id, comparison_id in links:
        by_push[push_id].append(by_pk[comparison_id])
    primaries = {b: _primary(b) for c in by_pk.values() for b in c.benchmarks}
    values_of = _b_values(list(by_pk), {m.name for m in primaries.values() if m is not None})
    verdicts = {
        (v.comparison_id, v.benchmark, v.metric): v
        for v in MetricVerdict.objects.filter(comparison_id__in=list(by_pk), is_primary=True)
    }
    series: dict[tuple[str, int, str, str], Series] = {}
    for push in pushes:
        for c in sorted(by_push.get(push.pk, []), key=lambda c: c.pk):
            for benchmark in c.benchmarks:
                metric = primaries[benchmark]
                if metric is None:
                    continue
                values = values_of.get((c.pk, benchmark, metric.name), [])
                if not values:
                    continue
                key = (push.branch, c.target_id, benchmark, metric.name)
                s = series.get(key)
                if s is None:
                    s = series[key] = Series(
                        branch=push.branch, target_id=c.target_id, target=c.target.name,
                        benchmark=benchmark, metric=metric.name, unit=metric.unit,
                        lower_is_better=metric.better is Better.LOWER,
                    )  # fmt: skip
                ci = median_ci(values)
                v = verdicts.get((c.pk, benchmark, metric.name))
                verdict = v.verdict if v is not None else ""
                s.threshold, s.threshold_relative = _threshold(v, c, metric)
                point = HistoryPoint(
                    push_id=push.pk, sha=push.after, received_at=push.received_at,
                    comparison_id=c.pk, median=float(np.median(values)),
                    ci_low=ci.low if ci else None, ci_high=ci.high if ci else None,
                    n_runs=len(values), verdict=verdict,
                )  # fmt: skip
                s.points.append(point)
    return sorted(series.values(), key=lambda s: (s.branch, s.target, s.benchmark, s.metric))


def _threshold(v: MetricVerdict | None, c: Comparison, metric: Metric) -> tuple[float, bool]:
    """The threshold the comparison judged the metric on, as its verdict recorded it (the
    engine's: a benchmark's override, or the comparison's %), else as the spec and the
    comparison say."""
    d = v.details if v is not None else {}
    if isinstance(d.get("threshold"), float | int):
        return float(d["threshold"]), bool(d.get("relative", True))
    if metric.threshold_is_absolute and metric.threshold is not None:
        return metric.threshold, False
    return (metric.threshold if metric.threshold is not None else c.threshold_pct), True


def _series_for(tree: Tree, branch: str | None, comparisons: QuerySet[Comparison]) -> list[Series]:
    return build_series(history_pushes(tree, branch), comparisons)


def record_change_points(tree: Tree, branch: str) -> list[ChangePoint]:
    """Detect change points in every series of the branch and store the new ones; returns
    those created. Done once per audience (ChangePoint.Audience): over the comparisons
    anyone may see, and over all of them for the tree's members and staff, so that the
    medians of restricted runs are shown and mailed only to those who may see the runs.

    Idempotent: a change already stored (the same series and audience, at the same push or
    within changepoints.MIN_SIZE heads of it, where new heads moved the estimate) is not
    stored again. Called when a push comparison of the branch finishes."""
    public = access.visible_comparisons(AnonymousUser(), Comparison.objects.all())
    created = _record(tree, branch, ChangePoint.Audience.PUBLIC, public)
    return created + _record(tree, branch, ChangePoint.Audience.MEMBERS, Comparison.objects.all())


def _record(
    tree: Tree, branch: str, audience: str, comparisons: QuerySet[Comparison]
) -> list[ChangePoint]:
    created = []
    for s in _series_for(tree, branch, comparisons):
        found = changepoints.confirmed([p.median for p in s.points])
        if not found:
            continue
        stored = set(
            ChangePoint.objects.filter(
                tree=tree, branch=branch, benchmark=s.benchmark, metric=s.metric,
                target_id=s.target_id, audience=audience,
            ).values_list("push_id", flat=True)
        )  # fmt: skip
        positions = {p.push_id: i for i, p in enumerate(s.points)}
        known = [positions[pk] for pk in stored if pk in positions]
        for cp in found:
            if any(abs(cp.index - i) <= changepoints.MIN_SIZE for i in known):
                continue
            point = s.points[cp.index]
            row = _store(tree, s, point.push_id, cp, audience)
            if row is not None:
                created.append(row)
                known.append(cp.index)
                log.info(
                    "change point", tree=tree.name, branch=branch, target=s.target,
                    benchmark=s.benchmark, metric=s.metric, push=point.push_id,
                    sha=point.sha, change_pct=round(cp.change_pct, 3),
                    regression=row.regression, change_point=row.pk, audience=audience,
                )  # fmt: skip
    return created


def _store(
    tree: Tree, s: Series, push_id: int, cp: changepoints.ChangePointFound, audience: str
) -> ChangePoint | None:
    """Create the row; None when a concurrent call stored it first (the unique constraint)."""
    try:
        with transaction.atomic():
            row = ChangePoint.objects.create(
                tree=tree, branch=s.branch, benchmark=s.benchmark, metric=s.metric,
                target_id=s.target_id, push_id=push_id, before_median=cp.before_median,
                after_median=cp.after_median, change_pct=cp.change_pct,
                regression=changepoints.is_regression(cp.change_pct, s.lower_is_better),
                audience=audience,
            )  # fmt: skip
            # Mailed like any regression (webapp.alerts): on commit, to the tree's
            # subscribers who asked for change points and are of its audience.
            dispatch.send_notify_change_point(row.pk)
            return row
    except IntegrityError:
        return None


def visible_change_points(user: AnyUser, tree: Tree) -> QuerySet[ChangePoint]:
    """The tree's change points `user` may see: those found over the comparisons they see
    (ChangePoint.Audience), at a push with a comparison they see."""
    audience = (
        ChangePoint.Audience.MEMBERS if access.sees_all_of(user, tree)
        else ChangePoint.Audience.PUBLIC
    )  # fmt: skip
    seen = access.visible_comparisons(user, Comparison.objects.filter(pushes=OuterRef("push")))
    return ChangePoint.objects.filter(tree=tree, audience=audience).filter(Exists(seen))


def tree_history(tree: Tree, user: AnyUser, branch: str | None = None) -> TreeHistory:
    """The tree's history as `user` may see it: points of comparisons they may not see
    are left out, and the change points are those found over the comparisons they see
    (visible_change_points), at pushes whose point they see."""
    comparisons = access.visible_comparisons(user, Comparison.objects.all())
    series = _series_for(tree, branch, comparisons)
    rows = visible_change_points(user, tree).select_related("push")
    rows = rows.order_by("push__received_at", "pk")
    if branch is not None:
        rows = rows.filter(branch=branch)
    marks: dict[tuple[str, int, str, str], list[ChangePoint]] = defaultdict(list)
    for r in rows:
        marks[r.branch, r.target_id, r.benchmark, r.metric].append(r)
    for s in series:
        shown = {p.push_id for p in s.points}
        s.change_points = [
            ChangeMark(r.push_id, r.push.after, r.before_median, r.after_median, r.change_pct,
                       r.regression)
            for r in marks.get(s.key, []) if r.push_id in shown
        ]  # fmt: skip
    return TreeHistory(tree, series)
