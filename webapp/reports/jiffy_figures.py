"""The report's figure for a latency in whole jiffies (../shared/STATS.md v3): each side's
share of samples at each jiffy count, the pooled mode the tail share counts above, and
beside it the dispersion index D stored for the kernel's boots (`calibrate`), which says
whether boots differ beyond binomial sampling and so what the tail share can detect.

jiffy_histogram is pure (data in, Figure out); jiffy_figures reads what it needs."""

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from django.utils.safestring import SafeString

from stats import jiffies
from webapp.analysis.models import JiffyDispersion
from webapp.analysis.services import comparison_jiffy_ms, latest_dispersion
from webapp.comparisons.models import Comparison
from webapp.plotly import figure_html
from webapp.reports.figures import COLORS, SIDES, RunValues, _layout


def dispersion_note(d: JiffyDispersion | None) -> str:
    """One line on the stored D of side A's kernel, or why there is none."""
    if d is None:
        return ("dispersion index D: none stored for this kernel "
                "(manage.py calibrate --build ID --benchmark NAME)")  # fmt: skip
    if d.index is None:
        return f"dispersion index D undefined ({d.boots} boots, none above the mode)"
    branch = "boot-level effect" if d.index > jiffies.DISPERSION_LIMIT else "binomial sampling"
    return (f"dispersion index D {d.index:.2f} ({branch}) from {d.boots} A/A boots of this "
            f"kernel, {d.source}")  # fmt: skip


def jiffy_histogram(
    title: str,
    shares: Mapping[str, Mapping[int, float]],
    mode: int,
    *,
    runs: Mapping[str, int],
    tail_share: Mapping[str, float],
    note: str = "",
) -> go.Figure:
    """Grouped bars: per side, the share (%) of its samples at each jiffy count; the mode
    marked; each side's median per-run tail share in the legend."""
    fig = go.Figure()
    counts = sorted({k for s in shares.values() for k in s})
    for side in SIDES:
        if side not in shares:
            continue
        y = [100 * shares[side].get(k, 0.0) for k in counts]
        fig.add_trace(go.Bar(
            x=counts, y=y, name=(f"{side} ({runs.get(side, 0)} runs; tail share "
                                 f"{tail_share.get(side, 0.0):.1f}%)"),
            marker_color=COLORS[side],
            hovertemplate=f"{side}: %{{y:.2f}}% of samples at %{{x}} jiffies<extra></extra>",
        ))  # fmt: skip
    fig.add_vline(x=mode + 0.5, line_dash="dot", line_color="#555",
                  annotation_text=f"above the pooled mode ({mode}): the tail share",
                  annotation_position="top right")  # fmt: skip
    # The note under the title: the legend has the space below the plot.
    _layout(fig, f"{title}<br><sup>{note}</sup>" if note else title, "jiffies (whole ticks)",
            "% of the side's samples")  # fmt: skip
    fig.update_layout(barmode="group", yaxis_type="log", margin={"t": 70 if note else 40})
    return fig


def jiffy_figures(
    c: Comparison, bench: str, metric: str, runs: Sequence[RunValues]
) -> list[SafeString]:
    """The histogram of a metric in jiffies, or nothing when the kernels' HZ is unknown or
    differs (the engine then tests no jiffy statistic either)."""
    jiffy = comparison_jiffy_ms(c)
    if jiffy is None or not runs:
        return []
    per_run = {side: [jiffies.quantise(r.samples, jiffy) for r in runs if r.side == side]
               for side in SIDES}  # fmt: skip
    mode = jiffies.pooled_mode([j for side in SIDES for j in per_run[side]])
    shares = {side: jiffies.shares(js) for side, js in per_run.items() if js}
    tail = {side: float(np.median([jiffies.tail_share(j, mode) for j in js]))
            for side, js in per_run.items() if js}  # fmt: skip
    note = dispersion_note(latest_dispersion(c.build_a, bench, metric))
    fig = jiffy_histogram(f"{bench} {metric}: share of samples at each jiffy count", shares,
                          mode, runs={s: len(js) for s, js in per_run.items()},
                          tail_share=tail, note=note)  # fmt: skip
    return [figure_html(fig)]
