"""Plotly figure builders for the comparison report.

Pure: plain sequences and dataclasses in, `plotly.graph_objects.Figure` out; no Django and
no database, so each builder is tested on hand-checkable data (ARCHITECTURE.md layer rule).
Nothing here knows a benchmark: figures over several metrics are drawn from the
FigureSpec a benchmark declares.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from benchmarks.spec import FigureSpec
from stats.bisection import Bar, Effect
from stats.inputs import RunSamples, run_values

SIDES = ("A", "B")
# Okabe-Ito blue and vermillion: distinguishable with the common colour-vision deficiencies.
COLORS = {"A": "#0072B2", "B": "#D55E00"}
# A pooled latency metric holds up to 96 runs x 10,000 samples per side; the ECDF is drawn
# through this many of its exact corners so that the page stays small.
ECDF_MAX_POINTS = 2000
HIST_BINS = 60
# A latency ECDF's initial view ends at this pooled quantile (p99.5): the rest is the tail.
ECDF_VIEW_QUANTILE = 0.995
# A log axis with full values at its ticks. Left to itself, Plotly labels an axis spanning
# one to a few decades with single digits between the powers of ten ("9 10 2 3", the 2
# meaning 20); with a tick format it writes each tick's value ("9 10 20 30").
LOG_AXIS = {"type": "log", "tickformat": "~g"}


@dataclass(frozen=True)
class RunValues:
    """One run's samples of one metric (a single value for Kind.VALUE metrics)."""

    side: str  # "A" or "B"
    order: int  # position in the comparison's run schedule
    index: int  # 0-based slot within its side and benchmark
    samples: Sequence[float]


def run_value(samples: Sequence[float]) -> float:
    """A run's one value: the median of its samples (the engine's p50), or its value."""
    return float(np.median(np.asarray(samples, dtype=float)))


def ecdf_points(
    values: Sequence[float], max_points: int = ECDF_MAX_POINTS
) -> tuple[list[float], list[float]]:
    """Corners of the empirical CDF, starting from (min, 0), for a step line ("hv").

    Up to `max_points` samples every corner is returned; beyond, the corners at evenly spaced
    ranks plus the minimum and maximum: exact points of the true ECDF, only fewer of them.
    """
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n == 0:
        return [], []
    if n <= max_points:
        idx = np.arange(n)
    else:
        ranks = np.ceil(np.arange(1, max_points + 1) * n / max_points).astype(int) - 1
        idx = np.unique(np.concatenate(([0], ranks)))
    return [float(x[0]), *x[idx].tolist()], [0.0, *((idx + 1) / n).tolist()]


def ecdf_figure(
    title: str,
    unit: str,
    samples: Mapping[str, Sequence[float]],
    *,
    runs: Mapping[str, int] | None = None,
    log_x: bool = False,
    view_quantile: float | None = None,
) -> go.Figure:
    """ECDF of each side's pooled samples (`samples[side]`); `runs[side]` goes in the legend.

    For latencies (`log_x`, `view_quantile`): a log x axis where every sample is positive,
    and the initial view from the smallest sample to the pooled `view_quantile` quantile,
    so that the body of the distribution is not squashed against the axis by a far max.
    The traces keep every corner: zooming out (double-click twice) shows the whole tail."""
    fig = go.Figure()
    for side in SIDES:
        values = samples.get(side, ())
        if not len(values):
            continue
        xs, ys = ecdf_points(values)
        label = f"{side}: {len(values)} samples"
        if runs and side in runs:
            label += f", {runs[side]} runs"
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, mode="lines", line_shape="hv", name=label,
                line={"color": COLORS[side], "width": 2},
                hovertemplate=f"%{{x:.6g}} {unit}<br>F = %{{y:.4f}}<extra>{side}</extra>",
            )
        )  # fmt: skip
    log = log_x and all_positive(samples)
    x_range = None
    notes = ["log scale"] if log else []
    if view_quantile is not None:
        x_range = ecdf_view(samples, view_quantile, log=log)
        if x_range is not None:
            notes.append(f"shown to p{100 * view_quantile:g}, zoom out for the tail")
    x_title = f"{unit} ({', '.join(notes)})" if notes else unit
    _layout(fig, title, x_title, "fraction of samples ≤ x")
    fig.update_yaxes(range=[0, 1.02])
    if log:
        fig.update_xaxes(**LOG_AXIS)
    if x_range is not None:
        fig.update_xaxes(range=list(x_range))
    return fig


