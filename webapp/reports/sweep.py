"""The sweep page: its points (each a link to its comparison, with the point's verdict
after Holm), the curves of both sides, and the scaling and interaction verdicts. It reads
the sweep's read model (webapp/sweeps/summary.py), as the API and the CLI do."""

from dataclasses import dataclass

import numpy as np
from django.utils.safestring import SafeString

from stats.sweeps import median_ci
from webapp import access
from webapp.access import AnyUser
from webapp.plotly import PLOTLY_VERSION, figure_html
from webapp.reports import figures
from webapp.sweeps import services
from webapp.sweeps.summary import PointRow, SweepSummary, summary

POLL_SECONDS = 30


@dataclass(frozen=True)
class SweepPage:
    summary: SweepSummary
    figure: SafeString | None
    can_cancel: bool
    poll_seconds: int = POLL_SECONDS
    plotly_version: str = PLOTLY_VERSION


def _side(rows: tuple[PointRow, ...], side: str) -> list[figures.AxisPoint]:
    out = []
    for r in rows:
        runs = r.runs_a if side == "A" else r.runs_b
        if r.x is None or len(runs) < 2:
            continue
        low, high = median_ci(np.asarray(runs, dtype=float))
        out.append(figures.AxisPoint(x=r.x, runs=runs, median_low=low, median_high=high))
    return out


def curves(s: SweepSummary) -> SafeString | None:
    """Both sides' curves, once two points have runs with a place on the axis."""
    sides = {side: _side(s.points, side) for side in figures.SIDES}
    if not any(len(points) >= 1 for points in sides.values()):
        return None
    statistic = f"{s.metric} {s.statistic}".strip()
    fig = figures.scaling_figure(
        f"{s.benchmark}: {statistic} of each run against {s.axis_label}", s.axis_label,
        f"{statistic} ({s.unit})" + (" (log scale)" if s.log_axis else ""), sides,
        log_x=s.log_axis, log_y=s.log_axis,
    )  # fmt: skip
    return figure_html(fig)


def sweep_page(user: AnyUser, pk: int) -> SweepPage:
    """The page; 404 where the user may not see the sweep's comparisons."""
    sweep = access.get_visible(services.visible_sweeps(user), pk=pk)
    s = summary(sweep)
    first = sweep.points.select_related("comparison__revision_a").get(position=0)
    return SweepPage(
        summary=s, figure=curves(s),
        can_cancel=s.state != "done" and access.can_cancel(user, first.comparison),
    )  # fmt: skip
