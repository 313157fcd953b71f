"""What the comparison report shows, gathered from the database (the views stay thin).

Header facts, verdict rows, the figure sections (figures.py draws them, from each
benchmark's spec: nothing here knows a benchmark by name) and the page's assembly. The
reproducer command is in reproducer.py, the CSV and JSON downloads in exports.py.
"""

import gzip
import logging
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, lru_cache
from typing import Any, Protocol

import numpy as np
import plotly
import plotly.io as pio
import plotly.offline
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import caches
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, Model, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Left, Length, Right
from django.http import QueryDict
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import get_current_timezone_name

from benchmarks import registry
from benchmarks.spec import BenchmarkSpec, Kind
from stats.methods import RELIABILITY_ALPHA, FailureCounts
from stats.verdicts import FAILURE_STATISTIC, SEVERITY, contention_differs
from webapp import access
from webapp.access import AnyUser
from webapp.alerts.models import Alert
from webapp.analysis.models import MetricVerdict
from webapp.analysis.services import counted_runs, failure_counts
from webapp.comparisons import orchestrator
from webapp.comparisons.models import Comparison, ComparisonState, Measurement, Run, Target
from webapp.comparisons.progress import Progress, progress, progress_many
from webapp.comparisons.reproducer import public_url
from webapp.comparisons.reproducer import reproducer as reproducer  # re-exported for old callers
from webapp.lab.models import LabHost
from webapp.memo import LruMemo
from webapp.reports import figures
from webapp.reports.filters import ComparisonFilter
from webapp.states import Result, State
from webapp.trees.models import Build, PatchSeries, Revision, Tree
from webapp.watch.models import ChangePoint, Push, WatchPolicy

log = logging.getLogger(__name__)

PLOTLY_VERSION: str = plotly.__version__
STATISTIC_ORDER = ("value", "p50", "mean", "p90", "p99", "max")
BUILD_LOG_TAIL_LINES = 60


# --- header -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SeriesFacts:
    id: int
    subject: str
    message_id: str
    author: str
    patches: int


@dataclass(frozen=True)
class BuildFacts:
    id: int
    state: str
    result: str
    error_code: str
    error_message: str
    sha: str
    arch: str
    seconds: float | None
    cached: bool
    toolchain: str
    log_tail: str  # the end of the build log, for failed builds only

    @property
    def status(self) -> str:
        return build_status(self)


@dataclass(frozen=True)
class KernelFacts:
    side: str
    tree: str
    ref: str
    base_sha: str
    sha: str
    series: SeriesFacts | None
    patch_fallback: bool  # the submitter allowed git am -3, then patch -F3 (fuzz)
    applied_with: str  # git am, git am -3 or patch -F3, once built
    apply_notes: str
    cmdline: str
    build: BuildFacts | None

    @property
    def build_status(self) -> str:
        return build_status(self.build)


@dataclass(frozen=True)
class SideRuns:
    side: str
    total: int = 0
    ok: int = 0
    failed: int = 0
    incomplete: int = 0
    unfinished: int = 0  # queued or running
    errors: dict[str, int] = field(default_factory=dict)  # error code -> runs
    # The host during the data runs (ok): how many have a record of other processes' CPU
    # share, how many of those were contended, their median share; and how many were pinned.
    measured: int = 0
    contended: int = 0
    median_busy_share: float | None = None
    pinned: int = 0

    @property
    def contended_fraction(self) -> float | None:
        return self.contended / self.measured if self.measured else None

    @property
    def median_busy(self) -> str:
        return "\u2013" if self.median_busy_share is None else f"{self.median_busy_share:.1%}"


@dataclass(frozen=True)
class TargetFacts:
    name: str
    kind: str
    arch: str
    cpus: int
    topology: str
    memory_mb: int
    machine: str


@dataclass(frozen=True)
class Header:
    id: int
    state: str
    result: str
    error_code: str
    error_message: str
    verdict: str
    benchmarks: list[str]
    min_runs: int
    max_runs: int
    alpha: float
    threshold_pct: float
    seed: int
    trigger: str
    requested_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    kernels: tuple[KernelFacts, KernelFacts]
    target: TargetFacts
    runs: tuple[SideRuns, SideRuns]
    contention_warning: str = ""  # contention differs between the sides' data runs
    contention_share: float = 0.0  # RCUBENCH_CONTENTION_SHARE, for the legend
    lab_hosts: tuple[str, ...] = ()  # a lab pool's hosts the runs used, with their topology

    @property
    def done(self) -> bool:
        return self.state == ComparisonState.DONE

    @property
    def ended_badly(self) -> bool:
        return self.done and self.result != Result.OK


def header(c: Comparison) -> Header:
    runs = run_counts(c)
    return Header(
        id=c.pk, state=c.state, result=c.result, error_code=c.error_code,
        error_message=c.error_message, verdict=c.verdict, benchmarks=list(c.benchmarks),
        min_runs=c.min_runs, max_runs=c.max_runs, alpha=c.alpha,
        threshold_pct=c.threshold_pct, seed=c.seed, trigger=c.trigger,
        requested_by=c.requested_by, created_at=c.created_at, started_at=c.started_at,
        finished_at=c.finished_at,
        kernels=(_kernel("A", c.revision_a, c.build_a, c.cmdline_a),
                 _kernel("B", c.revision_b, c.build_b, c.cmdline_b)),
        target=_target(c.target), runs=runs,
        contention_warning=contention_warning(*runs, settings.RCUBENCH_CONTENTION_IMBALANCE),
        contention_share=settings.RCUBENCH_CONTENTION_SHARE,
        lab_hosts=_lab_hosts(c) if c.target.is_lab else (),
    )  # fmt: skip