def all_positive(samples: Mapping[str, Sequence[float]]) -> bool:
    """Whether every sample of every side can sit on a log axis (and there is one)."""
    arrays = [np.asarray(v, dtype=float) for v in samples.values() if len(v)]
    return bool(arrays) and all(bool((a > 0).all()) for a in arrays)


def ecdf_view(
    samples: Mapping[str, Sequence[float]], quantile: float, *, log: bool
) -> tuple[float, float] | None:
    """The x range from the smallest pooled sample to the pooled `quantile`, padded by 2%
    of its width on each side; in log10 units on a log axis (plotly's convention). None
    when there are no samples, or when the quantile is the max (nothing to cut)."""
    arrays = [np.asarray(v, dtype=float) for v in samples.values() if len(v)]
    if not arrays:
        return None
    pooled = np.concatenate(arrays)
    lo, hi = float(pooled.min()), float(np.quantile(pooled, quantile))
    if hi >= float(pooled.max()) or hi <= lo:
        return None
    if log:
        lo, hi = float(np.log10(lo)), float(np.log10(hi))
    pad = 0.02 * (hi - lo)
    return lo - pad, hi + pad


# What each run-level statistic is called on an axis (the engine's names: stats.inputs).
STATISTIC_LABELS = {"value": "value", "p50": "median", "mean": "mean", "p90": "p90"}


def run_statistic(samples: Sequence[float], statistic: str) -> float:
    """One run's `statistic` as the engine computes it (stats.inputs.run_values)."""
    return float(run_values([RunSamples(0, tuple(samples))], statistic, "run")[0])


def run_level_figure(title: str, unit: str, runs: Sequence[RunValues], statistic: str) -> go.Figure:
    """One run-level statistic (a run's value, or its samples' median, mean or p90), as the
    engine tests it: left, each run's value against its position in the run schedule, A and
    B coloured, a dotted line at each side's median (drift shows as a slope); right, each
    side's ECDF of those values, where boot-level modes show as steps (an ECDF of pooled
    samples hides them; STATS.md v3)."""
    label = f"per-run {STATISTIC_LABELS[statistic]}"
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.1)
    for side in SIDES:
        mine = sorted((r for r in runs if r.side == side), key=lambda r: r.order)
        if not mine:
            continue
        ys = [run_statistic(r.samples, statistic) for r in mine]
        fig.add_trace(
            go.Scatter(
                x=[r.order for r in mine], y=ys, mode="markers", name=f"{side}: {len(mine)} runs",
                legendgroup=side, marker={"color": COLORS[side], "size": 7, "opacity": 0.85},
                customdata=[r.index for r in mine],
                hovertemplate=(f"run {side}%{{customdata}}, order %{{x}}<br>%{{y:.6g}} {unit}"
                               f"<extra>{side}</extra>"),
            ), row=1, col=1,
        )  # fmt: skip
        fig.add_hline(
            y=float(np.median(ys)), line={"color": COLORS[side], "dash": "dot", "width": 1},
            row=1, col=1,
        )  # fmt: skip
        x, y = ecdf_points(ys)
        fig.add_trace(
            go.Scatter(
                x=x, y=y, mode="lines", line={"shape": "hv", "color": COLORS[side]},
                name=f"ECDF {side}", legendgroup=side, showlegend=False,
                hovertemplate=f"%{{x:.6g}} {unit}<br>F %{{y:.3f}}<extra>{side}</extra>",
            ), row=1, col=2,
        )  # fmt: skip
    _layout(fig, title, "run order (position in the schedule)", f"{label} ({unit})")
    fig.update_xaxes(title_text=f"{label} ({unit})", row=1, col=2)
    fig.update_yaxes(title_text="share of runs <= x", range=[0, 1.02], row=1, col=2)
    return fig


