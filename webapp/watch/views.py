"""A watched tree's history page: a chart per branch, target and primary metric."""

from dataclasses import dataclass

import plotly.io as pio
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from webapp import access
from webapp.plotly import PLOTLY_VERSION
from webapp.watch import figures, history

_NO_BUTTONS = ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"]


@dataclass(frozen=True)
class Chart:
    series: history.Series
    html: SafeString


def _chart(s: history.Series, comparison_url: str) -> Chart:
    title = f"{s.branch} · {s.target} · {s.benchmark}/{s.metric}"
    threshold = (figures.Threshold(s.threshold, s.threshold_relative)
                 if s.threshold is not None else None)  # fmt: skip
    fig = figures.history_figure(title, s.unit, s.points, s.change_points, threshold=threshold,
                                 comparison_url=comparison_url)  # fmt: skip
    # Plotly's JS is loaded once by the page from the installed package, never a CDN.
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False,
                       config={"displaylogo": False, "responsive": True,
                               "modeBarButtonsToRemove": _NO_BUTTONS})  # fmt: skip
    return Chart(s, mark_safe(html))  # noqa: S308 - plotly's own markup and JSON-escaped data


@require_GET
def tree_history(request: HttpRequest, name: str) -> HttpResponse:
    """404 for an unknown tree or one the user may not see (webapp.access.visible_trees);
    on a visible tree, the points of comparisons the user may not see are left out."""
    tree = access.get_visible(access.visible_trees(request.user), name=name)
    branch = request.GET.get("branch") or None
    found = history.tree_history(tree, request.user, branch)
    url = reverse("reports:comparison", args=[987654321]).replace("987654321", "{}")
    charts = [_chart(s, url) for s in found.series]
    return render(request, "watch/history.html", {
        "tree": tree, "branch": branch, "charts": charts, "plotly_version": PLOTLY_VERSION,
    })  # fmt: skip
