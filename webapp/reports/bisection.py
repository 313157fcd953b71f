"""The bisection pages, gathered from the database (the views stay thin): one bisection (its
original comparison, the positions with the steps that tested them, the culprit or range,
an attribution's waterfall; its live part while it runs), the list of bisections, and what
the comparison page shows of them (the Bisect buttons, the bisections of it). What a
bisection found comes from webapp.bisections.summary; who may see, start and cancel one
from webapp.bisections.services."""

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.safestring import SafeString

from stats.bisection import Effect
from webapp import access
from webapp.access import AnyUser
from webapp.analysis.models import MetricVerdict
from webapp.bisections import services, summary
from webapp.bisections.models import Bisection, Step
from webapp.bisections.summary import BisectionSummary, Position
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.comparisons.names import KernelName, kernel_names
from webapp.plotly import PLOTLY_VERSION, figure_html
from webapp.reports import figures
from webapp.reports.listing import POLL_SECONDS
from webapp.trees.models import Revision

LIST_PAGE_SIZE = 50
# A range of more positions than this shows the ones tested, the range found and their
# neighbours; the others are folded into one row per run of them ("412 more commits").
FOLD_ABOVE = 40


# --- one bisection ----------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """A line of the positions table: a step (None: the position was not tested) and its
    shift and CI as the summary writes them."""

    step: Step | None
    effect: str = ""


@dataclass(frozen=True)
class Row:
    """A row of the positions table: a position, or a fold of `folded` untested ones."""

    position: Position | None
    folded: int = 0
    unit: str = ""

    @property
    def lines(self) -> list[Line]:
        """The position's lines: one per step, or one without."""
        if self.position is None:
            return []
        steps = self.position.steps
        return [Line(s, summary.step_effect(s, self.unit)) for s in steps] or [Line(None)]


@dataclass(frozen=True)
class BisectionPage:
    summary: BisectionSummary
    names: tuple[KernelName, KernelName]  # the original's kernels (A, B)
    rows: list[Row]
    figure: SafeString | None  # an attribution's waterfall, once a patch is measured
    can_cancel: bool
    poll_seconds: int = POLL_SECONDS
    plotly_version: str = PLOTLY_VERSION

    @property
    def bisection(self) -> Bisection:
        return self.summary.bisection

    @property
    def original(self) -> Comparison:
        return self.summary.bisection.comparison

    @property
    def done(self) -> bool:
        return self.summary.done


_no_name = KernelName(tree="", ref="", sha="", subject="")  # the live part names no kernel


def visible_bisection(user: AnyUser, pk: int) -> Bisection:
    """The bisection with its original comparison; 404 where the user may not see that
    comparison (services.visible)."""
    qs = services.visible(user).select_related(
        "comparison__revision_a__tree", "comparison__revision_b", "requested_by"
    )
    return access.get_visible(qs, pk=pk)


def bisection_page(user: AnyUser, pk: int, *, live: bool = False) -> BisectionPage:
    """The bisection page (`live`: its polled part only, without the kernels' names and the
    figure); 404 where the user may not see the original comparison."""
    b = visible_bisection(user, pk)
    s = summary.summarize(b)
    return BisectionPage(
        summary=s, names=(_no_name, _no_name) if live else kernel_names(b.comparison),
        rows=fold(s.positions, b.unit), figure=None if live else waterfall(s),
        can_cancel=not (live or s.done) and services.may_cancel(user, b),
    )  # fmt: skip


def fold(positions: list[Position], unit: str = "", fold_above: int = FOLD_ABOVE) -> list[Row]:
    """The positions table's rows (effects in `unit`): every position up to `fold_above`;
    beyond, the first and the last, those tested or in the range found, and each one's
    neighbours, with the runs between them folded."""
    if len(positions) <= fold_above:
        return [Row(p, unit=unit) for p in positions]
    keep = {1, len(positions)}
    for p in positions:
        if p.steps or p.in_range:
            keep |= {p.position - 1, p.position, p.position + 1}
    rows, gap = [], 0
    for p in positions:
        if p.position not in keep:
            gap += 1
            continue
        if gap:
            rows.append(Row(None, gap))
            gap = 0
        rows.append(Row(p, unit=unit))
    if gap:
        rows.append(Row(None, gap))
    return rows


