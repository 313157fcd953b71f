"""The Plotly version the pages load and the helpers they share: a figure as HTML without
its script (the page loads plotly.min.js once, from this server, never from a CDN) and the
installed package's plotly.min.js."""

import gzip
from functools import lru_cache
from typing import Any

import plotly
import plotly.io as pio
import plotly.offline
from django.utils.safestring import SafeString, mark_safe

PLOTLY_VERSION: str = plotly.__version__


# Selection and hover-mode tools mean nothing on these charts; fewer buttons leave the title clear.
_NO_BUTTONS = ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian",
               "hoverCompareCartesian"]  # fmt: skip


def figure_html(fig: Any) -> SafeString:
    # Plotly's JS is loaded once by the page (plotly_js below), never from a CDN.
    html = pio.to_html(
        fig, include_plotlyjs=False, full_html=False,
        config={"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": _NO_BUTTONS},
    )  # fmt: skip
    return mark_safe(html)  # noqa: S308 - plotly's own markup and JSON-escaped data


# The figures of a done comparison, cached: drawing them (every sample of every counted run,
# through plotly) is most of a report page's cost, and a done comparison's runs and
# measurements never change. The cache ("reports", settings.CACHES: files under the data
# dir, shared by every gunicorn process and kept across restarts) is keyed by what would
# change with them: the database, the comparison (its pk and creation time, so that a
# reused pk of another database or a recreated one never matches), when it finished (a
# comparison that was ever reopened and finished again gets a new key) and FIGURES_VERSION.


@lru_cache(maxsize=1)
def plotly_js() -> tuple[bytes, bytes]:
    """The installed plotly package's plotly.min.js, raw and gzipped (computed once)."""
    raw = plotly.offline.get_plotlyjs().encode()
    return raw, gzip.compress(raw, compresslevel=6)
