"""The report's figure sections: per benchmark and metric, the figures its spec declares
(figures.py draws them; nothing here knows a benchmark by name), drawn once a comparison is
done and then kept in the "reports" cache."""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from django.core.cache import caches
from django.db import connection
from django.utils.safestring import SafeString

from benchmarks.spec import BenchmarkSpec, Kind
from stats.inputs import RUN_LEVEL
from webapp import logs
from webapp.analysis.services import counted_runs
from webapp.comparisons.models import Comparison, ComparisonState, Measurement
from webapp.comparisons.summary import spec_for
from webapp.plotly import PLOTLY_VERSION, figure_html
from webapp.reports import figures
from webapp.reports.jiffy_figures import jiffy_figures

T = TypeVar("T")

log = logs.get(__name__)


@dataclass(frozen=True)
class MetricFigures:
    benchmark: str
    metric: str
    unit: str
    is_primary: bool
    figures: list[SafeString]


@dataclass(frozen=True)
class BenchmarkFigures:
    benchmark: str
    description: str
    overview: list[SafeString]  # the figures the spec declares over several metrics
    metrics: list[MetricFigures]


@dataclass
class _MetricData:
    unit: str
    runs: list[figures.RunValues] = field(default_factory=list)


def figure_sections(c: Comparison) -> list[BenchmarkFigures]:
    """Figures of the counted runs (finished ok; failed runs are never data), per benchmark:
    per metric its pooled ECDF, then for each run-level statistic the engine tests (the
    value, or a latency's per-run p50, mean and p90) its values in run order beside their
    ECDF, plus a log histogram for latencies; first the figures the benchmark's spec
    declares over several metrics."""
    data: dict[tuple[str, str], _MetricData] = {}
    rows = (
        Measurement.objects.filter(run__in=counted_runs(c))
        .order_by("run__order", "metric")
        .values_list("benchmark", "metric", "unit", "run__side", "run__order", "run__index",
                     "samples")
    )  # fmt: skip
    for bench, metric, unit, side, order, index, samples in rows.iterator(chunk_size=200):
        d = data.setdefault((bench, metric), _MetricData(unit))
        d.runs.append(figures.RunValues(side, order, index, samples))
    sections = []
    for bench in c.benchmarks:
        spec = spec_for(bench)
        present = [m for (b, m) in data if b == bench]
        sections.append(
            BenchmarkFigures(
                benchmark=bench,
                description=spec.description if spec else "",
                overview=_overview(spec, {m: data[bench, m] for m in present}),
                metrics=[_metric_figures(bench, m, data[bench, m], spec, c)
                         for m in _metric_order(present, spec)],
            )
        )  # fmt: skip
    return sections


def _metric_order(present: list[str], spec: BenchmarkSpec | None) -> list[str]:
    """Primary first, then the spec's order; metrics the spec does not know last."""
    if spec is None:
        return sorted(present)
    known = [m.name for m in sorted(spec.metrics, key=lambda m: not m.primary)]
    return [m for m in known if m in present] + sorted(set(present) - set(known))


def _metric_figures(
    bench: str, metric: str, d: _MetricData, spec: BenchmarkSpec | None, c: Comparison
) -> MetricFigures:
    known = {m.name: m for m in spec.metrics} if spec else {}
    kind = known[metric].kind if metric in known else None
    primary = known[metric].primary if metric in known else False
    pooled: dict[str, list[float]] = {"A": [], "B": []}
    runs: Counter[str] = Counter()
    for r in d.runs:
        pooled[r.side].extend(r.samples)
        runs[r.side] += 1
    name = f"{bench} {metric}"
    latency = kind is Kind.SAMPLES
    figs = [
        figures.ecdf_figure(
            f"{name}: ECDF of pooled samples",
            d.unit,
            pooled,
            runs=runs,
            log_x=latency,
            view_quantile=figures.ECDF_VIEW_QUANTILE if latency else None,
        ),
        *(
            figures.run_level_figure(
                f"{name}: per-run {figures.STATISTIC_LABELS[s]}, in run order and as an ECDF",
                d.unit,
                d.runs,
                s,
            )
            for s in (RUN_LEVEL if latency else ("value",))
        ),
    ]
    if latency:
        figs.append(figures.log_histogram(f"{name}: histogram", d.unit, pooled))
    drawn = [figure_html(f) for f in figs]
    if metric in known and known[metric].jiffies:
        drawn += jiffy_figures(c, bench, metric, d.runs)
    return MetricFigures(bench, metric, d.unit, primary, drawn)


def _overview(spec: BenchmarkSpec | None, metrics: dict[str, _MetricData]) -> list[SafeString]:
    """The spec's declared figures, each drawn when any of its metrics has data."""
    if spec is None:
        return []
    per_run: dict[str, dict[str, list[float]]] = {}  # side -> metric -> one value per run
    for metric, d in metrics.items():
        for r in d.runs:
            values = per_run.setdefault(r.side, {}).setdefault(metric, [])
            values.append(figures.run_value(r.samples))
    out = []
    for f in spec.figures:
        names = f.metrics()
        if any(n in metrics for n in names):
            # spec_errors holds every metric of a figure to one unit, the spec's.
            unit = spec.metric(names[0]).unit
            out.append(figure_html(figures.sweep_figure(f, per_run, unit=unit)))
    return out


# Bump FIGURES_VERSION whenever figures.py or the sections' markup changes what is drawn.
# Comparisons that are not done are never cached (their figures are not drawn at all).
# 2: log axes with full tick values; 3: jiffy histograms; 4: every run-level statistic
FIGURES_VERSION = 4
FIGURES_CACHE = "reports"


def figures_cache_key(c: Comparison) -> str | None:
    """The cache key of a done comparison's figure sections; None for one not done."""
    if c.state != ComparisonState.DONE or c.finished_at is None:
        return None
    return ":".join((
        "figures", str(FIGURES_VERSION), PLOTLY_VERSION, str(connection.settings_dict["NAME"]),
        str(c.pk), c.created_at.isoformat(), c.finished_at.isoformat(),
    ))  # fmt: skip


def cached_figure_sections(c: Comparison) -> list[BenchmarkFigures]:
    """figure_sections of a done comparison, drawn once and then read from the cache.
    The cache is an optimisation: when it cannot be read or written (a data dir that is
    read-only, full), the figures are drawn as without it, with a warning in the log."""
    key = figures_cache_key(c)
    if key is None:
        return figure_sections(c)
    return through_cache(key, list, lambda: figure_sections(c))


def through_cache(key: str, kind: type[T], compute: Callable[[], T]) -> T:
    """What `compute` gives, kept under `key` in the figures cache; a hit must be a `kind`.
    A cache that cannot be read or written costs the computing only (a warning in the log)."""
    cache = caches[FIGURES_CACHE]
    try:
        hit = cache.get(key)
    except Exception:  # noqa: BLE001 - any cache failure: compute it instead
        log.warning("report cache: cannot read %s", key, exc_info=True)
        hit = None
    if isinstance(hit, kind):
        return hit
    value = compute()
    try:
        cache.set(key, value)
    except Exception:  # noqa: BLE001 - the page is served all the same
        log.warning("report cache: cannot write %s", key, exc_info=True)
    return value