def log_histogram(
    title: str, unit: str, samples: Mapping[str, Sequence[float]], bins: int = HIST_BINS
) -> go.Figure:
    """Histogram of each side's samples over log-spaced bins shared by both sides, drawn as
    step outlines on a log x axis; heights are fractions of the side's samples, so sides
    with different sample counts compare. Values <= 0 cannot sit on a log axis: they are
    left out and counted in the title."""
    arrays = {s: np.asarray(samples.get(s, ()), dtype=float) for s in SIDES}
    positive = {s: a[a > 0] for s, a in arrays.items()}
    dropped = sum(int((a <= 0).sum()) for a in arrays.values())
    present = [a for a in positive.values() if a.size]
    fig = go.Figure()
    if present:
        lo = min(float(a.min()) for a in present)
        hi = max(float(a.max()) for a in present)
        if hi <= lo:  # all samples equal: one bin around them
            lo, hi = lo / 1.01, hi * 1.01
        edges = np.geomspace(lo, hi, bins + 1)
        for side in SIDES:
            a = positive[side]
            if not a.size:
                continue
            counts, _ = np.histogram(a, edges)
            frac = counts / a.size
            fig.add_trace(
                go.Scatter(
                    x=edges.tolist(), y=[*frac.tolist(), float(frac[-1])], mode="lines",
                    line_shape="hv", fill="tozeroy", fillcolor=_rgba(COLORS[side], 0.18),
                    line={"color": COLORS[side], "width": 1.5}, name=f"{side}: {a.size} samples",
                    hovertemplate=f"from %{{x:.6g}} {unit}: %{{y:.4f}}<extra>{side}</extra>",
                )
            )  # fmt: skip
    if dropped:
        title += f" ({dropped} samples <= 0 not shown)"
    _layout(fig, title, f"{unit} (log scale)", "fraction of samples per bin")
    fig.update_xaxes(**LOG_AXIS)
    return fig


