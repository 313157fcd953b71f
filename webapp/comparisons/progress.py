"""What a front end shows of a comparison while it runs (CLI, pages).

`progress_many` reads the progress of a page of comparisons in a constant number of queries
(one for the runs of all of them, one more for the targets' recent runs when some
comparison has no finished run of its own); `progress` is the same for one.

The ETA rule: the runs the next look still needs (ok runs needed minus ok runs so far)
times the median duration of a run (started to finished, runs that ended ok or failed by the
kernel; the host's endings, lost, cancelled or infra-error, say nothing of how long a run
takes), divided by the parallelism (the runs of this comparison running now, at least 1).
The median is this comparison's own finished runs; with none yet, that of the target's
last TARGET_RECENT_RUNS such runs (any comparison). With neither, the ETA is unknown. It
leaves out the builds still to come and the replacements of runs that will fail, so it is
the runs' remaining time, not a promise.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
)

from webapp.comparisons.models import Comparison, ComparisonState, Run
from webapp.states import Result, State

TARGET_RECENT_RUNS = 50  # the target's runs an ETA falls back on


@dataclass(frozen=True)
class Progress:
    phase: str  # building, running look 1, analysing, done: regression, ...
    done: int  # runs that are data (ok)
    total: int  # ok runs needed for the next look (both sides, every benchmark)
    failed: int  # runs that ended otherwise (each replaced, or the comparison failed)
    detail: str
    # Not part of equality: the CLI prints a line per change of the fields above.
    running: int = field(default=0, compare=False)
    eta_seconds: float | None = field(default=None, compare=False)  # None: unknown or ended
    eta_basis: str = field(default="", compare=False)  # what the ETA rests on
    finished: bool = field(default=False, compare=False)  # the comparison is done

    @property
    def eta(self) -> str:
        """The ETA for a page: "done", "unknown", "now", or "~12 min"."""
        if self.finished:
            return "done"
        if self.eta_seconds is None:
            return "unknown"
        return "now" if self.eta_seconds < 1 else f"~{_duration(self.eta_seconds)}"

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.done / self.total)) if self.total else 0


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 3600:
        return f"{round(s / 60)} min"
    h, m = divmod(round(s / 60), 60)
    return f"{h} h {m:02d} min"


class _Median(Aggregate):
    """PostgreSQL's percentile_cont(0.5) of an interval (or number): the median."""

    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    allow_distinct = False


_RUN_SECONDS = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
# Runs whose duration tells how long a run takes: they ran to the end, ok or the kernel's
# failure (a panic or a timeout takes as long as it takes); not the host's endings.
_TIMED = Q(state=State.DONE, started_at__isnull=False, finished_at__isnull=False) & (
    Q(result=Result.OK) | Q(result=Result.FAILED)
)


def progress(c: Comparison) -> Progress:
    return progress_many([c])[c.pk]


def progress_many(comparisons: Iterable[Comparison]) -> dict[int, Progress]:
    """The progress of each comparison, by pk. Reads `build_a`/`build_b` of those still
    building (select_related them for a page of rows)."""
    cs = list(comparisons)
    if not cs:
        return {}
    counts = {
        row["comparison_id"]: row
        for row in Run.objects.filter(comparison_id__in=[c.pk for c in cs], traced=False)
        .values("comparison_id")
        .annotate(
            ok=Count("pk", filter=Q(result=Result.OK)),
            failed=Count("pk", filter=Q(state=State.DONE) & ~Q(result=Result.OK)),
            running=Count("pk", filter=Q(state=State.RUNNING)),
            median=_Median(_RUN_SECONDS, filter=_TIMED, output_field=DurationField()),
        )
        .order_by()
    }
    none = {"ok": 0, "failed": 0, "running": 0, "median": None}
    unfinished = [c for c in cs if c.state != ComparisonState.DONE]
    need_fallback = {c.target_id for c in unfinished if counts.get(c.pk, none)["median"] is None}
    fallback = target_medians(need_fallback)
    out = {}
    for c in cs:
        n = counts.get(c.pk, none)
        median: timedelta | None = n["median"]
        basis = "this comparison's runs"
        if median is None and c.state != ComparisonState.DONE:
            median, basis = fallback.get(c.target_id), "the target's recent runs"
        out[c.pk] = _progress(c, n["ok"], n["failed"], n["running"], median, basis)
    return out


def target_medians(target_ids: Iterable[int]) -> dict[int, timedelta]:
    """The median duration of each target's last TARGET_RECENT_RUNS timed runs (one query;
    targets without any are left out)."""
    ids = sorted(set(target_ids))
    if not ids:
        return {}
    run, comparison = Run._meta.db_table, Comparison._meta.db_table
    # Newest by id (the primary key's index), per target through a lateral subquery, so
    # that it reads a few rows per target however many runs the database holds.
    sql = f"""
        SELECT t.id, m.median FROM unnest(%s::bigint[]) AS t(id)
        CROSS JOIN LATERAL (
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r.d) AS median FROM (
                SELECT run.finished_at - run.started_at AS d
                FROM {run} run JOIN {comparison} c ON c.id = run.comparison_id
                WHERE c.target_id = t.id AND run.state = %s
                  AND run.result IN (%s, %s)
                  AND run.started_at IS NOT NULL AND run.finished_at IS NOT NULL
                ORDER BY run.id DESC LIMIT %s
            ) r
        ) m
    """  # noqa: S608 - table names from the models, values as parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [ids, State.DONE, Result.OK, Result.FAILED, TARGET_RECENT_RUNS])
        return {pk: median for pk, median in cursor.fetchall() if median is not None}


def _progress(
    c: Comparison, ok: int, failed: int, running: int, median: timedelta | None, basis: str
) -> Progress:
    per_side = max(c.scheduled_per_side, c.min_runs)
    total = 2 * len(c.benchmarks) * per_side
    look = 1 + max(0, (c.scheduled_per_side - c.min_runs)) // max(c.min_runs, 1)
    if c.state in (ComparisonState.QUEUED, ComparisonState.BUILDING):
        phase = "building"
        sides = {"A": c.build_a, "B": c.build_b} if c.build_a_id else {}
        detail = ", ".join(f"{s}: {b.state}{'/' + b.result if b.result else ''}"
                           for s, b in sides.items() if b)  # fmt: skip
    elif c.state == ComparisonState.DONE:
        phase = f"done: {c.verdict or c.result}"
        detail = c.error_code
    else:
        phase = "analysing" if c.state == ComparisonState.ANALYSING else f"running look {look}"
        detail = f"{running} running"
    if failed:
        detail = f"{detail}, {failed} failed (not data)".lstrip(", ")
    finished = c.state == ComparisonState.DONE
    eta = None
    if not finished and median is not None:
        remaining = max(0, total - ok)
        eta = remaining * median.total_seconds() / max(1, running)
    return Progress(phase, ok, total, failed, detail, running=running, eta_seconds=eta,
                    eta_basis=basis if eta is not None else "", finished=finished)  # fmt: skip
