"""What a sweep found: the read model its page, the API, the CLI and its mail share.

Per point: the point comparison's state and its primary's final row (the run-level engine's
verdict at that point), with Holm across the points on the rows' p values (a change at one
point stands only if it survives the number of points looked at). For the sweep: each
side's slope of the run-level primary against the axis and B's against A's (stats/sweeps.py
`scaling`), and for two points the difference-in-differences (`interaction`): decided once,
when every point has ended (services.conclude), from the runs stored then.

The rows judged are stored with the verdicts (the result's "points", with the metric and
statistic judged in the sweep's columns): a concluded sweep's summary reads them back and
reads no runs again. A sweep still running is summarised from its runs as they are.
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.registry import get as get_benchmark
from stats import sweeps
from stats.inputs import MetricInput, primary_statistics, side_values
from stats.sequential import holm
from webapp.alerts.messages import SweepFacts
from webapp.analysis.models import MetricVerdict, Verdict
from webapp.analysis.services import metric_inputs
from webapp.comparisons.detectable import two_digits
from webapp.comparisons.models import Comparison, ComparisonState
from webapp.comparisons.names import kernel_names
from webapp.sweeps.models import Sweep, SweepPoint

CHANGES = (Verdict.REGRESSION, Verdict.IMPROVEMENT)


@dataclass(frozen=True)
class PointRow:
    position: int
    value: str
    x: float | None
    comparison_id: int
    target: str
    cmdline_b: str
    state: str  # the point comparison's state, or its result once done ("ok", "failed", ...)
    verdict: str  # the point's primary verdict after Holm across the points; "" while it runs
    shift_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    p_value: float | None
    p_holm: float | None
    runs_a: tuple[float, ...]  # the run-level primary of each run, side A
    runs_b: tuple[float, ...]
    statistic: str = ""  # the judged run-level statistic ("p50"); "" without runs
    note: str = ""
    benchmark: str = ""  # the point's benchmark: on a variant axis, its own variant


ROW_FIELDS = frozenset(f.name for f in dataclasses.fields(PointRow))
ROW_RUNS = ("runs_a", "runs_b")


@dataclass(frozen=True)
class Judged:
    """The sweep's verdicts as services.conclude stores them: `result` holds the point
    rows judged ("points", stored_rows reads them back); `metric` and `statistic` are the
    run-level primary judged ("writer_duration", "p50")."""

    verdict: str
    interaction_verdict: str
    result: dict[str, object]
    error: str = ""
    metric: str = ""
    statistic: str = ""


@dataclass(frozen=True)
class SweepSummary:
    pk: int
    axis: str
    axis_label: str
    parameter: str
    values: tuple[str, ...]
    log_axis: bool
    benchmark: str
    metric: str
    statistic: str
    unit: str
    base_target: str
    state: str  # "running" or "done"
    verdict: str
    interaction_verdict: str
    result: dict[str, object]
    error: str
    points: tuple[PointRow, ...]
    sentence: str
    created_at: object
    finished_at: object
    requested_by: str
    finished_points: int = 0


def _primary(c: Comparison, benchmark: str) -> tuple[MetricInput, str] | None:
    """The point's primary metric input and its first primary statistic (the p50 of a
    latency, the value of a one-value metric)."""
    for m in metric_inputs(c):
        if m.benchmark == benchmark and m.primary and (stats := primary_statistics(m)):
            return m, stats[0]
    return None


def _runs(c: Comparison, benchmark: str) -> tuple[np.ndarray, np.ndarray, str, str, str, bool]:
    found = _primary(c, benchmark)
    if found is None:
        empty = np.empty(0)
        spec = get_benchmark(benchmark).spec.primary
        return empty, empty, spec.name, "", spec.unit, spec.better.value == "lower"
    m, statistic = found
    a, b = side_values(m, statistic, f"comparison {c.pk} {m.benchmark}/{m.name}")
    return a, b, m.name, statistic, m.unit, m.lower_is_better


def _final_row(c: Comparison, benchmark: str, metric: str, statistic: str) -> MetricVerdict | None:
    rows = MetricVerdict.objects.filter(
        comparison=c, benchmark=benchmark, metric=metric, statistic=statistic
    )
    return rows.order_by("-look", "-pk").first()


def point_benchmark(sweep: Sweep, c: Comparison) -> str:
    """The benchmark judged at a point: the sweep's, or on a variant axis the point's own
    variant of it (its comparison's one benchmark)."""
    if sweep.axis == Sweep.Axis.VARIANT and c.benchmarks:
        return str(c.benchmarks[0])
    return sweep.benchmark


def _point_rows(sweep: Sweep, alpha_of: dict[int, float]) -> list[PointRow]:
    points = list(SweepPoint.objects.filter(sweep=sweep).select_related("comparison__target"))
    raw = []
    for p in points:
        c = p.comparison
        bench = point_benchmark(sweep, c)
        a, b, metric, statistic, _, _ = _runs(c, bench)
        row = _final_row(c, bench, metric, statistic) if statistic else None
        raw.append((p, c, bench, a, b, row, statistic))
    # Holm over the points whose primary has a p value (a failed point has none).
    ps = {i: row.p_value for i, (*_, row, _) in enumerate(raw) if row and row.p_value is not None}
    adjusted = dict(zip(ps, holm(list(ps.values())), strict=True)) if ps else {}
    rows = []
    for i, (p, c, bench, a, b, row, statistic) in enumerate(raw):
        p_holm = float(adjusted[i]) if i in adjusted else None
        verdict, note = "", ""
        if c.state == ComparisonState.DONE and row is not None:
            verdict = row.verdict
            if verdict in CHANGES and p_holm is not None and p_holm > alpha_of[c.pk]:
                verdict = Verdict.INCONCLUSIVE
                note = (f"{row.verdict} at this point alone (p {row.p_value:.2g}), not after "
                        f"Holm across {len(ps)} points (p {p_holm:.2g})")  # fmt: skip
        elif c.state == ComparisonState.DONE:
            note = c.error_message or c.error_code
        rows.append(PointRow(
            position=p.position, value=p.value, x=p.x, comparison_id=c.pk,
            target=c.target.name, cmdline_b=c.cmdline_b,
            state=c.result if c.state == ComparisonState.DONE else c.state, verdict=verdict,
            shift_pct=row.shift_pct if row else None, ci_low_pct=row.ci_low_pct if row else None,
            ci_high_pct=row.ci_high_pct if row else None,
            p_value=row.p_value if row else None, p_holm=p_holm,
            runs_a=tuple(float(v) for v in a), runs_b=tuple(float(v) for v in b),
            statistic=statistic, note=note, benchmark=bench,
        ))  # fmt: skip
    return rows


def judge(sweep: Sweep) -> Judged:
    """The scaling verdict (and the interaction's for two points) from every point's runs."""
    comparisons = {p.comparison_id: p.comparison for p in sweep.points.select_related("comparison")}
    rows = _point_rows(sweep, {pk: c.alpha for pk, c in comparisons.items()})
    # A point without runs on both sides (failed, cancelled) is named, and left out.
    errors = [f"point {r.value} (#{r.comparison_id}) has no runs to judge: {r.note or r.state}"
              for r in rows if len(r.runs_a) < 2 or len(r.runs_b) < 2]  # fmt: skip
    usable = [r for r in rows if r.x is not None and len(r.runs_a) >= 2 and len(r.runs_b) >= 2]
    spec = get_benchmark(sweep.benchmark).spec
    primary = spec.primary
    lower = primary.better.value == "lower"
    result: dict[str, object] = {
        "points_used": [r.position for r in usable],
        "points": [_row_dict(r) for r in rows],
    }
    verdict, interaction_verdict = "", ""
    if len({r.x for r in usable}) >= 2:
        try:
            s = sweeps.scaling(
                [(r.x, r.runs_a) for r in usable], [(r.x, r.runs_b) for r in usable],  # type: ignore[misc]
                log_x=sweep.log_axis, lower_is_better=lower,
                threshold=spec.scaling_threshold, slope_threshold=spec.slope_threshold,
            )  # fmt: skip
            verdict = s.verdict
            result["scaling"] = _scaling_dict(s)
        except ValueError as exc:
            errors.append(f"no slope: {exc}")
    elif len(rows) > 2 or any(r.x is not None for r in rows):
        # Two labels (on, off) are a 2 x 2, not an axis: no slope is expected of them.
        errors.append("no slope: fewer than two points with a numeric axis value and runs")
    if len(rows) == 2 and all(len(r.runs_a) >= 2 and len(r.runs_b) >= 2 for r in rows):
        first, second = rows
        c = comparisons[first.comparison_id]
        # The primary's own % threshold; a threshold in the metric's unit (kB) is no % one.
        threshold = primary.threshold
        if primary.threshold_is_absolute or threshold is None:
            threshold = c.threshold_pct
        try:
            i = sweeps.interaction(first.runs_a, second.runs_a, first.runs_b, second.runs_b,
                                   lower_is_better=lower, threshold_pct=threshold)  # fmt: skip
            interaction_verdict = i.verdict
            result["interaction"] = {k: _finite(v) for k, v in vars(i).items()}
        except ValueError as exc:
            errors.append(f"no interaction: {exc}")
    return Judged(
        verdict, interaction_verdict, result, "; ".join(errors), metric=primary.name,
        statistic=_statistic(rows),
    )  # fmt: skip


def _statistic(rows: list[PointRow]) -> str:
    """The run-level statistic the rows' runs are of (every point's is the same)."""
    return next((r.statistic for r in rows if r.statistic), "")


def _row_dict(r: PointRow) -> dict[str, object]:
    """`r` as JSON (stored with the verdicts): runs as lists, non-finite numbers as null."""
    return {
        k: [float(x) for x in v] if k in ROW_RUNS else _finite(v)
        for k, v in dataclasses.asdict(r).items()
    }


def stored_rows(sweep: Sweep) -> list[PointRow] | None:
    """The point rows judged when `sweep` concluded, as judge() stored them; None while it
    runs, or for a sweep concluded before the rows were stored (then read live). A field
    added to PointRow since needs a default; one removed is ignored."""
    stored = sweep.result.get("points") if sweep.done and isinstance(sweep.result, dict) else None
    if not isinstance(stored, list):
        return None
    rows = []
    for d in stored:
        fields: dict[str, Any] = {k: v for k, v in d.items() if k in ROW_FIELDS}
        rows.append(PointRow(**fields | {k: tuple(fields[k]) for k in ROW_RUNS}))
    return rows


def _finite(v: object) -> object:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _scaling_dict(s: sweeps.Scaling) -> dict[str, object]:
    out: dict[str, object] = {k: _finite(v) for k, v in vars(s).items() if k not in ("a", "b")}
    for side, slope in (("a", s.a), ("b", s.b)):
        out[side] = {k: _finite(v) for k, v in vars(slope).items()}
    return out


def summary(sweep: Sweep) -> SweepSummary:
    """The sweep as its page, the API and the CLI show it: a concluded sweep from what
    was stored when it concluded (no run is read), one still running from its runs."""
    rows = stored_rows(sweep)
    if rows is None:
        points = sweep.points.select_related("comparison")
        comparisons = {p.comparison_id: p.comparison for p in points}
        rows = _point_rows(sweep, {pk: c.alpha for pk, c in comparisons.items()})
        finished = sum(1 for c in comparisons.values() if c.state == ComparisonState.DONE)
    else:
        finished = len(rows)  # a sweep concludes once every point has ended
    primary = get_benchmark(sweep.benchmark).spec.primary
    # The verdict's numbers; the rows stored beside them are `points`.
    stored = sweep.result if isinstance(sweep.result, dict) else {}
    result = {k: v for k, v in stored.items() if k != "points"}
    return SweepSummary(
        pk=sweep.pk, axis=sweep.axis, axis_label=axis_label(sweep), parameter=sweep.parameter,
        values=tuple(sweep.values), log_axis=sweep.log_axis, benchmark=sweep.benchmark,
        metric=sweep.metric or primary.name, statistic=sweep.statistic or _statistic(rows),
        unit=primary.unit,
        base_target=sweep.base_target.name, state="done" if sweep.done else "running",
        verdict=sweep.verdict, interaction_verdict=sweep.interaction_verdict,
        result=result, error=sweep.error_message, points=tuple(rows),
        sentence=sentence(sweep), created_at=sweep.created_at, finished_at=sweep.finished_at,
        requested_by=sweep.requested_by, finished_points=finished,
    )  # fmt: skip


def axis_label(sweep: Sweep) -> str:
    if sweep.axis == Sweep.Axis.TOPOLOGY:
        return "vCPUs" + (" (log scale)" if sweep.log_axis else "")
    return sweep.parameter + (" (log scale)" if sweep.log_axis else "")


def _est(d: dict[str, object], key: str) -> str:
    """`key`'s estimate with its CI ("0.52 [0.41, 0.63]") from a stored result's dict."""
    low, high = (
        d.get(f"{key}_ci_low" if key != "estimate" else "ci_low"),
        d.get(f"{key}_ci_high" if key != "estimate" else "ci_high"),
    )
    value = d.get(key)
    if not isinstance(value, float | int):
        return "undefined"
    # Three significant digits: a ratio of slopes near 1 needs them (1.21 [1.17, 1.27]).
    ci = f" [{low:.3g}, {high:.3g}]" if isinstance(low, float | int) and \
        isinstance(high, float | int) else ""  # fmt: skip
    return f"{value:.3g}{ci}"


def sentence(sweep: Sweep) -> str:
    """One line for the page's head, the CLI and the mail."""
    if not sweep.done:
        return "running"
    result = sweep.result if isinstance(sweep.result, dict) else {}
    parts = []
    s = result.get("scaling")
    if isinstance(s, dict):
        kind = "exponent" if sweep.log_axis else "slope"
        a, b = s["a"], s["b"]
        basis = (f"B/A {_est(s, 'ratio')}" if s.get("basis") == sweeps.RATIO
                 else f"B - A {_est(s, 'difference')}")  # fmt: skip
        parts.append(f"{sweep.verdict}: A's {kind} {_est(a, 'estimate')}, B's "
                     f"{_est(b, 'estimate')}; {basis}")  # fmt: skip
    i = result.get("interaction")
    if isinstance(i, dict):
        parts.append(f"{sweep.interaction_verdict}: B's effect at the second point differs "
                     f"from the first by {_est(i, 'estimate')}%")  # fmt: skip
    if sweep.error_message:
        parts.append(sweep.error_message)
    return "; ".join(parts) or "no verdict"


def first_point(sweep: Sweep) -> Comparison:
    """The comparison of the sweep's first point: its tree, kernels and visibility are
    every point's."""
    return Comparison.objects.select_related(
        "revision_a__tree", "revision_b__tree", "revision_b__series", "target"
    ).get(sweep_point__sweep=sweep, sweep_point__position=0)


def mail_facts(sweep: Sweep) -> SweepFacts:
    """What the sweep's mail says (webapp/alerts/sweep.py and the mail's rendering)."""
    s = summary(sweep)
    c = first_point(sweep)
    a, b = kernel_names(c)
    points = []
    for p in s.points:
        shift = ""
        if p.shift_pct is not None:
            shift = f"{p.shift_pct:+.2f}%"
            if p.ci_low_pct is not None and p.ci_high_pct is not None:
                shift += f" [{two_digits(p.ci_low_pct)}, {two_digits(p.ci_high_pct)}]"
        points.append((p.value, p.verdict or p.state, shift))
    kernels = f"{b.text} against {a.text}"
    if c.cmdline_b != c.cmdline_a:
        kernels += f" (B's command line: {c.cmdline_b})"
    return SweepFacts(
        sweep_id=sweep.pk, tree=c.revision_a.tree.name, kernels=kernels,
        benchmark=s.benchmark, statistic=f"{s.metric} {s.statistic}".strip(),
        axis=s.axis_label, sentence=s.sentence, points=tuple(points),
    )  # fmt: skip
