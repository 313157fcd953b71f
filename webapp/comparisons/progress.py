"""What a front end shows of a comparison while it runs (CLI, pages)."""

from dataclasses import dataclass

from django.db.models import Count, Q

from webapp.comparisons.models import Comparison, ComparisonState
from webapp.states import Result, State


@dataclass(frozen=True)
class Progress:
    phase: str  # building, running look 1, analysing, done: regression, ...
    done: int  # runs that are data (ok)
    total: int  # ok runs needed for the next look (both sides, every benchmark)
    failed: int  # runs that ended otherwise (each replaced, or the comparison failed)
    detail: str


def progress(c: Comparison) -> Progress:
    counts = c.runs.aggregate(
        ok=Count("pk", filter=Q(result=Result.OK)),
        failed=Count("pk", filter=Q(state=State.DONE) & ~Q(result=Result.OK)),
        running=Count("pk", filter=Q(state=State.RUNNING)),
    )
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
        detail = f"{counts['running']} running"
    if counts["failed"]:
        detail = f"{detail}, {counts['failed']} failed (not data)".lstrip(", ")
    return Progress(phase, counts["ok"], total, counts["failed"], detail)
