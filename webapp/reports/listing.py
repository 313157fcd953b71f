"""The list page: the filters, a page of comparisons and each row's progress, in a number
of queries that does not grow with the rows, and the per-process memo of rendered rows."""

from dataclasses import dataclass
from functools import cached_property

from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.db.models import Model, OuterRef, QuerySet, Subquery
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.safestring import SafeString
from django.utils.timezone import get_current_timezone_name

from webapp import access
from webapp.access import AnyUser
from webapp.comparisons.models import Comparison, Target
from webapp.comparisons.names import KernelName, kernel_names, name_annotations
from webapp.comparisons.progress import Progress, progress_many
from webapp.memo import LruMemo
from webapp.reports.filters import ComparisonFilter

# What a list row shows of a comparison and its progress reads (progress.py: the builds'
# state and result for those still building), and what the visibility filter reads; nothing
# else is fetched. The names of its trees, series, target and submitter are scalar
# subqueries (list_names) rather than joins: a join of all ten tables took PostgreSQL
# ~8-12 ms to plan at each request (more than the page's rows took to read), five tables
# and six subqueries under 1 ms. Each subquery is a primary-key lookup per row shown,
# except the kernels' patch counts and a push's branch (an index lookup each).
LIST_COLUMNS = (
    "id", "created_at", "benchmarks", "state", "result", "error_code", "verdict", "trigger",
    "visibility", "min_runs", "scheduled_per_side", "target_id", "submitted_by_id",
    "build_a_id", "build_b_id", "revision_a__ref", "revision_a__tree_id",
    "revision_a__series_id", "revision_a__sha", "revision_a__base_sha", "revision_a__subject",
    "revision_b__ref", "revision_b__tree_id", "revision_b__series_id", "revision_b__sha",
    "revision_b__base_sha", "revision_b__subject",
    "build_a__state", "build_a__result", "build_b__state", "build_b__result",
)  # fmt: skip


def list_names() -> dict[str, Subquery]:
    """The names a list row shows, as annotations: the kernels' (names.name_annotations:
    tree_a_name, series_a_subject, ..., push_branch), target_name, submitter_name (None:
    submitted from the operator's command line)."""
    return {
        **name_annotations(),
        "target_name": _lookup(Target, "target_id", "name"),
        "submitter_name": _lookup(User, "submitted_by_id", User.USERNAME_FIELD),
    }


def _lookup(model: type[Model], ref: str, column: str) -> Subquery:
    return Subquery(model._default_manager.filter(pk=OuterRef(ref)).order_by().values(column)[:1])


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


def _row_values(
    c: Comparison, p: Progress, names: tuple[KernelName, KernelName]
) -> tuple[object, ...]:
    """Everything reports/_comparison_row.html shows."""
    return (
        c.pk, c.created_at, names, c.revision_a.series_id, c.revision_b.series_id,
        tuple(c.benchmarks), c.target_name, c.submitted_by_id, c.submitter_name,  # type: ignore[attr-defined]
        c.trigger, c.state, c.result, c.error_code, c.verdict, p.phase, p.done, p.total,
        p.failed, p.detail, p.finished, p.percent, p.eta, p.eta_basis, POLL_SECONDS,
        get_current_timezone_name(),
    )  # fmt: skip


def row_html(c: Comparison, p: Progress) -> SafeString:
    """A list row, rendered, or from the process's memo when it shows the same values as
    when it was rendered."""
    names = kernel_names(c)
    key = _row_values(c, p, names)
    if (hit := _row_memo.get(key)) is not None:
        return hit
    html = _render_row(c, p, names)
    _row_memo.put(key, html)
    return html


def _render_row(c: Comparison, p: Progress, names: tuple[KernelName, KernelName]) -> SafeString:
    return render_to_string(
        "reports/_comparison_row.html",
        {"c": c, "p": p, "a": names[0], "b": names[1], "poll_seconds": POLL_SECONDS},
    )
