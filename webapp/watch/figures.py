"""The history chart of a watched tree: one primary metric of one branch and target across
its tested heads.

Pure, as webapp/reports/figures.py: plain data in (anything shaped like
webapp.watch.history's HistoryPoint and ChangeMark), a `plotly.graph_objects.Figure`
out; no Django, so it is tested on hand-made points.
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import plotly.graph_objects as go

# Verdict colours: the report's badges (webapp/reports/templates/reports/base.html).
VERDICT_COLORS = {
    "regression": "#a01010",
    "reliability-regression": "#a01010",
    "improvement": "#17692a",
    "significant-but-small": "#b07800",
    "significant-size-not-estimated": "#b07800",
    "inconclusive": "#4b3a86",
    "no-meaningful-change": "#777777",
    "": "#bbbbbb",
}
LINE = "#0072B2"  # Okabe-Ito blue
CHANGE = "#D55E00"  # Okabe-Ito vermillion: change points


class Point(Protocol):
    @property
    def sha(self) -> str: ...
    @property
    def comparison_id(self) -> int: ...
    @property
    def median(self) -> float: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...
    @property
    def n_runs(self) -> int: ...
    @property
    def verdict(self) -> str: ...
    @property
    def push_id(self) -> int: ...


class Change(Protocol):
    @property
    def push_id(self) -> int: ...
    @property
    def change_pct(self) -> float: ...
    @property
    def regression(self) -> bool: ...


@dataclass(frozen=True)
class Threshold:
    """The practical threshold the heads' comparisons judged the metric on: % of the
    value, or (memory) absolute, in the metric's unit."""

    value: float
    relative: bool = True

    def band(self, level: float) -> tuple[float, float]:
        half = abs(level) * self.value / 100 if self.relative else self.value
        return level - half, level + half

    @property
    def text(self) -> str:
        return f"±{self.value:g}%" if self.relative else f"±{self.value:g}"


def history_figure(
    title: str,
    unit: str,
    points: Sequence[Point],
    change_points: Sequence[Change] = (),
    *,
    threshold: Threshold | None = None,
    comparison_url: str = "/comparisons/{}/",
) -> go.Figure:
    """Each head's B-side median (line and markers coloured by its comparison's verdict on
    the metric) with its 95% CI as a band, x = the head's position in push order (integer
    ticks); change points as dashed vertical lines at the first head after the change.
    customdata holds each point's comparison URL (the page opens it on click).

    With `threshold`: the band of +-threshold around the median of the heads' medians,
    and a y axis that always spans it. Left to autoscale, the axis fills the chart with
    whatever the medians do, so that an A/A's noise of a fraction of the threshold looks
    like a trend; against the band, a move reads at its size."""
    fig = go.Figure()
    xs = list(range(1, len(points) + 1))
    with_ci = [(x, p) for x, p in zip(xs, points, strict=True) if p.ci_low is not None]
    if with_ci:
        band_x = [x for x, _ in with_ci]
        fig.add_trace(go.Scatter(
            x=band_x, y=[p.ci_high for _, p in with_ci], mode="lines", line={"width": 0},
            hoverinfo="skip", showlegend=False,
        ))  # fmt: skip
        fig.add_trace(go.Scatter(
            x=band_x, y=[p.ci_low for _, p in with_ci], mode="lines", line={"width": 0},
            fill="tonexty", fillcolor="rgba(0,114,178,0.18)", hoverinfo="skip",
            name="95% CI of the median (order statistics)",
        ))  # fmt: skip
    ci_text = [
        f"[{p.ci_low:.6g}, {p.ci_high:.6g}]" if p.ci_low is not None and p.ci_high is not None
        else "none (too few runs)"
        for p in points
    ]  # fmt: skip
    fig.add_trace(go.Scatter(
        x=xs, y=[p.median for p in points], mode="lines+markers", name="median of B's runs",
        line={"color": LINE, "width": 1.5},
        marker={"size": 9, "color": [VERDICT_COLORS.get(p.verdict, "#bbbbbb") for p in points],
                "line": {"color": "#222", "width": 0.5}},
        customdata=[[p.sha[:12], p.comparison_id, p.verdict or "no verdict", ci, p.n_runs,
                     comparison_url.format(p.comparison_id)]
                    for p, ci in zip(points, ci_text, strict=True)],
        hovertemplate=(f"head %{{customdata[0]}}<br>comparison %{{customdata[1]}}<br>"
                       f"median %{{y:.6g}} {unit}, 95% CI %{{customdata[3]}}<br>"
                       "%{customdata[4]} runs; %{customdata[2]}<extra></extra>"),
    ))  # fmt: skip
    position = {p.push_id: x for x, p in zip(xs, points, strict=True)}
    for cp in change_points:
        x = position.get(cp.push_id)
        if x is None:
            continue
        worse = "worse" if cp.regression else "better"
        fig.add_vline(
            x=x - 0.5, line={"color": CHANGE, "dash": "dash", "width": 1.5},
            annotation_text=f"{cp.change_pct:+.1f}% ({worse})",
            annotation_position="top", annotation_font={"color": CHANGE, "size": 11},
        )  # fmt: skip
    fig.update_layout(
        title={"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
        template="none", paper_bgcolor="white", plot_bgcolor="white", height=380,
        font={"family": "system-ui, sans-serif", "size": 12, "color": "#222"},
        margin={"l": 60, "r": 20, "t": 50, "b": 40}, hovermode="closest",
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0},
    )  # fmt: skip
    axes = {"showline": True, "linecolor": "#888", "zeroline": False, "showgrid": True,
            "gridcolor": "#e6e6e6", "ticks": "outside", "automargin": True}  # fmt: skip
    fig.update_xaxes(title_text="tested head (push order)", tickmode="linear", tick0=0,
                     dtick=head_step(len(points)), tickformat="d", **axes)  # fmt: skip
    fig.update_yaxes(title_text=unit, **axes)
    if threshold is not None and points:
        _threshold_band(fig, points, threshold)
    return fig


def head_step(n: int, ticks: int = 12) -> int:
    """The x ticks' step: a whole number of heads (1, 2, 5, 10, 20, 50, ...), the smallest
    that puts at most `ticks` ticks on `n` heads."""
    step = 1
    while n / step > ticks:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return step


def _threshold_band(fig: go.Figure, points: Sequence[Point], threshold: Threshold) -> None:
    """The +-threshold band around the median of the heads' medians, and the y range: the
    band and every median and CI end, padded."""
    level = statistics.median(p.median for p in points)
    low, high = threshold.band(level)
    fig.add_hrect(
        y0=low, y1=high, fillcolor="rgba(0,0,0,0.06)", line={"width": 0}, layer="below",
        annotation_text=f"threshold: {threshold.text} of the heads' median",
        annotation_position="top left", annotation_font={"color": "#555", "size": 11},
    )  # fmt: skip
    values = [low, high, *(p.median for p in points)]
    values += [v for p in points for v in (p.ci_low, p.ci_high) if v is not None]
    lo, hi = min(values), max(values)
    pad = 0.08 * (hi - lo)
    fig.update_yaxes(range=[lo - pad, hi + pad])
