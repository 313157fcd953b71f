"""Host contention in the report: per side counts of contended data runs, the median busy
share, pinning, the marks in the runs table, and the warning when the sides differ."""

import json
import re
from html import unescape

import pytest
from django.urls import reverse

from webapp.comparisons import exports
from webapp.comparisons.summary import SideRuns, contention_warning, run_counts

pytestmark = pytest.mark.django_db


def _set(c, side: str, shares: list[float], threshold: float = 0.25) -> None:
    """Give `side`'s ok runs, in slot order, these busy shares (contended above threshold)."""
    runs = c.runs.filter(side=side, result="ok").order_by("index")
    assert len(runs) == len(shares)
    for run, share in zip(runs, shares, strict=True):
        run.host_busy_share, run.host_steal_share, run.host_load_avg = share, 0.0, 1.0
        run.contended, run.pinned = share > threshold, False
        run.save()


def _page(client, c) -> str:
    response = client.get(reverse("reports:comparison", args=[c.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_counts_are_per_side_over_data_runs_with_the_median_busy_share(done_comparison):
    c = done_comparison
    _set(c, "A", [0.01, 0.02, 0.03])
    _set(c, "B", [0.55, 0.02, 0.60])
    panicked = c.runs.get(result="failed")  # contended, but not data: not counted
    panicked.host_busy_share, panicked.contended = 0.9, True
    panicked.save()
    a, b = run_counts(c)
    assert (a.measured, a.contended, a.median_busy_share) == (3, 0, 0.02)
    assert (b.measured, b.contended, b.median_busy_share) == (3, 2, 0.55)
    assert b.median_busy == "55.0%"


def test_runs_without_a_host_record_are_not_counted_as_quiet(done_comparison):
    a, b = run_counts(done_comparison)
    assert (a.measured, a.contended, a.contended_fraction, a.median_busy) == (0, 0, None, "\u2013")
    assert contention_warning(a, b, 0.1) == ""


def test_the_report_flags_side_bs_contended_runs_and_warns(client, done_comparison, settings):
    settings.RCUBENCH_CONTENTION_IMBALANCE = 0.1
    c = done_comparison
    _set(c, "A", [0.01, 0.02, 0.03])
    _set(c, "B", [0.55, 0.52, 0.60])
    html = _page(client, c)
    counts = dict(re.findall(r'data-side="([AB])" data-contended="(\d+)"', html))
    assert counts == {"A": "0", "B": "3"}
    assert "3 of 3" in html
    assert "55.0%" in html
    marked = re.findall(r'<tr id="run-(\d+)" class="contended">', html)
    assert sorted(map(int, marked)) == sorted(
        c.runs.filter(contended=True).values_list("pk", flat=True)
    )
    assert len(marked) == 3
    assert html.count(">contended</span>") == 3
    warning = re.search(r'<p class="notice" id="contention-warning">(.*?)</p>', html, re.S)
    assert warning is not None
    assert "0 of A's 3 and 3 of B's 3 measured data runs were contended" in unescape(
        warning.group(1)
    )


def test_a_quiet_comparison_has_no_contention_warning_nor_marks(client, done_comparison):
    c = done_comparison
    _set(c, "A", [0.01, 0.02, 0.03])
    _set(c, "B", [0.02, 0.01, 0.00])
    html = _page(client, c)
    assert 'id="contention-warning"' not in html
    assert 'class="contended"' not in html
    assert "0 of 3" in html


def test_the_warning_needs_a_difference_above_the_set_amount():
    def side(name: str, contended: int, measured: int = 10) -> SideRuns:
        return SideRuns(name, ok=measured, measured=measured, contended=contended)

    assert contention_warning(side("A", 1), side("B", 2), 0.1) == ""  # 0.1 apart: not above
    assert contention_warning(side("A", 1), side("B", 3), 0.1) != ""
    assert contention_warning(side("A", 3), side("B", 1), 0.1) != ""  # either direction
    assert contention_warning(side("A", 5), side("B", 5), 0.0) == ""


def test_the_json_export_carries_the_contention_counts(done_comparison, settings):
    settings.RCUBENCH_CONTENTION_IMBALANCE = 0.1
    c = done_comparison
    _set(c, "A", [0.01, 0.02, 0.03])
    _set(c, "B", [0.55, 0.02, 0.03])
    head = json.loads("".join(exports.json_chunks(c)))["comparison"]
    runs_a, runs_b = head["runs"]
    assert (runs_a["contended"], runs_b["contended"], runs_b["measured"]) == (0, 1, 3)
    assert "1 of B's 3" in head["contention_warning"]