def sweep_figure(
    figure: FigureSpec, per_run: Mapping[str, Mapping[str, Sequence[float]]], unit: str = ""
) -> go.Figure:
    """A benchmark's declared sweep: each line's metric against x, per side, as the median
    over runs with its interquartile band (one trace pair per side and line; x values
    without runs are left out). `per_run[side][metric]` holds one value per run; `unit` is
    the metrics' unit, for the hover text."""
    fig = go.Figure()
    x_hover = " ".join(filter(None, (figure.x_name, "%{x}", figure.x_unit)))
    y_unit = f" {unit}" if unit else ""
    for side in SIDES:
        metrics = per_run.get(side, {})
        for line in figure.lines:
            xs: list[float] = []
            med: list[float] = []
            q1: list[float] = []
            q3: list[float] = []
            for x in figure.x:
                v = np.asarray(metrics.get(line.metric_at(x), ()), dtype=float)
                if not v.size:
                    continue
                xs.append(x)
                med.append(float(np.median(v)))
                low, high = np.quantile(v, [0.25, 0.75])
                q1.append(float(low))
                q3.append(float(high))
            if not xs:
                continue
            name = f"{side} {line.label}"
            fig.add_trace(
                go.Scatter(
                    x=[*xs, *xs[::-1]], y=[*q3, *q1[::-1]], fill="toself", mode="lines",
                    line={"width": 0}, fillcolor=_rgba(COLORS[side], 0.15), hoverinfo="skip",
                    name=f"{name} IQR", legendgroup=name, showlegend=False,
                )
            )  # fmt: skip
            fig.add_trace(
                go.Scatter(
                    x=xs, y=med, mode="lines+markers", name=f"{name} (median, IQR band)",
                    legendgroup=name, line={"color": COLORS[side], "dash": line.dash, "width": 2},
                    customdata=list(zip(q1, q3, strict=True)),
                    hovertemplate=(f"{x_hover}: median %{{y:.6g}}{y_unit}"
                                   "<br>IQR [%{customdata[0]:.6g}, %{customdata[1]:.6g}]"
                                   f"<extra>{name}</extra>"),
                )
            )  # fmt: skip
    _layout(fig, figure.title, figure.x_label, figure.y_label)
    fig.update_xaxes(tickvals=list(figure.x))
    return fig


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> None:
    fig.update_layout(
        title={"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
        # No template: a named one embeds ~7 kB of styling in every figure of the page.
        template="none",
        paper_bgcolor="white",
        plot_bgcolor="white",
        font={"family": "system-ui, sans-serif", "size": 12, "color": "#222"},
        height=380,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        # Below the plot: above it, the legend would run into the title.
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0},
        hovermode="closest",
    )
    axes = {"showline": True, "linecolor": "#888", "zeroline": False, "showgrid": True,
            "gridcolor": "#e6e6e6", "ticks": "outside", "automargin": True}  # fmt: skip
    fig.update_xaxes(title_text=x_title, **axes)
    fig.update_yaxes(title_text=y_title, **axes)


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


# --- bisection ------------------------------------------------------------------------

# A patch's bar whose CI lies within the threshold (or has no CI): drawn, but not coloured.
QUIET_BAR = "#bdbdbd"


def waterfall_figure(
    title: str,
    unit: str,
    labels: Sequence[str],
    subjects: Sequence[str],
    bars: Sequence[Bar],
    *,
    threshold: float = 0.0,
    original: Effect | None = None,
) -> go.Figure:
    """A per-patch attribution as a waterfall (bars from stats.bisection.waterfall, one per
    patch in order, `labels` and `subjects` naming them): each patch's effect against its
    parent as a bar from where the ones before it ended, its CI as an error bar at the
    bar's end. A bar whose CI lies beyond the threshold is coloured (vermillion up, blue
    down), the others grey; a patch without a measurement is an empty slot marked "not
    measured". Last, the bars' sum beside the original comparison's effect and its CI, to
    read one against the other; a band marks +-threshold around zero."""
    fig = go.Figure()
    x = list(labels)
    shifts = [b.effect.shift if b.effect is not None else 0.0 for b in bars]
    colors = [
        (COLORS["B"] if s > 0 else COLORS["A"]) if b.beyond_threshold else QUIET_BAR
        for b, s in zip(bars, shifts, strict=True)
    ]
    hover = [f"{subject}<br>{_effect_hover(b.effect, unit)}"
             for subject, b in zip(subjects, bars, strict=True)]  # fmt: skip
    fig.add_trace(
        go.Bar(
            x=x, y=shifts, base=[b.start for b in bars], name="each patch against its parent",
            marker={"color": colors}, customdata=hover,
            hovertemplate="%{x}: %{customdata}<extra></extra>",
        )
    )  # fmt: skip
    with_ci = [b for b in bars if b.effect is not None and b.effect.ci_low is not None
               and b.effect.ci_high is not None]  # fmt: skip
    if with_ci:
        fig.add_trace(_ci_trace(
            [x[b.position - 1] for b in with_ci], [b.start for b in with_ci],
            [b.effect for b in with_ci if b.effect is not None], "95% CI of each patch",
        ))  # fmt: skip
    for b in bars:
        if b.effect is None:
            fig.add_annotation(
                x=x[b.position - 1],
                y=b.start,
                text="not measured",
                showarrow=False,
                yshift=10,
                font={"size": 11, "color": "#666"},
            )
    total = sum(shifts)
    fig.add_trace(
        go.Bar(
            x=["sum"], y=[total], base=[0.0], name="sum of the patches", marker={"color": "#555"},
            hovertemplate=f"sum of the patches: %{{y:+.4g}} {unit}<extra></extra>",
        )
    )  # fmt: skip
    if original is not None:
        fig.add_trace(_ci_trace(["original"], [0.0], [original], "the original comparison",
                                symbol="diamond", size=10))  # fmt: skip
    if threshold > 0:
        fig.add_hrect(y0=-threshold, y1=threshold, fillcolor="#f0f0f0", line_width=0, layer="below")
    _layout(fig, title, "patch (in series order)", f"effect ({unit})")
    fig.update_layout(barmode="overlay", showlegend=True)
    fig.update_yaxes(zeroline=True, zerolinecolor="#888")
    return fig


