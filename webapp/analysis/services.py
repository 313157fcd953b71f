"""Analysis services: read a comparison's measurements, run the engine, store verdicts."""

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from benchmarks.registry import get as get_benchmark
from benchmarks.spec import Better, Kind
from engine.build import kconfig
from engine.build.arch import profile
from stats import calibration, jiffies, methods, verdicts
from stats.battery import analyse
from stats.design import Design
from stats.inputs import BenchmarkFailures, MetricInput, RunSamples, run_values
from webapp import logs
from webapp.analysis.models import JiffyDispersion, MetricVerdict
from webapp.comparisons.models import Comparison, Measurement, Run
from webapp.states import Result, State
from webapp.trees.models import Build

log = logs.get(__name__)


def counted_runs(comparison: Comparison) -> "QuerySet[Run]":
    """Runs that are data: finished ok, untraced. Failed, lost and infrastructure-failed runs
    never are, nor diagnostic runs (traced: tracing perturbs what it traces)."""
    return comparison.runs.filter(state=State.DONE, result=Result.OK, traced=False)


def failure_counts(comparison: Comparison) -> list[BenchmarkFailures]:
    """Per benchmark, each side's finished runs by outcome: ok, the kernel's failures and
    the host's (methods.KERNEL_FAILURES / HOST_FAILURES). Every attempt counts, replaced
    or not; queued and running ones do not yet."""
    outcomes: dict[tuple[str, str], list[str]] = defaultdict(list)
    rows = comparison.runs.filter(state=State.DONE, traced=False).values_list(
        "benchmark", "side", "result", "error_code")  # fmt: skip
    for bench, side, result, code in rows:
        outcomes[bench, side].append("ok" if result == Result.OK else code or result)
    return [
        BenchmarkFailures(
            name,
            methods.failure_counts(outcomes[name, "A"]),
            methods.failure_counts(outcomes[name, "B"]),
        )
        for name in comparison.benchmarks
    ]


def build_hz(build: Build | None) -> int | None:
    """The tick rate the build's kernel runs at: from its arch base config and the
    benchmarks' Kconfig lines, as requested. The config step refuses a build where a
    requested option did not survive olddefconfig (CONFIG_DROPPED), so the request is
    what the kernel has. None: no build, or a config that names no HZ."""
    if build is None:
        return None
    merged = kconfig.merge(profile(build.arch), build.kconfig.splitlines())
    return kconfig.hz(kconfig.parse(merged))


def comparison_jiffy_ms(comparison: Comparison) -> float | None:
    """A jiffy's length in ms for both sides' kernels; None unless both HZ are known and
    equal (whole jiffies of two tick rates do not compare)."""
    hz_a, hz_b = build_hz(comparison.build_a), build_hz(comparison.build_b)
    return jiffies.jiffy_ms(hz_a) if hz_a is not None and hz_a == hz_b else None


def metric_inputs(comparison: Comparison) -> list[MetricInput]:
    """The engine's input for every metric of every benchmark of the comparison."""
    samples: dict[tuple[str, str, str], list[RunSamples]] = defaultdict(list)
    rows = Measurement.objects.filter(run__in=counted_runs(comparison)).select_related("run")
    for m in rows.order_by("run__order"):
        key = (m.benchmark, m.metric, m.run.side)
        samples[key].append(RunSamples(m.run.order, tuple(m.samples), m.run.contended))
    inputs = []
    jiffy = comparison_jiffy_ms(comparison)
    for name in comparison.benchmarks:
        spec = get_benchmark(name).spec
        for metric in spec.metrics:
            runs_a, runs_b = samples[name, metric.name, "A"], samples[name, metric.name, "B"]
            if not runs_a and not runs_b:
                continue
            inputs.append(
                MetricInput(
                    benchmark=name,
                    name=metric.name,
                    unit=metric.unit,
                    per_run_samples=metric.kind is Kind.SAMPLES,
                    lower_is_better=metric.better is Better.LOWER,
                    primary=metric.primary,
                    runs_a=runs_a,
                    runs_b=runs_b,
                    threshold=metric.threshold,
                    threshold_is_absolute=metric.threshold_is_absolute,
                    jiffy_ms=jiffy if metric.jiffies else None,
                    tail_share_primary=metric.tail_share_primary,
                )
            )
    return inputs


def design_for(comparison: Comparison, *, allow_few_runs: bool = False) -> Design:
    return Design(
        alpha=comparison.alpha, min_runs=comparison.min_runs, max_runs=comparison.max_runs,
        step=comparison.min_runs, default_threshold_pct=comparison.threshold_pct,
        seed=comparison.seed % 2**32, allow_few_runs=allow_few_runs,
        contention_imbalance=settings.RCUBENCH_CONTENTION_IMBALANCE,
    )  # fmt: skip


