"""The history chart of a watched tree: one primary metric of one branch and target across
its tested heads.

Pure, as webapp/reports/figures.py: plain data in (anything shaped like
webapp.watch.history's HistoryPoint and ChangeMark), a `plotly.graph_objects.Figure`
out; no Django, so it is tested on hand-made points.
"""

from collections.abc import Sequence
from typing import Protocol

import plotly.graph_objects as go

# Verdict colours: the report's badges (webapp/reports/templates/reports/base.html).
VERDICT_COLORS = {
    "regression": "#a01010",
    "reliability-regression": "#a01010",
    "improvement": "#17692a",
    "significant-but-small": "#b07800",
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


def history_figure(
    title: str,
    unit: str,
    points: Sequence[Point],
    change_points: Sequence[Change] = (),
    *,
    comparison_url: str = "/comparisons/{}/",
) -> go.Figure:
    """Each head's B-side median (line and markers coloured by its comparison's verdict on
    the metric) with its 95% CI as a band, x = the head's position in push order; change
    points as dashed vertical lines at the first head after the change. customdata holds
    each point's comparison URL (the page opens it on click)."""
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
    fig.update_xaxes(title_text="tested head (push order)", **axes)
    fig.update_yaxes(title_text=unit, **axes)
    return fig