def waterfall(s: BisectionSummary) -> SafeString | None:
    """An attribution's waterfall (figures.waterfall_figure), once one patch is measured."""
    if not any(bar.effect is not None for bar in s.bars):
        return None
    b = s.bisection
    fig = figures.waterfall_figure(
        f"{s.statistic}: each patch against its parent",
        b.unit,
        [p.label for p in s.positions],
        [p.subject for p in s.positions],
        s.bars,
        threshold=s.threshold,
        original=Effect(b.effect, b.effect_low, b.effect_high),
    )
    return figure_html(fig)


# --- the list ---------------------------------------------------------------------------


def bisection_list() -> QuerySet[Bisection]:
    return Bisection.objects.select_related("comparison", "requested_by").order_by(
        "-created_at", "-pk"
    )


def bisection_list_page(user: AnyUser, params: QueryDict, page_size: int = LIST_PAGE_SIZE) -> Page:
    """A page of the bisections `user` may see, newest first (?page=)."""
    visible = bisection_list().filter(pk__in=services.visible(user).values("pk"))
    return Paginator(visible, page_size).get_page(params.get("page"))


# --- on the comparison page -------------------------------------------------------------


@dataclass(frozen=True)
class Offer:
    """A primary statistic that may be bisected: the Bisect button's hidden fields."""

    benchmark: str
    metric: str
    statistic: str
    verdict: str
    effect: str  # its shift and CI, as the bisection page shows them
    refused: str = ""  # why it is not bisected (services.refusal), shown instead of the button


@dataclass(frozen=True)
class ComparisonBisections:
    """The comparison page's bisection part (outside its cached body: it depends on who is
    looking, and a bisection may start at any time)."""

    comparison_id: int
    offers: list[Offer]  # empty: no Bisect button (not a submitter, nothing to bisect)
    series: bool  # side B is a series: "Attribute per patch" too
    bisections: list[Bisection]  # of this comparison, newest first
    step_of: list[Bisection]  # the bisections this comparison is a step of


def comparison_bisections(user: AnyUser, c: Comparison) -> ComparisonBisections | None:
    """What the comparison page shows of bisections (None: nothing). `c` comes with the
    page's columns and `bisected` (whether it has bisections), so that a comparison never
    bisected, seen by someone who may not bisect it, costs no query here."""
    bisected = getattr(c, "bisected", True)  # the page's annotation; else ask
    bisections = list(c.bisections.order_by("-created_at", "-pk")) if bisected else []
    step_of = []
    if c.trigger == Comparison.Trigger.BISECTION:
        step_of = list(Bisection.objects.filter(steps__comparison=c).distinct().order_by("pk"))
    offers, series = [], False
    done_ok = c.state == ComparisonState.DONE and c.result == "ok"
    if done_ok and user.is_authenticated and access.can_submit(user, c.revision_a.tree):
        offers = [_offer(c, row) for row in services.bisectable_rows(c)]
        series = (
            bool(offers)
            and Revision.objects.filter(pk=c.revision_b_id, series__isnull=False).exists()
        )
    if not (offers or bisections or step_of):
        return None
    return ComparisonBisections(c.pk, offers, series, bisections, step_of)


def _offer(c: Comparison, row: MetricVerdict) -> Offer:
    e = services.row_effect(row)
    unit = services.row_unit(row)
    shift = summary.effect_text(e.shift, e.ci_low, e.ci_high, unit) if e else "n/a"
    return Offer(row.benchmark, row.metric, row.statistic, row.verdict, shift,
                 services.refusal(c, row))  # fmt: skip


def posted_statistic(data: QueryDict) -> tuple[str, str, str] | None:
    """The statistic a Bisect form names ((benchmark, metric, statistic)); None when it
    names none (the service takes the first primary regression or improvement); refused
    (services.BisectionRefused) when it names part of one."""
    bench, metric, stat = (data.get(k, "").strip() for k in ("benchmark", "metric", "statistic"))
    if not (bench or metric or stat):
        return None
    if not (bench and metric and stat):
        raise services.BisectionRefused("name the benchmark, the metric and the statistic, or none")
    return bench, metric, stat
