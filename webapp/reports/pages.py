"""The report pages, gathered from the database (the views stay thin): the comparison page
(its report body cached once done, its live part while it runs), the run page, the tree and
series pages. What a comparison found comes from webapp.comparisons.summary, its figures from
sections.py, the list page from listing.py."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.cache import caches
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Left, Length, Right
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from webapp import access, logs
from webapp.access import AnyUser
from webapp.alerts.models import Alert
from webapp.alerts.services import alerts_for_page
from webapp.bisections.models import Bisection
from webapp.comparisons.console_diff import ConsoleDifference, console_differences
from webapp.comparisons.detectable import detectable_lines
from webapp.comparisons.guards import GuardLine, guard_lines
from webapp.comparisons.models import Comparison, ComparisonState, Measurement, Run
from webapp.comparisons.progress import Progress, progress
from webapp.comparisons.reliability import ReliabilityRow, reliability_rows
from webapp.comparisons.reproducer import reproducer
from webapp.comparisons.sentence import verdict_sentence
from webapp.comparisons.summary import (
    Header,
    KernelFacts,
    SideRuns,
    VerdictRow,
    header,
    kernels,
    num_text,
    p_method_legend,
    run_counts,
    spec_for,
    verdict_rows,
)
from webapp.plotly import PLOTLY_VERSION
from webapp.regressions.models import Regression
from webapp.reports.bisection import ComparisonBisections, comparison_bisections
from webapp.reports.diagnosis import DiagnosisPart, diagnosis_part
from webapp.reports.listing import POLL_SECONDS, ListRow, comparison_list, list_rows
from webapp.reports.sections import (
    FIGURES_CACHE,
    BenchmarkFigures,
    cached_figure_sections,
    figures_cache_key,
)
from webapp.trees.models import PatchSeries, Tree
from webapp.watch import history
from webapp.watch.models import ChangePoint, Push, WatchPolicy

log = logs.get(__name__)


# --- runs -----------------------------------------------------------------------------


def runs_table(c: Comparison) -> list[Run]:
    """Every run of the verdict in schedule order, without its console log (fetched by its
    own view). Traced diagnostic runs are not among them: they come after the verdict, when
    this table is cached already, and are listed under "Why?" (reports/diagnosis.py)."""
    return list(c.runs.filter(traced=False).defer("console_log", "trace_log").order_by("order"))


# --- pages ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    header: Header
    verdicts: list[VerdictRow]
    reliability: list[ReliabilityRow]
    console_differences: list[ConsoleDifference]
    sections: list[BenchmarkFigures]  # empty until the comparison is done
    runs: list[Run]
    reproducer: str
    sentence: str  # the verdict in one sentence, as the mail says it (comparisons.sentence)
    plotly_version: str = PLOTLY_VERSION

    @property
    def p_legend(self) -> str:
        return p_method_legend(self.verdicts)

    # The verdict table in three parts: the primary metrics (they decide the comparison's
    # verdict and its mail), apart from the secondary statistics; of those, the ones that
    # decided nothing (inconclusive, no meaningful change) are folded away and counted.
    @property
    def primary(self) -> list[VerdictRow]:
        return [r for r in self.verdicts if r.verdict.is_primary]

    @property
    def guards(self) -> list[GuardLine]:
        """Per benchmark, what its primary's change cost (the spec's guard metrics)."""
        return guard_lines(self.verdicts)

    @property
    def detectable(self) -> list[str]:
        """Per primary, the shift its runs could detect, in the metric's unit."""
        return detectable_lines(self.primary)

    @property
    def secondary(self) -> list[VerdictRow]:
        return [r for r in self.verdicts if not r.verdict.is_primary and r.decided]

    @property
    def folded(self) -> list[VerdictRow]:
        return [r for r in self.verdicts if not r.verdict.is_primary and not r.decided]


def comparison_report(c: Comparison) -> Report:
    """Everything the report page shows. Figures load every sample of the comparison, so
    they are drawn once it is done, not on each refresh of a running one, and then come
    from the cache (cached_figure_sections)."""
    h, rows = header(c), verdict_rows(c)
    return Report(
        header=h,
        verdicts=rows,
        reliability=reliability_rows(c),
        console_differences=console_differences(c),
        sections=cached_figure_sections(c) if c.state == ComparisonState.DONE else [],
        runs=runs_table(c),
        reproducer=reproducer(c),
        sentence=verdict_sentence(h, rows),
    )