def _lab_hosts(c: Comparison) -> tuple[str, ...]:
    """The lab hosts the comparison's runs ran on: which machines A and B were measured on."""
    names = c.runs.exclude(host="").values("host")
    return tuple(f"{h.name}: {h.topology}" for h in LabHost.objects.filter(name__in=names))


def _kernel(side: str, rev: Revision, build: Build | None, cmdline: str) -> KernelFacts:
    series = None
    if rev.series is not None:
        s = rev.series
        series = SeriesFacts(s.pk, s.subject, s.message_id, s.author, s.patches.count())
    return KernelFacts(
        side=side, tree=rev.tree.name, ref=rev.ref, base_sha=rev.base_sha, sha=rev.sha,
        series=series, patch_fallback=rev.patch_fallback, applied_with=rev.applied_with,
        apply_notes=rev.apply_notes, cmdline=cmdline,
        build=_build(build) if build is not None else None,
    )  # fmt: skip


def _build(b: Build) -> BuildFacts:
    failed = b.state == State.DONE and b.result != Result.OK
    tail = "\n".join(b.log.splitlines()[-BUILD_LOG_TAIL_LINES:]) if failed else ""
    return BuildFacts(
        id=b.pk, state=b.state, result=b.result, error_code=b.error_code,
        error_message=b.error_message, sha=b.sha, arch=b.arch, seconds=b.seconds,
        cached=b.cached, toolchain=b.toolchain, log_tail=tail,
    )  # fmt: skip


def _target(t: Target) -> TargetFacts:
    return TargetFacts(
        name=t.name, kind=t.kind, arch=t.arch, cpus=t.cpus,
        topology=f"{t.sockets} sockets x {t.cores} cores x {t.threads} threads",
        memory_mb=t.memory_mb, machine=t.machine,
    )  # fmt: skip


def run_counts(c: Comparison) -> tuple[SideRuns, SideRuns]:
    """Runs per side by outcome, with the error codes of those that are not data."""
    counts: dict[str, Counter[str]] = {"A": Counter(), "B": Counter()}
    errors: dict[str, Counter[str]] = {"A": Counter(), "B": Counter()}
    rows = c.runs.values("side", "state", "result", "error_code").annotate(n=Count("pk"))
    for row in rows.order_by():
        side, n = row["side"], row["n"]
        counts[side]["total"] += n
        if row["state"] != State.DONE:
            counts[side]["unfinished"] += n
        else:
            counts[side][row["result"]] += n
        if row["error_code"]:
            errors[side][row["error_code"]] += n

    shares: dict[str, list[float]] = {"A": [], "B": []}
    contended: Counter[str] = Counter()
    pinned: Counter[str] = Counter()
    data = c.runs.filter(state=State.DONE, result=Result.OK)
    for side, share, flagged, pin in data.values_list(
        "side", "host_busy_share", "contended", "pinned"
    ).order_by():
        if share is not None:
            shares[side].append(share)
            contended[side] += bool(flagged)
        pinned[side] += bool(pin)

    def side_runs(side: str) -> SideRuns:
        n = counts[side]
        return SideRuns(
            side, total=n["total"], ok=n[Result.OK], failed=n[Result.FAILED],
            incomplete=n[Result.INCOMPLETE], unfinished=n["unfinished"],
            errors=dict(sorted(errors[side].items())), measured=len(shares[side]),
            contended=contended[side], pinned=pinned[side],
            median_busy_share=statistics.median(shares[side]) if shares[side] else None,
        )  # fmt: skip

    return side_runs("A"), side_runs("B")


def contention_warning(a: SideRuns, b: SideRuns, imbalance: float) -> str:
    """A warning when the share of contended data runs differs between the sides by more
    than `imbalance`: the host, not the kernel, may then explain a shift (v2 spec: such a
    difference holds regression/improvement verdicts until more quiet runs are in; that
    rule is the analysis engine's, this is what the report says)."""
    if not contention_differs((a.contended, a.measured), (b.contended, b.measured), imbalance):
        return ""
    return (
        f"Host contention differs between the sides: {a.contended} of A's {a.measured} "
        f"and {b.contended} of B's {b.measured} measured data runs were contended (other "
        f"processes used more than {settings.RCUBENCH_CONTENTION_SHARE:.0%} of the host's "
        f"CPU time), more than {imbalance:.0%} apart. A shift between A and B may come from "
        f"the host rather than the kernel; a regression or improvement needs more quiet runs."
    )