def analyse_comparison(comparison_id: int, *, allow_few_runs: bool = False) -> verdicts.Analysis:
    """Analyse the comparison's counted runs and replace its stored verdicts.

    A primary that crossed at an earlier look (read from the stored rows before they are
    replaced) stays crossed, and a verdict it reported is final: its row, from the look
    that decided it, is kept (STATS.md v3). Raises verdicts.TooFewRuns below the design's
    minimum (nothing is stored then). The returned Analysis says whether the comparison
    needs more runs and how many.
    """
    comparison = Comparison.objects.get(pk=comparison_id)
    design = design_for(comparison, allow_few_runs=allow_few_runs)
    analysis = analyse(metric_inputs(comparison), design, failure_counts(comparison),
                       crossed_before(comparison))  # fmt: skip
    with transaction.atomic():
        _store(comparison, analysis.results)
        Comparison.objects.filter(pk=comparison.pk).update(verdict=analysis.verdict)
    return analysis


def crossed_before(comparison: Comparison) -> dict[tuple[str, str, str], verdicts.Crossed]:
    """The primary statistics whose stored rows crossed their boundary, by result key, with
    the verdict and look stored (rows before "crossed" was stored: a decided verdict is
    only ever given to a crossed primary)."""
    rows = comparison.verdicts.filter(is_primary=True).exclude(statistic=verdicts.FAILURE_STATISTIC)
    return {
        (row.benchmark, row.metric, row.statistic): verdicts.Crossed(row.verdict, row.look)
        for row in rows
        if row.details.get("crossed") or row.verdict in verdicts.DECIDED
    }


def analyse_failures(comparison: Comparison) -> list[verdicts.StatResult]:
    """Test each benchmark's failure rate now (a side spent its failure budget): store the
    failure-rate rows, keeping the last look's metric rows, and return them. The caller
    decides what a reliability regression ends (the orchestrator holds the row lock)."""
    # The look under way; the floor of runs does not matter to a test on counts.
    design = design_for(comparison, allow_few_runs=True)
    look = design.look_at(max(comparison.scheduled_per_side, comparison.min_runs))
    looks = len(design.looks)
    results = [verdicts.failure_result(f, look, looks) for f in failure_counts(comparison)]
    with transaction.atomic():
        _store(comparison, results, replace_all=False)
    return results


def _store(
    comparison: Comparison, results: list[verdicts.StatResult], *, replace_all: bool = True
) -> None:
    """Write the results' rows; with replace_all, delete the rows they do not cover."""
    kept = []
    for r in results:
        if "decided_at_look" in r.details:  # final (verdicts.keep): its deciding look's row
            row = MetricVerdict.objects.filter(
                comparison=comparison, benchmark=r.benchmark, metric=r.metric,
                statistic=r.statistic,
            ).first()  # fmt: skip
            if row is not None:
                kept.append(row.pk)
                continue
        verdict, _ = MetricVerdict.objects.update_or_create(
            comparison=comparison, benchmark=r.benchmark, metric=r.metric,
            statistic=r.statistic, defaults=_fields(r),
        )  # fmt: skip
        kept.append(verdict.pk)
    if replace_all:
        MetricVerdict.objects.filter(comparison=comparison).exclude(pk__in=kept).delete()


def _fields(r: verdicts.StatResult) -> dict[str, object]:
    shift, low, high = r.shift, r.ci_low, r.ci_high
    if r.statistic == verdicts.FAILURE_STATISTIC:  # rates, in details: no % shift of a median
        shift = low = high = None
    elif not r.relative:  # absolute (memory): stored as % of A's median too, for one sortable
        # column; none when A's median is 0 (the absolute shift, in details, stands alone)
        base = r.median_a
        shift, low, high = (None if v is None or base == 0 else 100 * v / base
                            for v in (shift, low, high))  # fmt: skip
    fields: dict[str, object] = {
        "is_primary": r.is_primary, "look": r.look, "n_a": r.n_a, "n_b": r.n_b,
        "median_a": r.median_a, "median_b": r.median_b, "shift_pct": shift,
        "ci_low_pct": low, "ci_high_pct": high, "p_value": r.p_value,
        "p_adjusted": r.p_adjusted, "p_mannwhitney": r.p_mannwhitney,
        "p_median": r.p_median, "prob_b_gt_a": r.prob_b_gt_a,
        "cliffs_delta": r.cliffs_delta, "verdict": r.verdict, "warnings": r.warnings,
        "details": {
            **{k: _jsonable(v) for k, v in r.details.items()}, "unit": r.unit,
            "relative": r.relative, "shift": r.shift, "ci": [r.ci_low, r.ci_high],
            "threshold": r.threshold, "adjustment": r.adjustment,
            "lower_is_better": r.lower_is_better, "crossed": r.crossed,
        },
    }  # fmt: skip
    bad = verdicts.non_finite(fields)  # the engine checked its results; this, what is derived
    if bad:
        raise verdicts.UnreportableResult(f"{r.benchmark}/{r.metric}[{r.statistic}]: not a "
                                        f"finite number: {', '.join(bad)}")  # fmt: skip
    return fields


