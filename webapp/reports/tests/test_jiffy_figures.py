"""The report's jiffy histogram: each side's share of samples at each jiffy count, the
pooled mode, and the stored dispersion index D beside it (through the test client)."""

import json

import pytest
from django.urls import reverse

from webapp.analysis.models import JiffyDispersion
from webapp.reports.jiffy_figures import dispersion_note, jiffy_histogram


def test_the_histogram_draws_each_sides_shares_and_marks_the_pooled_mode():
    fig = jiffy_histogram("t", {"A": {6: 0.9, 7: 0.1}, "B": {6: 0.8, 7: 0.15, 8: 0.05}}, 6,
                          runs={"A": 24, "B": 24}, tail_share={"A": 10.0, "B": 20.0},
                          note="D 1.10")  # fmt: skip
    a, b = fig.data
    assert list(a.x) == list(b.x) == [6, 7, 8]
    assert list(a.y) == pytest.approx([90, 10, 0])
    assert list(b.y) == pytest.approx([80, 15, 5])
    assert a.name == "A (24 runs; tail share 10.0%)"
    assert fig.layout.shapes[0].x0 == 6.5  # the line between the mode and the tail
    assert "D 1.10" in fig.layout.title.text


def test_dispersion_note_says_which_branch_and_how_to_get_one():
    assert "manage.py calibrate" in dispersion_note(None)
    d = JiffyDispersion(boots=48, index=6.2, source="comparison 12", samples=4848, mode=6,
                        share_above=0.08, hz=1000)  # fmt: skip
    assert dispersion_note(d) == ("dispersion index D 6.20 (boot-level effect) from 48 A/A "
                                  "boots of this kernel, comparison 12")  # fmt: skip


def _page(client, c) -> str:
    response = client.get(reverse("reports:comparison", args=[c.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_report_shows_the_jiffy_histogram_and_says_when_no_d_is_stored(client, done_comparison):
    page = _page(client, done_comparison)
    assert "writer_duration: share of samples at each jiffy count" in page
    assert "none stored for this kernel" in page
    # Only the metric in jiffies gets one (gps is a count).
    assert "gps: share of samples at each jiffy count" not in page
    assert json.dumps("above the pooled mode")[1:-1] in page


def test_the_report_shows_the_stored_d_of_side_as_kernel(client, done_comparison):
    # A done report is drawn once and cached: D stored before it is drawn is shown.
    JiffyDispersion.objects.create(build=done_comparison.build_a, benchmark="sync-rcu-latency",
                                   metric="writer_duration", source="comparison 5", hz=1000,
                                   boots=48, samples=4848, mode=6, share_above=0.09,
                                   index=1.12, p_value=0.27)  # fmt: skip
    page = _page(client, done_comparison)
    # In the figure's JSON, where "/" is escaped.
    assert "dispersion index D 1.12 (binomial sampling) from 48 A\\u002fA boots" in page