# --- verdicts -------------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictRow:
    verdict: MetricVerdict
    unit: str
    relative: bool  # False: memory metrics, tested on the absolute shift B - A in the unit

    @property
    def median_a(self) -> str:
        return _num(self.verdict.median_a)

    @property
    def median_b(self) -> str:
        return _num(self.verdict.median_b)

    @property
    def shift(self) -> str:
        v = self.verdict
        return "n/a" if v.shift_pct is None else f"{v.shift_pct:+.2f}%"

    @property
    def ci(self) -> str:
        v = self.verdict
        if v.ci_low_pct is None or v.ci_high_pct is None:
            return ""
        return f"[{v.ci_low_pct:+.2f}, {v.ci_high_pct:+.2f}]"

    @property
    def absolute_shift(self) -> str:
        """B - A in the unit with its CI, for metrics whose threshold is absolute."""
        d = self.verdict.details
        shift, ci = d.get("shift"), d.get("ci")
        if self.relative or not isinstance(shift, int | float):
            return ""
        text = f"{shift:+.6g} {self.unit}"
        if isinstance(ci, list) and len(ci) == 2:
            text += f" [{ci[0]:+.6g}, {ci[1]:+.6g}]"
        return text

    @property
    def p_value(self) -> str:
        return _p(self.verdict.p_value)

    @property
    def p_adjusted(self) -> str:
        return _p(self.verdict.p_adjusted)

    @property
    def adjustment(self) -> str:
        """The family, and the look's boundary the row was held to (Holm: the raw p
        against its step's boundary; BH: the adjusted p against the look's)."""
        d = self.verdict.details
        family, boundary = str(d.get("adjustment", "")), d.get("boundary")
        if family and isinstance(boundary, float | int):
            return f"{family}, boundary {boundary:.2g}"
        return family

    @property
    def p_method(self) -> str:
        """How the primary p was obtained: exact, permutation or t-approximation ("" for
        verdicts stored before the engine recorded it)."""
        return str(self.verdict.details.get("p_method") or "")

    @property
    def p_permutations(self) -> int | None:
        b = self.verdict.details.get("p_permutations")
        return b if isinstance(b, int) else None

    @property
    def p_marker(self) -> str:
        """The short mark beside p that P_MARKERS explains."""
        return P_MARKERS.get(self.p_method, ("", ""))[0]

    @property
    def p_method_text(self) -> str:
        """The marker's meaning for this row (a tooltip), with the permutation count."""
        mark, text = P_MARKERS.get(self.p_method, ("", ""))
        return text.format(b=f"{self.p_permutations or 0:,}") if mark else ""

    @property
    def sign_test(self) -> str:
        """McKenney's count: "k/n B runs above A's median, p=..." (run-level rows only)."""
        s = self.verdict.details.get("sign_test")
        if not isinstance(s, dict):
            return ""
        if s.get("p") is None:
            return "sign test undefined"
        ties = int(s.get("ties") or 0)
        left_out = f" ({ties} tie{'s' if ties != 1 else ''} left out)" if ties else ""
        return f"{s['k']}/{s['n']} B runs above A's median{left_out}, p={_p(s['p'])}"

    @property
    def sign_direction(self) -> str:
        """Which way "above A's median" points for this metric."""
        s = self.verdict.details.get("sign_test")
        return f"above is {s['above_is']}" if isinstance(s, dict) and "above_is" in s else ""

    @property
    def mood(self) -> str:
        """Mood's median test p, or why it has none (run-level rows only)."""
        if not isinstance(self.verdict.details.get("sign_test"), dict):
            return ""
        p = self.verdict.p_median
        return "Mood undefined" if p is None else f"Mood p={_p(p)}"

    @property
    def cross_checks(self) -> str:
        """The sign test and Mood's test on one line (the CLI's column)."""
        if not self.sign_test:
            return ""
        return f"{self.sign_test} ({self.sign_direction}); {self.mood}"


# The mark beside each primary-test p and what it means, in the report's order (STATS.md
# v2: a p below 1/(B+1) is exact or marked approximate).
P_MARKERS = {
    "permutation": ("P", "permutation p from {b} random relabellings of whole runs (raised "
                         "where the look's boundary needed it), never below 1/(B + 1)"),
    # Only in verdicts stored before the v2 rules, which no longer produce it.
    "t-approximation": ("≈", "far-tail approximation: none of {b} relabellings was as extreme, "
                             "so p is Brunner-Munzel's t approximation, below what the "
                             "permutations resolve"),
    "exact": ("E", "exact: every relabelling of the runs is as extreme (W = 0, p = 1), or "
                   "the runs are completely separated (only that split and its mirror: "
                   "p = 2 / C(n_A + n_B, n_A))"),
}  # fmt: skip


def p_method_legend(rows: list[VerdictRow]) -> str:
    """One line explaining the marks the rows carry, with their permutation counts."""
    b = " or ".join(f"{n:,}" for n in sorted({r.p_permutations for r in rows
                                               if r.p_permutations})) or "B"  # fmt: skip
    used = {r.p_method for r in rows}
    return "; ".join(f"{mark} {text.format(b=b)}" for method, (mark, text) in P_MARKERS.items()
                     if method in used)  # fmt: skip


def verdict_rows(c: Comparison) -> list[VerdictRow]:
    """The metrics' verdicts: the primary metrics first, then the others, each group the
    most severe first (the engine's severity order), then by benchmark, metric and
    statistic. The failure-rate rows are in reliability_rows."""
    rows = []
    for v in MetricVerdict.objects.filter(comparison=c).exclude(statistic=FAILURE_STATISTIC):
        rows.append(VerdictRow(v, verdict_unit(v), bool(v.details.get("relative", True))))
    rows.sort(key=lambda r: verdict_order(r.verdict))
    return rows


def verdict_order(v: MetricVerdict) -> tuple[bool, int, str, str, int]:
    """The report's order of verdicts: primary first, the most severe first, then
    benchmark, metric and statistic."""
    severity = SEVERITY.index(v.verdict) if v.verdict in SEVERITY else len(SEVERITY)
    stat = (STATISTIC_ORDER.index(v.statistic) if v.statistic in STATISTIC_ORDER
            else len(STATISTIC_ORDER))  # fmt: skip
    return not v.is_primary, severity, v.benchmark, v.metric, stat