def _ci_trace(x: Sequence[str], starts: Sequence[float], effects: Sequence[Effect], name: str,
              *, symbol: str = "line-ew", size: int = 14) -> go.Scatter:  # fmt: skip
    """Each effect's shift (from `starts`) as a marker with its CI as the error bar."""
    ends = [s + e.shift for s, e in zip(starts, effects, strict=True)]
    return go.Scatter(
        x=list(x), y=ends, mode="markers", name=name,
        marker={"color": "#222", "symbol": symbol, "size": size, "line": {"width": 2}},
        error_y={"type": "data", "symmetric": False, "color": "#222", "thickness": 1.5,
                 "array": [_or(e.ci_high, e.shift) - e.shift for e in effects],
                 "arrayminus": [e.shift - _or(e.ci_low, e.shift) for e in effects]},
        hoverinfo="skip",
    )  # fmt: skip


def _or(x: float | None, default: float) -> float:
    return default if x is None else x


def _effect_hover(e: Effect | None, unit: str) -> str:
    if e is None:
        return "not measured"
    ci = "" if e.ci_low is None or e.ci_high is None else f" [{e.ci_low:+.4g}, {e.ci_high:+.4g}]"
    return f"{e.shift:+.4g} {unit}{ci}"


# --- diagnosis (traced runs) ----------------------------------------------------------

# The grace-period phases of the stacked bars: Okabe-Ito colours apart from the sides'.
PHASE_COLORS = ("#009E73", "#E69F00", "#CC79A7")


def phase_bars_figure(
    title: str,
    unit: str,
    medians: Mapping[str, Mapping[str, float]],
    phases: Sequence[tuple[str, str]],
    *,
    whole: str = "",
) -> go.Figure:
    """A grace period's phases stacked, one bar per side (`medians[side][phase]`: the
    median over a side's traced runs of each run's median; `phases`: (key, label) in
    stacking order). A median of sums is not the sum of the medians: `whole`'s median
    (the grace period's), when given, is marked on each bar so that the gap shows. A side
    with no values has no bar."""
    fig = go.Figure()
    sides = [s for s in SIDES if any(p in medians.get(s, {}) for p, _ in phases)]
    for i, (key, label) in enumerate(phases):
        xs = [medians[s].get(key, 0.0) for s in sides]
        color = PHASE_COLORS[i % len(PHASE_COLORS)]
        fig.add_trace(
            go.Bar(
                x=xs, y=sides, orientation="h", name=label, marker={"color": color},
                hovertemplate=f"side %{{y}}: {label} %{{x:.4g}} {unit}<extra></extra>",
            )
        )  # fmt: skip
    marked = [s for s in sides if whole in medians.get(s, {})]
    if whole and marked:
        fig.add_trace(
            go.Scatter(
                x=[medians[s][whole] for s in marked], y=marked, mode="markers",
                name="whole grace period (median)",
                marker={"symbol": "line-ns-open", "size": 26, "color": "#222",
                        "line": {"width": 2}},
                hovertemplate=f"side %{{y}}: grace period %{{x:.4g}} {unit}<extra></extra>",
            )
        )  # fmt: skip
    _layout(fig, title, f"{unit} (medians over the side's usable traced runs)", "side")
    fig.update_layout(barmode="stack", height=260)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(SIDES)), showgrid=False)
    return fig


