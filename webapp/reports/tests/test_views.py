"""The report pages and downloads through Django's test client."""

import gzip
import json
import math
import re

import plotly
import plotly.offline
import pytest
from django.urls import reverse

from tests.support.factories import (
    ComparisonFactory,
    PatchSeriesFactory,
    RevisionFactory,
    RunFactory,
)
from webapp.analysis.services import analyse_failures
from webapp.reports.tests.conftest import (
    RUNS_PER_SIDE,
    VERDICTS_IN_REPORT_ORDER,
    VERDICTS_ON_THE_PAGE,
    WRITER_SAMPLES,
)

pytestmark = pytest.mark.django_db


def _page(client, c):
    response = client.get(reverse("reports:comparison", args=[c.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _section(html: str, start: str) -> str:
    """The page from `start` to the end of the section it opens (ValueError if absent)."""
    rest = html[html.index(start) :]
    return rest[: rest.index("</section>")]


def test_report_lists_verdicts_primary_first_then_by_severity(client, done_comparison):
    html = _page(client, done_comparison)
    rows = re.findall(r'<tr class="verdict-row" data-verdict="([^"]+)" data-metric="([^"]+)"',
                      html)  # fmt: skip
    assert rows == [(verdict, f"sync-rcu-latency/{metric}/{stat}")
                    for metric, stat, _, verdict in VERDICTS_ON_THE_PAGE]  # fmt: skip
    assert "+9.90% [+8.10, +11.70]" in html
    assert "0.0012" in html
    assert "0.0036" in html
    assert "drift against run order on side A (p=0.01)" in html
    assert "6.05 ms" in html
    assert "6.65 ms" in html


def test_done_report_has_figures_reproducer_runs_and_downloads(client, done_comparison):
    c = done_comparison
    html = _page(client, c)
    # writer_duration: ECDF, per-run p50, mean and p90, histogram, jiffy histogram; gps:
    # ECDF, per run.
    assert html.count('class="plotly-graph-div"') == 8
    js = reverse("reports:plotly-js", args=[plotly.__version__])
    assert f'<script src="{js}"></script>' in html
    assert "cdn" not in html.lower()
    assert 'http-equiv="refresh"' not in html
    assert 'id="error"' not in html
    # The reproducer, HTML-escaped in a <pre>.
    assert "./manage.py compare --tree" in html
    cmdline_b = "rcutree.jiffies_till_first_fqs=3 rcupdate.rcu_expedited=1"
    assert f"--cmdline-b &#x27;{cmdline_b}&#x27;" in html
    # Every run with its console link and error code; the counts per side.
    for run in c.runs.all():
        assert reverse("reports:run-console", args=[run.pk]) in html
    assert "<code>panic</code>" in html
    assert "panic: 1" in html
    assert reverse("reports:comparison-csv", args=[c.pk]) in html
    assert reverse("reports:comparison-json", args=[c.pk]) in html
    assert c.revision_a.sha in html
    assert c.revision_b.sha in html


def test_failed_build_is_shown_prominently(client, failed_build_comparison):
    c = failed_build_comparison
    html = _page(client, c)
    alert = _section(html, '<section class="alert" id="error">')
    assert "<code>build-failed</code>" in alert
    assert "build failed: side B (v6.12 + series): make-failed: make exited with 2" in alert
    assert "Build of side B" in alert
    assert "<code>make-failed</code>" in alert
    assert "kernel/rcu/tree.c:4242:1: error: expected &#x27;;&#x27; before &#x27;}&#x27;" in alert
    assert "Build of side A" not in alert
    # It ended: no refresh, no figures, and it says there was no analysis.
    assert 'http-equiv="refresh"' not in html
    assert "plotly-graph-div" not in html
    assert "ended without an analysis" in html
    # The series is named, with its mbox.
    assert "[PATCH 0/2] rcu: shrink the expedited grace period" in html
    assert "&lt;20260101.1234-1-dev@example.org&gt;" in html
    assert reverse("reports:series-mbox", args=[c.revision_b.series_id]) in html


def test_running_comparison_polls_its_live_part_and_shows_counts(client, running_comparison):
    html = _page(client, running_comparison)
    # Live updates poll a partial (htmx); a page-wide refresh only without JavaScript.
    assert '<noscript><meta http-equiv="refresh" content="30"></noscript>' in html
    live = reverse("reports:comparison-live", args=[running_comparison.pk])
    assert f'hx-get="{live}" hx-trigger="every 5s"' in html
    progress = _section(html, 'id="progress"')
    assert 'This comparison is running</strong>: <span id="phase">running look 1' in progress
    assert "A 1 ok, 0 failed, 0 incomplete, 0 queued or running" in progress
    assert "B 0 ok, 0 failed, 1 incomplete, 1 queued or running" in progress
    assert "timeout: 1" in html
    assert "plotly-graph-div" not in html
    assert "plotly-" not in html.split("<body>")[0]  # nor the script


def test_slab_report_shows_the_delay_sweep(client, slab_comparison):
    html = _page(client, slab_comparison)
    assert "delay between map-in-map updates (ms)" in html
    # the sweep + 10 metrics (peak and mean at 5 delays) x (ECDF, per run)
    assert html.count('class="plotly-graph-div"') == 1 + 10 * 2


@pytest.mark.parametrize(
    "name", ["reports:comparison", "reports:comparison-csv", "reports:comparison-json",
             "reports:run-console", "reports:series-mbox"],
)  # fmt: skip
def test_unknown_ids_are_404(client, name):
    assert client.get(reverse(name, args=[987654])).status_code == 404


def test_console_log_is_plain_text(client):
    run = RunFactory.create(console_log="[    0.000000] Linux version 6.12\n<script>x</script>\n")
    response = client.get(reverse("reports:run-console", args=[run.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == run.console_log


def test_series_mbox_download(client):
    series = PatchSeriesFactory.create(mbox=b"From abc Mon Sep 17 00:00:00 2001\nSubject: x\n\xff")
    # Visible where a visible comparison tests it (webapp.access): none yet, so 404.
    assert client.get(reverse("reports:series-mbox", args=[series.pk])).status_code == 404
    ComparisonFactory.create(revision_b=RevisionFactory.create(series=series))
    response = client.get(reverse("reports:series-mbox", args=[series.pk]))
    assert response.status_code == 200
    assert response.content == b"From abc Mon Sep 17 00:00:00 2001\nSubject: x\n\xff"
    assert response["Content-Type"] == "application/mbox"
    assert f'filename="series-{series.pk}.mbox"' in response["Content-Disposition"]


def test_csv_download_streams(client, done_comparison):
    response = client.get(reverse("reports:comparison-csv", args=[done_comparison.pk]))
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/csv"
    body = b"".join(response.streaming_content).decode()
    lines = body.splitlines()
    assert lines[0] == ("comparison_id,benchmark,metric,unit,side,run_index,run_order,"
                        "run_result,run_traced,sample_index,value")  # fmt: skip
    assert len(lines) == 1 + 2 * RUNS_PER_SIDE * (WRITER_SAMPLES + 1)


def test_json_download_streams(client, done_comparison):
    response = client.get(reverse("reports:comparison-json", args=[done_comparison.pk]))
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/json"
    data = json.loads(b"".join(response.streaming_content))
    assert data["comparison"]["id"] == done_comparison.pk
    assert len(data["verdicts"]) == len(VERDICTS_IN_REPORT_ORDER)


def test_plotly_js_is_served_from_the_package_and_cached(client):
    url = reverse("reports:plotly-js", args=[plotly.__version__])
    plain = client.get(url)
    assert plain.status_code == 200
    assert plain["Content-Type"].startswith("text/javascript")
    assert plain.content.decode() == plotly.offline.get_plotlyjs()
    assert "max-age=31536000" in plain["Cache-Control"]
    assert "immutable" in plain["Cache-Control"]
    zipped = client.get(url, headers={"accept-encoding": "gzip, br"})
    assert zipped["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.content) == plain.content
    assert len(zipped.content) < len(plain.content) / 2
    assert client.get(reverse("reports:plotly-js", args=["0.0.1"])).status_code == 404


def test_comparison_list_links_each_comparison(client, done_comparison, failed_build_comparison):
    other = ComparisonFactory.create()
    response = client.get(reverse("reports:comparison-list"))
    assert response.status_code == 200
    html = response.content.decode()
    for c in (done_comparison, failed_build_comparison, other):
        assert f'href="{reverse("reports:comparison", args=[c.pk])}"' in html
    assert "build-failed" in html
    assert '<span class="badge v-regression">regression</span>' in html


def test_report_shows_the_cross_checks_beside_the_primary_p_and_marks_each_p(
    client, done_comparison
):
    sign = {"k": 20, "n": 24, "below": 4, "ties": 0, "median_a": 6.05, "p": 0.0015438795,
            "above_is": "worse"}  # fmt: skip
    verdicts = done_comparison.verdicts
    primary = verdicts.get(is_primary=True)
    primary.p_median = 0.0253
    primary.details = {**primary.details, "sign_test": sign, "p_method": "t-approximation",
                       "p_permutations": 9999}  # fmt: skip
    primary.save()
    gps = verdicts.get(metric="gps")
    gps.details = {**gps.details, "sign_test": sign, "p_method": "permutation",
                   "p_permutations": 9999}  # fmt: skip
    gps.save()
    html = _page(client, done_comparison)
    deciding = html[html.index('id="deciding-test"') :].split("</p>")[0]
    assert "Munzel on one value per run with a permutation p" in deciding
    assert "Holm-adjusted across the benchmarks' primary metrics" in deciding
    assert "they do not decide" in deciding
    rows = html.split('<tr class="verdict-row"')[1:]
    assert "writer_duration/p50" in rows[0]
    assert "20/24 B runs above A&#x27;s median, p=0.00154" in rows[0]
    assert "(above is worse)" in rows[0]
    assert "Mood p=0.0253" in rows[0]
    assert '<sup class="p-method" data-method="t-approximation"' in rows[0]
    # gps is secondary: its p is marked, but the cross-checks are shown for primaries only.
    (gps_row,) = [r for r in rows if "sync-rcu-latency/gps/value" in r]
    assert '<sup class="p-method" data-method="permutation"' in gps_row
    assert "B runs above" not in gps_row
    legend = html[html.index('id="p-legend"') :].split("</span>")[0]
    assert "P permutation p from 9,999 random relabellings of whole runs" in legend
    assert "≈ far-tail approximation" in legend


@pytest.fixture
def unreliable_b(done_comparison):
    """done_comparison where B's kernel panics in 11 of 14 boots and A's never does (23
    boots); one lost run on A is the host's. The failure-rate test stored as at a stop."""

    c = done_comparison
    order = c.runs.count()
    for k in range(20):
        RunFactory.create(comparison=c, side="A", index=10 + k, order=order + k, state="done",
                          result="ok")  # fmt: skip
    for k in range(10):
        RunFactory.create(comparison=c, side="B", index=10 + k, order=order + 20 + k,
                          state="done", result="failed", error_code="panic")  # fmt: skip
    RunFactory.create(comparison=c, side="A", index=40, order=order + 40, state="done",
                      result="incomplete", error_code="lost")  # fmt: skip
    (row,) = analyse_failures(c)
    assert row.verdict == "reliability-regression"
    c.verdict = "reliability-regression"
    c.save(update_fields=["verdict"])
    return c


def test_report_shows_reliability_per_side_and_the_verdict_first(client, unreliable_b):
    html = _page(client, unreliable_b)
    status = html[html.index('<p id="status">') :]
    assert 'class="badge v-reliability-regression">reliability-regression' in status[:600]
    table = html[html.index('<table id="reliability">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r'data-side="([AB])">(.*?)</tr>', table, re.S)
    cells = {side: re.findall(r'<td class="num">(\d+)</td>', body) for side, body in rows}
    # attempts, ok, kernel failures, host failures (the rate cell is not an integer)
    assert cells["A"][:3] == ["23", "23", "0"]
    assert cells["B"][:3] == ["14", "3", "11"]
    for text in ("lost: 1", "panic: 11", "Boschloo", "one-sided", "Fisher"):
        assert text in table
    fisher = math.comb(14, 11) / math.comb(37, 11)  # all 11 failures on B's 14 of 37
    assert f"{fisher:.3g}" in table  # shown beside the gate
    assert f"{unreliable_b.verdicts.get(metric='failure_rate').p_value:.3g}" in table
    # The failure-rate row is not among the metrics' verdict rows.
    assert 'data-metric="sync-rcu-latency/failure_rate' not in html


def test_report_before_any_failure_test_says_not_tested_yet(client, running_comparison):
    html = _page(client, running_comparison)
    table = html[html.index('<table id="reliability">') :]
    assert "not tested yet" in table[: table.index("</table>")]


def test_json_export_carries_the_failure_counts_and_the_test(client, unreliable_b):
    response = client.get(reverse("reports:comparison-json", args=[unreliable_b.pk]))
    data = json.loads(b"".join(response.streaming_content))
    assert data["comparison"]["verdict"] == "reliability-regression"
    (rel,) = data["reliability"]
    assert rel["benchmark"] == "sync-rcu-latency"
    assert {k: rel["b"][k] for k in ("attempts", "ok", "kernel_failures", "host_failures")} == {
        "attempts": 14, "ok": 3, "kernel_failures": 11, "host_failures": 0,
    }  # fmt: skip
    assert rel["a"]["by_outcome"] == {"lost": 1}
    # At a stop during the first look: its level, three quarters of the comparison's .01.
    assert (rel["verdict"], rel["p_method"], rel["alpha"]) == (
        "reliability-regression",
        "exact",
        0.0075,
    )
    assert rel["p_value"] < 0.0075
    assert 0 < rel["p_value"] <= rel["p_fisher"]  # Boschloo is never above Fisher
    assert all(v["metric"] != "failure_rate" for v in data["verdicts"])


def test_the_report_says_what_each_primary_could_have_detected(client, done_comparison):
    primary = done_comparison.verdicts.filter(is_primary=True)
    assert primary.exists()
    for v in primary:
        v.details = {**v.details, "smallest_detectable_shift": 7.06}
        v.save()
    html = _page(client, done_comparison)
    # A's median 6.05 ms in the fixture: 7.06% of it is 0.43 ms.
    (block,) = re.findall(r'<ul class="detectable" id="detectable">(.*?)</ul>', html, re.S)
    assert block.count("<li>") == primary.count()
    assert "could detect a shift of 0.43 ms (7.1% of A&#x27;s 6.05 ms) (80% power)" in block