def _spec(benchmark: str) -> BenchmarkSpec | None:
    # Through the registry module at each call: a benchmark registered later is found too.
    b = registry.BENCHMARKS.get(benchmark)
    return b.spec if b else None


def verdict_unit(v: MetricVerdict) -> str:
    """The verdict's unit: as the engine recorded it, else as the benchmark's spec says."""
    return str((v.details or {}).get("unit") or _spec_unit(v.benchmark, v.metric))


def _spec_unit(benchmark: str, metric: str) -> str:
    spec = _spec(benchmark)
    try:
        return spec.metric(metric).unit if spec else ""
    except KeyError:
        return ""


def _num(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.0f}" if abs(x) >= 1e5 else f"{x:.5g}"


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.3g}"


# --- reliability ----------------------------------------------------------------------


@dataclass(frozen=True)
class SideFailures:
    side: str
    attempts: int  # ok + the kernel's failures: what the test counts
    ok: int
    kernel_failures: int
    host_failures: int  # infra-error, lost, cancelled: not the kernel's, not tested
    by_outcome: dict[str, int]  # every failure code, the kernel's and the host's

    @property
    def rate(self) -> str:
        return f"{100 * self.kernel_failures / self.attempts:.3g}%" if self.attempts else "n/a"


@dataclass(frozen=True)
class ReliabilityRow:
    """One benchmark's failure counts now, and the last test of them (at a look, or
    when a run slot used up its attempts); None and "" before the first."""

    benchmark: str
    sides: tuple[SideFailures, SideFailures]
    p_value: float | None  # Boschloo's exact test, one-sided: B fails more often
    p_fisher: float | None  # the conditional exact test, shown, not deciding
    alpha: float
    verdict: str
    tested_on: str  # the attempts the stored test counted, when they differ from now's

    @property
    def p(self) -> str:
        return _p(self.p_value)

    @property
    def fisher(self) -> str:
        return _p(self.p_fisher)


def _side_failures(side: str, f: FailureCounts) -> SideFailures:
    return SideFailures(side, f.attempts, f.ok, f.kernel_failures, f.host_failures,
                        dict(f.failures))  # fmt: skip


def reliability_rows(c: Comparison) -> list[ReliabilityRow]:
    """Per benchmark and side: attempts, ok, the kernel's failures by outcome, the host's,
    with the stored failure-rate test (STATS.md v2: failure rates are data)."""
    tested = {v.benchmark: v for v in
              MetricVerdict.objects.filter(comparison=c, statistic=FAILURE_STATISTIC)}  # fmt: skip
    rows = []
    for f in failure_counts(c):
        v = tested.get(f.benchmark)
        sides = (_side_failures("A", f.a), _side_failures("B", f.b))
        tested_on = ""
        if v is not None and (v.n_a, v.n_b) != (f.a.attempts, f.b.attempts):
            tested_on = f"tested on {v.n_a} (A) and {v.n_b} (B) attempts, at look {v.look}"
        d = v.details if v is not None else {}
        p_fisher, alpha = d.get("p_fisher"), d.get("alpha", RELIABILITY_ALPHA)
        rows.append(ReliabilityRow(
            f.benchmark, sides, v.p_value if v is not None else None,
            float(p_fisher) if isinstance(p_fisher, float | int) else None,
            float(alpha) if isinstance(alpha, float | int) else RELIABILITY_ALPHA,
            v.verdict if v is not None else "", tested_on,
        ))  # fmt: skip
    return rows