def report_queryset() -> "QuerySet[Comparison]":
    """Comparisons with what the report reads of them joined in; the big blobs (build logs,
    mboxes) are left to be fetched only where shown."""
    return Comparison.objects.select_related(
        "revision_a__tree", "revision_a__series", "revision_b__tree", "revision_b__series",
        "build_a", "build_b", "target", "submitted_by",
    ).defer(
        "build_a__log", "build_b__log", "revision_a__series__mbox", "revision_b__series__mbox"
    )  # fmt: skip


@dataclass(frozen=True)
class Live:
    """The comparison page's live part while it runs: builds, runs per side by outcome,
    the look it is at and the runs' ETA (webapp.comparisons.progress). Its builds and the
    page's kernels table read the same KernelFacts, and each poll re-renders that table
    too (out of band), so the two never disagree."""

    id: int
    state: str
    result: str
    verdict: str
    done: bool
    kernels: tuple[KernelFacts, KernelFacts]
    runs: tuple[SideRuns, SideRuns]
    progress: Progress
    benchmarks: list[str]
    target: str
    poll_seconds: int = POLL_SECONDS

    @property
    def builds(self) -> tuple[tuple[str, str], ...]:
        """(side, build status) of each kernel."""
        return tuple((k.side, k.build_status) for k in self.kernels)


