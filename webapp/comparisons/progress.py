"""What a front end shows of a comparison while it runs and when it ends (CLI, pages)."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q
from django.urls import reverse

from webapp.analysis.engine import SEVERITY
from webapp.analysis.models import MetricVerdict
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
    per_side = max(c.runs_target, c.min_runs)
    total = 2 * len(c.benchmarks) * per_side
    look = 1 + max(0, (c.runs_target - c.min_runs)) // max(c.min_runs, 1)
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


def verdict_rows(c: Comparison) -> list[tuple[str, ...]]:
    """The verdict table as text cells, the worst first, each benchmark's primary first."""
    rows = sorted(
        MetricVerdict.objects.filter(comparison=c),
        key=lambda v: (SEVERITY.index(v.verdict), not v.is_primary, v.benchmark, v.metric),
    )
    out: list[tuple[str, ...]] = []
    for v in rows:
        unit = v.details.get("unit", "")
        shift = "-" if v.shift_pct is None else f"{v.shift_pct:+.2f}"
        if v.ci_low_pct is not None and v.ci_high_pct is not None:
            shift += f" [{v.ci_low_pct:+.2f}, {v.ci_high_pct:+.2f}]"
        out.append((
            f"{v.benchmark}/{v.metric}{' *' if v.is_primary else ''}", v.statistic,
            f"{v.median_a:.6g} {unit}".strip(), f"{v.median_b:.6g} {unit}".strip(), shift,
            _p(v.p_value), _p(v.p_adjusted), v.verdict, "; ".join(v.warnings),
        ))  # fmt: skip
    return out


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"


def report_url(c: Comparison) -> str:
    base = str(settings.RCUBENCH_PUBLIC_URL).rstrip("/")
    return base + reverse("reports:comparison", args=[c.pk])