# --- figures --------------------------------------------------------------------------


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
    per metric its pooled ECDF and per-run strip plot, plus a log histogram for latencies,
    and first the figures the benchmark's spec declares over several metrics."""
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
        spec = _spec(bench)
        present = [m for (b, m) in data if b == bench]
        sections.append(
            BenchmarkFigures(
                benchmark=bench,
                description=spec.description if spec else "",
                overview=_overview(spec, {m: data[bench, m] for m in present}),
                metrics=[_metric_figures(bench, m, data[bench, m], spec)
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
    bench: str, metric: str, d: _MetricData, spec: BenchmarkSpec | None
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
        figures.runs_figure(f"{name}: per run, in run order", d.unit, d.runs),
    ]
    if latency:
        figs.append(figures.log_histogram(f"{name}: histogram", d.unit, pooled))
    return MetricFigures(bench, metric, d.unit, primary, [_html(f) for f in figs])


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
            out.append(_html(figures.sweep_figure(f, per_run, unit=unit)))
    return out


# Selection and hover-mode tools mean nothing on these charts; fewer buttons leave the title clear.
_NO_BUTTONS = ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian",
               "hoverCompareCartesian"]  # fmt: skip


def _html(fig: Any) -> SafeString:
    # Plotly's JS is loaded once by the page (plotly_js below), never from a CDN.
    html = pio.to_html(
        fig, include_plotlyjs=False, full_html=False,
        config={"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": _NO_BUTTONS},
    )  # fmt: skip
    return mark_safe(html)  # noqa: S308 - plotly's own markup and JSON-escaped data


# The figures of a done comparison, cached: drawing them (every sample of every counted run,
# through plotly) is most of a report page's cost, and a done comparison's runs and
# measurements never change. The cache ("reports", settings.CACHES: files under the data
# dir, shared by every gunicorn process and kept across restarts) is keyed by what would
# change with them: the database, the comparison (its pk and creation time, so that a
# reused pk of another database or a recreated one never matches), when it finished (a
# comparison that was ever reopened and finished again gets a new key) and FIGURES_VERSION.
# Bump FIGURES_VERSION whenever figures.py or the sections' markup changes what is drawn.
# Comparisons that are not done are never cached (their figures are not drawn at all).
FIGURES_VERSION = 1
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
    cache = caches[FIGURES_CACHE]
    try:
        hit = cache.get(key)
    except Exception:  # noqa: BLE001 - any cache failure: draw them instead
        log.warning("report cache: cannot read %s", key, exc_info=True)
        hit = None
    if isinstance(hit, list):
        return hit
    sections = figure_sections(c)
    try:
        cache.set(key, sections)
    except Exception:  # noqa: BLE001 - the page is served all the same
        log.warning("report cache: cannot write %s", key, exc_info=True)
    return sections


@lru_cache(maxsize=1)
def plotly_js() -> tuple[bytes, bytes]:
    """The installed plotly package's plotly.min.js, raw and gzipped (computed once)."""
    raw = plotly.offline.get_plotlyjs().encode()
    return raw, gzip.compress(raw, compresslevel=6)


# --- runs -----------------------------------------------------------------------------


def runs_table(c: Comparison) -> list[Run]:
    """Every run in schedule order, without its console log (fetched by its own view)."""
    return list(c.runs.defer("console_log").order_by("order"))


# --- links ----------------------------------------------------------------------------


def report_url(c: Comparison) -> str:
    return public_url() + reverse("reports:comparison", args=[c.pk])


# --- pages ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    header: Header
    verdicts: list[VerdictRow]
    reliability: list[ReliabilityRow]
    sections: list[BenchmarkFigures]  # empty until the comparison is done
    runs: list[Run]
    reproducer: str
    plotly_version: str = PLOTLY_VERSION

    @property
    def p_legend(self) -> str:
        return p_method_legend(self.verdicts)


def comparison_report(c: Comparison) -> Report:
    """Everything the report page shows. Figures load every sample of the comparison, so
    they are drawn once it is done, not on each refresh of a running one, and then come
    from the cache (cached_figure_sections)."""
    return Report(
        header=header(c),
        verdicts=verdict_rows(c),
        reliability=reliability_rows(c),
        sections=cached_figure_sections(c) if c.state == ComparisonState.DONE else [],
        runs=runs_table(c),
        reproducer=reproducer(c),
    )


def report_queryset() -> "QuerySet[Comparison]":
    """Comparisons with what the report reads of them joined in; the big blobs (build logs,
    mboxes) are left to be fetched only where shown."""
    return Comparison.objects.select_related(
        "revision_a__tree", "revision_a__series", "revision_b__tree", "revision_b__series",
        "build_a", "build_b", "target",
    ).defer(
        "build_a__log", "build_b__log", "revision_a__series__mbox", "revision_b__series__mbox"
    )  # fmt: skip


# What a list row shows of a comparison and its progress reads (progress.py: the builds'
# state and result for those still building), and what the visibility filter reads; nothing
# else is fetched. The names of its trees, series, target and submitter are scalar
# subqueries (list_names) rather than joins: a join of all ten tables took PostgreSQL
# ~8-12 ms to plan at each request (more than the page's rows took to read), five tables
# and six subqueries under 1 ms. Each subquery is a primary-key lookup per row shown.
LIST_COLUMNS = (
    "id", "created_at", "benchmarks", "state", "result", "error_code", "verdict", "trigger",
    "visibility", "min_runs", "scheduled_per_side", "target_id", "submitted_by_id",
    "build_a_id", "build_b_id", "revision_a__ref", "revision_a__tree_id",
    "revision_a__series_id", "revision_b__ref", "revision_b__tree_id", "revision_b__series_id",
    "build_a__state", "build_a__result", "build_b__state", "build_b__result",
)  # fmt: skip


def _lookup(model: type[Model], ref: str, column: str) -> Subquery:
    return Subquery(model._default_manager.filter(pk=OuterRef(ref)).order_by().values(column)[:1])


def list_names() -> dict[str, Subquery]:
    """The names a list row shows, as annotations: tree_a_name, series_a_subject (None
    without a series), tree_b_name, series_b_subject, target_name, submitter_name (None:
    submitted from the operator's command line)."""
    return {
        "tree_a_name": _lookup(Tree, "revision_a__tree_id", "name"),
        "series_a_subject": _lookup(PatchSeries, "revision_a__series_id", "subject"),
        "tree_b_name": _lookup(Tree, "revision_b__tree_id", "name"),
        "series_b_subject": _lookup(PatchSeries, "revision_b__series_id", "subject"),
        "target_name": _lookup(Target, "target_id", "name"),
        "submitter_name": _lookup(User, "submitted_by_id", User.USERNAME_FIELD),
    }


def comparison_list() -> "QuerySet[Comparison]":
    """Every comparison, newest first (the comparison_newest_first index: a page reads
    its rows in order, no sort), with what the list shows of it (the builds for the
    progress of those still building), only the columns shown."""
    return (
        Comparison.objects.select_related("revision_a", "revision_b", "build_a", "build_b")
        .only(*LIST_COLUMNS)
        .annotate(**list_names())
        .order_by("-created_at", "-pk")
    )


# --- live pages -----------------------------------------------------------------------

# How often a page polls the live parts of an unfinished comparison (htmx, seconds).
POLL_SECONDS = 5
LIST_PAGE_SIZE = 50


@dataclass(frozen=True)
class ListRow:
    comparison: Comparison
    progress: Progress
    html: SafeString  # the row rendered (reports/_comparison_row.html)


@dataclass(frozen=True)
class ListPage:
    form: ComparisonFilter
    page: Page  # of Comparison
    rows: list[ListRow]
    poll_seconds: int = POLL_SECONDS


def comparison_list_page(
    user: AnyUser, params: QueryDict, page_size: int = LIST_PAGE_SIZE
) -> ListPage:
    """The list page: the filters (GET parameters), the page of rows they let through and
    each row's progress, in a number of queries that does not grow with the rows."""
    visible = access.visible_comparisons(user)
    form = ComparisonFilter(params, visible, access.scope_key(user))
    rows = form.apply(access.visible_comparisons(user, comparison_list()))
    page = _Pages(rows, page_size, counted=form.apply(visible)).get_page(params.get("page"))
    return ListPage(form, page, list_rows(list(page.object_list)))


class _Pages(Paginator):
    """Counts the rows on `counted`, the same filters without the names and builds a row
    shows: their joins and subqueries made PostgreSQL plan and join for a count."""

    def __init__(self, rows: "QuerySet[Comparison]", per_page: int,
                 counted: "QuerySet[Comparison]") -> None:  # fmt: skip
        super().__init__(rows, per_page)
        self._counted = counted

    @cached_property
    def count(self) -> int:
        return self._counted.count()


def list_rows(comparisons: list[Comparison]) -> list[ListRow]:
    p = progress_many(comparisons)
    return [ListRow(c, p[c.pk], row_html(c, p[c.pk])) for c in comparisons]


def comparison_row(user: AnyUser, pk: int) -> ListRow:
    """One row of the list (its polled partial); 404 where the user may not see it."""
    c = access.get_visible(access.visible_comparisons(user, comparison_list()), pk=pk)
    return list_rows([c])[0]


# Rendering a list row through its template takes ~0.5 ms, most of a 50-row page's time.
# A row shows the same thing at most requests (a finished one at every request; a running
# one until a run ends or its ETA's minute moves), so each process keeps the HTML of the
# rows it rendered, keyed by every value the row shows (_row_values): a row is served from
# memory only when nothing it shows has changed (a run that ended, a renamed tree, a new
# verdict make a new key), so the memo is never stale. Bounded: least recently used
# entries go first.
_row_memo: LruMemo[SafeString] = LruMemo()


def _row_values(c: Comparison, p: Progress) -> tuple[object, ...]:
    """Everything reports/_comparison_row.html shows."""
    ra, rb = c.revision_a, c.revision_b
    return (
        c.pk, c.created_at, c.tree_a_name, ra.ref, ra.series_id, c.series_a_subject,  # type: ignore[attr-defined]
        c.tree_b_name, rb.ref, rb.series_id, c.series_b_subject, tuple(c.benchmarks),  # type: ignore[attr-defined]
        c.target_name, c.submitted_by_id, c.submitter_name, c.trigger, c.state,  # type: ignore[attr-defined]
        c.result, c.error_code, c.verdict, p.phase, p.done, p.total, p.failed, p.detail,
        p.finished, p.percent, p.eta, p.eta_basis, POLL_SECONDS, get_current_timezone_name(),
    )  # fmt: skip


def row_html(c: Comparison, p: Progress) -> SafeString:
    """A list row, rendered, or from the process's memo when it shows the same values as
    when it was rendered."""
    key = _row_values(c, p)
    if (hit := _row_memo.get(key)) is not None:
        return hit
    html = _render_row(c, p)
    _row_memo.put(key, html)
    return html


def _render_row(c: Comparison, p: Progress) -> SafeString:
    return render_to_string(
        "reports/_comparison_row.html", {"c": c, "p": p, "poll_seconds": POLL_SECONDS}
    )


class _BuildState(Protocol):
    """What a build's status line reads: a Build row or the report's BuildFacts."""

    @property
    def state(self) -> str: ...
    @property
    def result(self) -> str: ...
    @property
    def cached(self) -> bool: ...
    @property
    def error_code(self) -> str: ...


def build_status(b: _BuildState | None) -> str:
    """A build's state, or how it ended (without reading its log)."""
    if b is None:
        return "not started"
    if b.state != State.DONE:
        return b.state
    text = b.result + (" (cached)" if b.cached else "")
    return f"{text}: {b.error_code}" if b.error_code else text


@dataclass(frozen=True)
class Live:
    """The comparison page's live part while it runs: builds, runs per side by outcome,
    the look it is at and the runs' ETA (webapp.comparisons.progress)."""

    id: int
    state: str
    result: str
    verdict: str
    done: bool
    builds: tuple[tuple[str, str], tuple[str, str]]  # (side, status)
    runs: tuple[SideRuns, SideRuns]
    progress: Progress
    benchmarks: list[str]
    target: str
    poll_seconds: int = POLL_SECONDS


def live_state(c: Comparison) -> Live:
    return Live(
        id=c.pk, state=c.state, result=c.result, verdict=c.verdict,
        benchmarks=list(c.benchmarks), target=c.target.name,
        done=c.state == ComparisonState.DONE,
        builds=(("A", build_status(c.build_a)), ("B", build_status(c.build_b))),
        runs=run_counts(c), progress=progress(c),
    )  # fmt: skip


def visible_report(user: AnyUser, pk: int) -> Comparison:
    """The comparison with what the report reads joined in; 404 where the user may not
    see it."""
    return access.get_visible(access.visible_comparisons(user, report_queryset()), pk=pk)


# A done comparison's report body, rendered once and cached whole ("reports" cache, beside
# its figures): its runs, measurements and verdicts never change once it is done (the
# analysis stores the verdicts before it sets the state), and nothing in the body depends on
# who is looking (no cancel form, no live part). Reading the report's nine tables and
# rendering its runs table took ~25 ms a request; a cache hit takes one query and one file
# read. The key is the figures' (the comparison's identity and finish time) with
# REPORT_VERSION: bump it whenever _report.html or what it shows changes.
REPORT_VERSION = 2
# What the page reads of a comparison before it knows whether its body is cached.
_PAGE_COLUMNS = ("id", "state", "created_at", "finished_at", "visibility",
                 "revision_a__tree_id")  # fmt: skip


def report_cache_key(c: Comparison) -> str | None:
    """The cache key of a done comparison's report body; None for one not done."""
    figures = figures_cache_key(c)
    return None if figures is None else f"report:{REPORT_VERSION}:{figures}"


@dataclass(frozen=True)
class ComparisonPage:
    id: int
    done: bool
    body: SafeString | None  # a done comparison's report body (cached); else render report
    report: Report | None = None
    live: Live | None = None  # None once it is done: nothing polls
    can_cancel: bool = False
    alerts: list[Alert] | None = None  # its mails, for the tree's admins and staff only


def comparison_page(user: AnyUser, pk: int) -> ComparisonPage:
    """The comparison page: for a done comparison its rendered body, from the cache after
    the first request; for one still going, what its template renders (fresh each time).
    404 where the user may not see it."""
    c = access.get_visible(
        access.visible_comparisons(
            user, Comparison.objects.select_related("revision_a").only(*_PAGE_COLUMNS)
        ),
        pk=pk,
    )
    # The mails are not for every reader: outside the cached body. (Imported here: the
    # alerts' mail is built from this module's report parts.)
    from webapp.alerts.services import alerts_for_page

    alerts = alerts_for_page(user, c)
    if c.state == ComparisonState.DONE:
        return ComparisonPage(id=c.pk, done=True, body=done_report_html(c), alerts=alerts)
    full = report_queryset().get(pk=c.pk)
    return ComparisonPage(
        id=c.pk, done=False, body=None, report=comparison_report(full),
        live=live_state(full), can_cancel=access.can_cancel(user, full), alerts=alerts,
    )  # fmt: skip


def done_report_html(c: Comparison) -> SafeString:
    """A done comparison's report body, rendered once and then read from the cache. As with
    the figures, a cache that cannot be read or written only costs the rendering."""
    key = report_cache_key(c)
    cache = caches[FIGURES_CACHE]
    hit = None
    if key is not None:
        try:
            hit = cache.get(key)
        except Exception:  # noqa: BLE001 - any cache failure: render it instead
            log.warning("report cache: cannot read %s", key, exc_info=True)
    if isinstance(hit, str):
        return mark_safe(hit)  # noqa: S308 - stored below from the escaping template
    report = comparison_report(report_queryset().get(pk=c.pk))
    html = render_to_string("reports/_report.html", {"report": report})
    if key is not None:
        try:
            cache.set(key, str(html))
        except Exception:  # noqa: BLE001 - the page is served all the same
            log.warning("report cache: cannot write %s", key, exc_info=True)
    return mark_safe(html)  # noqa: S308 - rendered by the escaping template


def cancel(user: AnyUser, pk: int, via: str = "on the web page") -> tuple[Comparison, bool]:
    """Cancel the comparison for `user` (from a page, or the API: `via` says which, in the
    recorded reason): 404 where they may not see it, PermissionDenied where they see it but
    may not cancel it (webapp.access). Returns the comparison and whether this ended it
    (False: it had ended already)."""
    c = access.get_visible(
        access.visible_comparisons(user, Comparison.objects.select_related("revision_a")),
        pk=pk,
    )
    if not access.can_cancel(user, c):
        raise PermissionDenied(
            "only the submitter, the tree's admins and staff may cancel this comparison"
        )
    ended = orchestrator.cancel(c.pk, f"cancelled by {user.get_username()} {via}")
    return c, ended


# --- run page -------------------------------------------------------------------------

# The run page shows at most this much of a console (characters): its head, where the boot
# is, and its tail, where a panic or the benchmark's output is; the download has it all.
CONSOLE_HEAD_CHARS = 16 * 1024
CONSOLE_TAIL_CHARS = 48 * 1024
SAMPLES_SHOWN = 200


@dataclass(frozen=True)
class Console:
    head: str
    tail: str  # empty unless characters were left out between head and tail
    chars: int  # the whole console's length
    omitted: int  # characters not shown, between head and tail


def console_excerpt(head: str, tail: str, chars: int, head_max: int, tail_max: int) -> Console:
    """The console as shown from its first `head_max` and last `tail_max` characters
    (`head`, `tail`) and its length: whole when it fits, else both ends and the gap."""
    if chars <= head_max:
        return Console(head, "", chars, 0)
    if chars <= head_max + tail_max:
        return Console(head + tail[len(tail) - (chars - head_max) :], "", chars, 0)
    return Console(head, tail, chars, chars - head_max - tail_max)


@dataclass(frozen=True)
class MetricRead:
    """One Measurement of the run: what the parser read of one metric."""

    benchmark: str
    metric: str
    unit: str
    primary: bool
    samples: list[float]

    @property
    def n(self) -> int:
        return len(self.samples)

    def _q(self, q: float) -> str:
        return _num(float(np.quantile(np.asarray(self.samples, dtype=float), q)))

    @property
    def minimum(self) -> str:
        return _num(min(self.samples))

    @property
    def median(self) -> str:
        return self._q(0.5)

    @property
    def p90(self) -> str:
        return self._q(0.9)

    @property
    def maximum(self) -> str:
        return _num(max(self.samples))

    @property
    def shown(self) -> str:
        """The first SAMPLES_SHOWN samples, as the parser read them."""
        return ", ".join(f"{x:.6g}" for x in self.samples[:SAMPLES_SHOWN])


@dataclass(frozen=True)
class RunPage:
    run: Run  # with its comparison and target; its console deferred
    retried_by: int | None  # the run that replaced this one
    console: Console
    metrics: list[MetricRead]

    @property
    def queued_seconds(self) -> float | None:
        r = self.run
        if r.started_at is None:
            return None
        return (r.started_at - r.created_at).total_seconds()

    @property
    def run_seconds(self) -> float | None:
        r = self.run
        if r.started_at is None or r.finished_at is None:
            return None
        return (r.finished_at - r.started_at).total_seconds()


def run_page(user: AnyUser, pk: int) -> RunPage:
    """The run page's data in three queries; 404 for runs of comparisons the user may not
    see. The console is cut in the database: a 1 MiB log is not read to show 64 KiB."""
    qs = (
        Run.objects.select_related("comparison__target", "retried_by")
        .defer("console_log", "retried_by__console_log")
        .annotate(
            console_head=Left("console_log", CONSOLE_HEAD_CHARS),
            console_tail=Right("console_log", CONSOLE_TAIL_CHARS),
            console_chars=Length("console_log"),
        )
    )
    run = access.get_visible(access.visible_runs(user, qs), pk=pk)
    spec = _spec(run.benchmark)
    primary = {m.name for m in spec.metrics if m.primary} if spec else set()
    metrics = [
        MetricRead(m.benchmark, m.metric, m.unit, m.metric in primary, list(m.samples))
        for m in Measurement.objects.filter(run_id=run.pk).order_by("benchmark", "metric")
    ]
    metrics.sort(key=lambda m: not m.primary)
    retried = getattr(run, "retried_by", None)
    cut: Any = run  # with the console's annotations
    console = console_excerpt(cut.console_head, cut.console_tail, cut.console_chars,
                              CONSOLE_HEAD_CHARS, CONSOLE_TAIL_CHARS)  # fmt: skip
    return RunPage(run, retried.pk if retried else None, console, metrics)


# --- tree and series pages --------------------------------------------------------------

RECENT_ON_TREE_PAGE = 20


@dataclass(frozen=True)
class TreePage:
    tree: Tree
    role: str | None  # the user's role on the tree
    is_admin: bool  # may read its webhook deliveries
    policy: WatchPolicy | None
    heads: list[Push]  # the newest push of each branch (the refs under test)
    pushes: list[Push]  # the newest pushes
    change_points: list[ChangePoint]
    rows: list[ListRow]  # its newest comparisons the user may see
    more: int  # how many more of them the list page has


def tree_page(user: AnyUser, name: str) -> TreePage:
    """A tree: its watch policy, its refs under test and their pushes, change points found in
    its history and its newest comparisons; 404 where the user may not see the tree."""
    tree = access.get_visible(access.visible_trees(user), name=name)
    policy = WatchPolicy.objects.filter(tree=tree).prefetch_related("targets").first()
    pushes = Push.objects.filter(tree=tree).prefetch_related("comparisons")
    heads = list(
        pushes.filter(anchor=False).order_by("branch", "-received_at", "-pk").distinct("branch")
    )
    visible = access.visible_comparisons(user, comparison_list()).filter(revision_a__tree=tree)
    shown = list(visible[:RECENT_ON_TREE_PAGE])
    points = ChangePoint.objects.filter(tree=tree).select_related("push", "target")
    return TreePage(
        tree=tree, role=access.role(user, tree.pk), is_admin=access.is_tree_admin(user, tree),
        policy=policy, heads=heads, pushes=list(pushes[:RECENT_ON_TREE_PAGE]),
        change_points=list(points[:10]), rows=list_rows(shown),
        more=max(0, visible.count() - len(shown)),
    )  # fmt: skip


@dataclass(frozen=True)
class SeriesPage:
    series: PatchSeries
    patches: list[Any]
    rows: list[ListRow]  # every comparison of it the user may see


def series_page(user: AnyUser, pk: int) -> SeriesPage:
    """A patch series: its cover letter's subject, author and message-id, its patches, and
    every comparison of it the user may see; 404 where they see none."""
    series = access.get_visible(access.visible_series(user, PatchSeries.objects.defer("mbox")),
                                pk=pk)  # fmt: skip
    comparisons = access.visible_comparisons(user, comparison_list()).filter(
        Q(revision_a__series=series) | Q(revision_b__series=series)
    )
    return SeriesPage(series, list(series.patches.order_by("index")), list_rows(list(comparisons)))