def scan_histogram_figure(title: str, counts: Mapping[str, Mapping[int, int]]) -> go.Figure:
    """Grace periods by the number of FQS scans each needed, per side, as shares of the
    side's grace periods (sides traced in different numbers of runs compare); the counts
    are in the legend and the hover."""
    fig = go.Figure()
    scans = sorted({k for side in counts.values() for k in side})
    for side in SIDES:
        got = counts.get(side, {})
        total = sum(got.values())
        if not total:
            continue
        ns = [got.get(k, 0) for k in scans]
        fig.add_trace(
            go.Bar(
                x=scans, y=[n / total for n in ns], customdata=ns,
                name=f"{side}: {total} grace periods", marker={"color": COLORS[side]},
                hovertemplate=(f"side {side}, %{{x}} scans: %{{customdata}} grace periods "
                               "(%{y:.1%})<extra></extra>"),
            )
        )  # fmt: skip
    _layout(fig, title, "FQS scans in the grace period", "share of the side's grace periods")
    fig.update_layout(barmode="group")
    fig.update_xaxes(tickmode="array", tickvals=scans)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%")
    return fig


@dataclass(frozen=True)
class AxisPoint:
    """One point of a sweep, one side: the axis value, each run's run-level primary, and
    the median's CI (drawn as the line's error bar)."""

    x: float
    runs: Sequence[float]
    median_low: float
    median_high: float


def scaling_figure(
    title: str, x_label: str, y_label: str, sides: Mapping[str, Sequence[AxisPoint]],
    *, log_x: bool, log_y: bool,
) -> go.Figure:  # fmt: skip
    """A sweep's curves: each run's run-level primary as a point (spread a little along the
    axis so that the runs of one point do not hide each other), and per side the medians
    joined by a line, each with its CI as an error bar."""
    fig = go.Figure()
    offset = {"A": -1, "B": 1}
    for side in SIDES:
        points = sorted(sides.get(side, ()), key=lambda p: p.x)
        if not points:
            continue
        xs: list[float] = []
        ys: list[float] = []
        for p in points:
            spread = p.x * 0.03 if log_x else 0.03 * (points[-1].x - points[0].x or 1.0)
            xs.extend(p.x + offset[side] * spread for _ in p.runs)
            ys.extend(p.runs)
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name=f"{side} runs", legendgroup=side,
            marker={"color": _rgba(COLORS[side], 0.45), "size": 5},
            hovertemplate=f"{side} run: %{{y:.6g}}<extra></extra>",
        ))  # fmt: skip
        med = [float(np.median(np.asarray(p.runs, dtype=float))) for p in points]
        fig.add_trace(go.Scatter(
            x=[p.x for p in points], y=med, mode="lines+markers", name=f"{side} median (CI)",
            legendgroup=side, line={"color": COLORS[side], "width": 2},
            error_y={"type": "data", "symmetric": False,
                     "array": [p.median_high - m for p, m in zip(points, med, strict=True)],
                     "arrayminus": [m - p.median_low for p, m in zip(points, med, strict=True)]},
            hovertemplate=f"{side} median %{{y:.6g}} at %{{x}}<extra></extra>",
        ))  # fmt: skip
    _layout(fig, title, x_label, y_label)
    if log_x:
        fig.update_xaxes(**LOG_AXIS)
    if log_y:
        fig.update_yaxes(**LOG_AXIS)
    xs_all = sorted({p.x for side in sides.values() for p in side})
    fig.update_xaxes(tickvals=xs_all)
    return fig