def _jsonable(value: object) -> object:
    """NumPy scalars as Python numbers, for the JSON field (NaN and inf never get here:
    verdicts.check_reportable refuses them)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _build_runs(build: Build, benchmark: str) -> "Iterable[Run]":
    """The build's ok runs of a benchmark, on whichever side it was, in finishing order."""
    return Run.objects.filter(
        Q(comparison__build_a=build, side=Run.Side.A) | Q(comparison__build_b=build,
                                                          side=Run.Side.B),
        benchmark=benchmark, state=State.DONE, result=Result.OK, traced=False,
    ).order_by("finished_at", "pk")  # fmt: skip


class NotJiffies(ValueError):
    """A dispersion index asked of a metric not in jiffies, or of a build whose HZ is
    unknown, or of a comparison whose two kernels are not one (not an A/A)."""


def _jiffy_metric(benchmark: str, metric: str | None) -> str:
    spec = get_benchmark(benchmark).spec
    chosen = spec.metric(metric) if metric else spec.primary
    if not chosen.jiffies:
        raise NotJiffies(f"{benchmark}/{chosen.name} is not measured in jiffies")
    return chosen.name


def _store_dispersion(
    build: Build, benchmark: str, metric: str, source: str, runs: "Iterable[Run]"
) -> JiffyDispersion:
    hz = build_hz(build)
    if hz is None:
        raise NotJiffies(f"build {build.pk}: its config names no HZ")
    jiffy = jiffies.jiffy_ms(hz)
    rows = Measurement.objects.filter(run__in=runs, metric=metric).order_by("run__order")
    boots = [jiffies.quantise(methods.as_values(m.samples, f"run {m.run_id}"), jiffy)
             for m in rows]  # fmt: skip
    d = jiffies.dispersion(boots)
    row = JiffyDispersion.objects.create(
        build=build, benchmark=benchmark, metric=metric, source=source, hz=hz, boots=d.boots,
        samples=d.samples, mode=d.mode, share_above=d.share_above, index=d.index,
        p_value=d.p_value,
    )  # fmt: skip
    log.info("jiffy dispersion stored", build=build.pk, benchmark=benchmark, metric=metric,
             source=source, boots=d.boots, index=d.index)  # fmt: skip
    return row


def dispersion_of_build(build: Build, benchmark: str, metric: str | None = None) -> JiffyDispersion:
    """D from every stored ok boot of one build (STATS.md v3), stored for its reports."""
    name = _jiffy_metric(benchmark, metric)
    return _store_dispersion(build, benchmark, name, "build runs", _build_runs(build, benchmark))


def dispersion_of_comparison(
    comparison: Comparison, benchmark: str, metric: str | None = None
) -> JiffyDispersion:
    """D from the counted boots of both sides of an A/A comparison (one kernel on both:
    the same commit, arch, config and extra command line), stored for the build."""
    name = _jiffy_metric(benchmark, metric)
    a, b = comparison.build_a, comparison.build_b
    same = (a is not None and b is not None and comparison.cmdline_a == comparison.cmdline_b
            and (a.sha, a.arch, a.config_hash) == (b.sha, b.arch, b.config_hash))  # fmt: skip
    if not same or a is None:
        raise NotJiffies(f"comparison {comparison.pk} is not an A/A comparison: its two "
                         "kernels differ (commit, arch, config or command line)")  # fmt: skip
    runs = counted_runs(comparison).filter(benchmark=benchmark)
    return _store_dispersion(a, benchmark, name, f"comparison {comparison.pk}", runs)


def latest_dispersion(build: Build | None, benchmark: str, metric: str) -> JiffyDispersion | None:
    """The last D stored for a build's metric, for its reports."""
    if build is None:
        return None
    return build.jiffy_dispersions.filter(benchmark=benchmark, metric=metric).first()


def calibrate_build(
    build: Build, benchmark: str, metric: str | None = None, *, block: int = 4,
    splits: int = 1000, seed: int = 0,
) -> tuple[str, str, calibration.Calibration]:  # fmt: skip
    """A/A calibration from the stored runs of one build, in the order they finished."""
    spec = get_benchmark(benchmark).spec
    chosen = spec.metric(metric) if metric else spec.primary
    statistic = "p50" if chosen.kind is Kind.SAMPLES else "value"
    runs = _build_runs(build, benchmark)
    rows = {
        m.run_id: RunSamples(m.run.order, tuple(m.samples))
        for m in Measurement.objects.filter(run__in=runs, metric=chosen.name).select_related("run")
    }
    ordered = [rows[r.pk] for r in runs if r.pk in rows]
    values = run_values(ordered, statistic, f"{benchmark}/{chosen.name}")
    design = Design()
    cal = calibration.aa_calibration(values, block=block, splits=splits,
                                     mde_alpha=design.alpha_at(len(design.looks)),
                                     rng=np.random.default_rng(seed))  # fmt: skip
    return chosen.name, statistic, cal