def live_state(c: Comparison, h: Header | None = None) -> Live:
    """The live part; from the page's own header `h` when it has one, so the page's kernels
    table and its live part are one set of KernelFacts, read once."""
    return Live(
        id=c.pk, state=c.state, result=c.result, verdict=c.verdict,
        benchmarks=list(c.benchmarks), target=c.target.name,
        done=c.state == ComparisonState.DONE,
        kernels=h.kernels if h is not None else kernels(c),
        runs=h.runs if h is not None else run_counts(c), progress=progress(c),
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
# 5: kernels named by branch, short sha and subject; the verdict sentence, primary rows
# apart, undecided rows folded; 6: what each primary could have detected; 7: traced runs
# left out of the runs table (they are under "Why?", outside the body).
REPORT_VERSION = 7
# What the page reads of a comparison before it knows whether its body is cached (and what
# its bisection and "Why?" parts read: bisection.comparison_bisections,
# diagnosis.diagnosis_part).
_PAGE_COLUMNS = ("id", "state", "result", "trigger", "created_at", "finished_at", "visibility",
                 "revision_a__tree_id", "revision_b", "benchmarks", "diagnosis_per_side",
                 "submitted_by")  # fmt: skip


def report_cache_key(c: Comparison) -> str | None:
    """The cache key of a done comparison's report body; None for one not done."""
    figures = figures_cache_key(c)
    return None if figures is None else f"report:{REPORT_VERSION}:{figures}"


@dataclass(frozen=True)
class ReportedRegression:
    pk: int
    state: str


@dataclass(frozen=True)
class ComparisonPage:
    id: int
    done: bool
    body: SafeString | None  # a done comparison's report body (cached); else render report
    report: Report | None = None
    live: Live | None = None  # None once it is done: nothing polls
    can_cancel: bool = False
    alerts: list[Alert] | None = None  # its mails, for the tree's admins and staff only
    bisections: ComparisonBisections | None = None  # Bisect buttons, its bisections
    diagnosis: DiagnosisPart | None = None  # "Why?": its traced runs, or the button
    regression: ReportedRegression | None = None  # the regression it reported, its state now


def comparison_page(user: AnyUser, pk: int) -> ComparisonPage:
    """The comparison page: for a done comparison its rendered body, from the cache after
    the first request; for one still going, what its template renders (fresh each time).
    404 where the user may not see it."""
    has_bisections = Exists(Bisection.objects.filter(comparison=OuterRef("pk")))
    reported = Regression.objects.filter(comparison=OuterRef("pk"))
    c = access.get_visible(
        access.visible_comparisons(
            user,
            Comparison.objects.select_related("revision_a")
            .only(*_PAGE_COLUMNS)
            .annotate(
                bisected=has_bisections,
                reported_pk=Subquery(reported.values("pk")[:1]),
                reported_state=Subquery(reported.values("state")[:1]),
            ),
        ),
        pk=pk,
    )
    # The mails and the Bisect buttons are not for every reader, and traced runs come after
    # the verdict: outside the cached body.
    alerts = alerts_for_page(user, c)
    bisections = comparison_bisections(user, c)
    if c.state == ComparisonState.DONE:
        # Its regression's state changes after the report is cached: beside the body.
        reported_pk: int | None = getattr(c, "reported_pk", None)
        regression = (ReportedRegression(reported_pk, getattr(c, "reported_state", ""))
                      if reported_pk else None)  # fmt: skip
        return ComparisonPage(id=c.pk, done=True, body=done_report_html(c), alerts=alerts,
                              bisections=bisections, diagnosis=diagnosis_part(user, c),
                              regression=regression)  # fmt: skip
    full = report_queryset().get(pk=c.pk)
    report = comparison_report(full)
    return ComparisonPage(
        id=c.pk, done=False, body=None, report=report, live=live_state(full, report.header),
        can_cancel=access.can_cancel(user, full), alerts=alerts, bisections=bisections,
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
        return num_text(float(np.quantile(np.asarray(self.samples, dtype=float), q)))

    @property
    def minimum(self) -> str:
        return num_text(min(self.samples))

    @property
    def median(self) -> str:
        return self._q(0.5)

    @property
    def p90(self) -> str:
        return self._q(0.9)

    @property
    def maximum(self) -> str:
        return num_text(max(self.samples))

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
    trace_chars: int = 0  # a traced run's trace (downloaded by its own view)

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
        .defer("console_log", "trace_log", "retried_by__console_log", "retried_by__trace_log")
        .annotate(
            console_head=Left("console_log", CONSOLE_HEAD_CHARS),
            console_tail=Right("console_log", CONSOLE_TAIL_CHARS),
            console_chars=Length("console_log"),
            trace_chars=Length("trace_log"),
        )
    )
    run = access.get_visible(access.visible_runs(user, qs), pk=pk)
    spec = spec_for(run.benchmark)
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
    return RunPage(run, retried.pk if retried else None, console, metrics, cut.trace_chars)


# --- tree and series pages --------------------------------------------------------------

RECENT_ON_TREE_PAGE = 20


@dataclass(frozen=True)
class TreePage:
    tree: Tree
    role: str | None  # the user's role on the tree
    is_admin: bool  # may read its webhook deliveries
    policy: WatchPolicy | None
    # Each with head_subject, its head commit's subject line as its comparison recorded it.
    heads: Sequence[Push]  # the newest push of each branch (the refs under test)
    pushes: Sequence[Push]  # the newest pushes
    change_points: list[ChangePoint]
    rows: list[ListRow]  # its newest comparisons the user may see
    more: int  # how many more of them the list page has


def tree_page(user: AnyUser, name: str) -> TreePage:
    """A tree: its watch policy, its refs under test and their pushes, change points found in
    its history and its newest comparisons; 404 where the user may not see the tree. A push
    whose comparisons the user may not see (restricted ones) is left out, and so are its
    change points (history.visible_change_points)."""
    tree = access.get_visible(access.visible_trees(user), name=name)
    policy = WatchPolicy.objects.filter(tree=tree).prefetch_related("targets").first()
    # The subject of each head, as its comparison's revision recorded it (no git call).
    tested = Comparison.objects.filter(pushes=OuterRef("pk")).exclude(revision_b__subject="")
    subject = access.visible_comparisons(user, tested).values("revision_b__subject")[:1]
    pushes = (
        visible_pushes(user, tree)
        .annotate(head_subject=Subquery(subject))
        # A push's sweeps are on its tree, seen where its comparisons are.
        .prefetch_related(
            Prefetch("comparisons", queryset=access.visible_comparisons(user)), "sweeps"
        )
    )
    heads = list(
        pushes.filter(anchor=False).order_by("branch", "-received_at", "-pk").distinct("branch")
    )
    visible = access.visible_comparisons(user, comparison_list()).filter(revision_a__tree=tree)
    shown = list(visible[:RECENT_ON_TREE_PAGE])
    points = history.visible_change_points(user, tree).select_related("push", "target")
    return TreePage(
        tree=tree, role=access.role(user, tree.pk), is_admin=access.is_tree_admin(user, tree),
        policy=policy, heads=heads, pushes=list(pushes[:RECENT_ON_TREE_PAGE]),
        change_points=list(points[:10]), rows=list_rows(shown),
        more=max(0, visible.count() - len(shown)),
    )  # fmt: skip


def visible_pushes(user: AnyUser, tree: Tree) -> QuerySet[Push]:
    """The tree's pushes `user` may see: those with a comparison they see, and those that
    have none (superseded, skipped, failed or pending: no measurement of anything)."""
    own = Comparison.objects.filter(pushes=OuterRef("pk"))
    seen = access.visible_comparisons(user, own)
    return Push.objects.filter(tree=tree).filter(Exists(seen) | ~Exists(own))


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
