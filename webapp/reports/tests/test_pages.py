"""The live pages through Django's test client: the list's filters and polled rows, the
comparison page's live part and cancel button, the run page, the ETA, and query counts that
do not grow with the rows (the list page: test_listing.py)."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MeasurementFactory,
    MembershipFactory,
    MetricVerdictFactory,
    RevisionFactory,
    RunFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.comparisons.models import Comparison
from webapp.comparisons.progress import progress, progress_many
from webapp.reports import pages
from webapp.reports.tests.conftest import (
    assert_only_members_see,
    query_count,
    restricted_comparison,
    running_run,
    timed_run,
)
from webapp.trees.models import TreeMembership

pytestmark = pytest.mark.django_db

LIST = reverse("reports:comparison-list")


# --- ETA ------------------------------------------------------------------------------


def test_eta_is_the_median_run_times_the_runs_left_over_the_runs_going_at_once():
    c = ComparisonFactory.create(state="running", min_runs=24, scheduled_per_side=24)
    for i, seconds in enumerate([60, 60, 120, 60]):
        timed_run(c, "AB"[i % 2], i, seconds)
    timed_run(c, "A", 10, 30, result="failed")  # a panic is a run's duration too
    running_run(c, "A", 11)
    running_run(c, "B", 11)
    p = progress(c)
    assert (p.done, p.total, p.failed, p.running) == (4, 48, 1, 2)
    # median of 60, 60, 120, 60, 30 = 60 s; 44 runs left, 2 at once
    assert p.eta_seconds == pytest.approx(44 * 60 / 2)
    assert p.eta == "~22 min"
    assert p.eta_basis == "this comparison's runs"
    assert p.phase == "running look 1"


def test_eta_falls_back_on_the_targets_recent_runs_then_unknown():
    target = TargetFactory.create(name="qemu-ppc64le", arch="ppc64le")
    fresh = ComparisonFactory.create(state="running", target=target, scheduled_per_side=24)
    assert progress(fresh).eta == "unknown"
    assert progress(fresh).eta_seconds is None
    older = ComparisonFactory.create(state="done", result="ok", target=target)
    for i in range(3):
        timed_run(older, "A", i, 100)
    # the host's endings (lost, cancelled) say nothing of a run's duration
    end = timezone.now()
    RunFactory.create(comparison=older, side="B", index=0, order=50, state="done",
                      result="incomplete", error_code="lost",
                      started_at=end - timedelta(hours=3), finished_at=end)  # fmt: skip
    p = progress(fresh)
    assert p.eta_seconds == pytest.approx(48 * 100)
    assert p.eta_basis == "the target's recent runs"
    assert p.eta == "~1 h 20 min"
    # another target's runs do not count
    other = ComparisonFactory.create(state="running", scheduled_per_side=24)
    assert progress(other).eta == "unknown"


def test_progress_of_a_done_comparison_says_done():
    c = ComparisonFactory.create(state="done", result="ok", verdict="improvement")
    p = progress(c)
    assert (p.finished, p.eta, p.phase) == (True, "done", "done: improvement")


def test_progress_many_reads_a_page_in_two_queries(django_assert_max_num_queries):
    cs = []
    for _ in range(6):
        c = ComparisonFactory.create(state="running", scheduled_per_side=24)
        running_run(c, "A", 0)
        cs.append(c)
    with django_assert_max_num_queries(2):
        result = progress_many(cs)
    assert {p.running for p in result.values()} == {1}


# --- comparison page: live part, cancel -------------------------------------------------


def test_the_live_part_shows_builds_runs_by_outcome_and_the_look(client, running_comparison):
    c = running_comparison
    url = reverse("reports:comparison-live", args=[c.pk])
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith(f'<section class="notice" id="progress" hx-get="{url}"')
    assert "Builds: " in html
    assert '<span class="build" data-side="A">A ok</span>' in html
    assert "running look 1" in html
    assert 'data-done="1" data-total="48"' in html
    assert "B 0 ok, 0 failed, 1 incomplete, 1 queued or running" in html
    assert 'ETA <span id="eta"' in html
    # the status line swapped out of band
    assert '<p id="status" hx-swap-oob="true">' in html


def test_the_live_part_of_a_finished_comparison_reloads_the_page_once(client, running_comparison):
    c = running_comparison
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok", verdict="regression")
    url = reverse("reports:comparison-live", args=[c.pk])
    response = client.get(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert response["HX-Refresh"] == "true"
    html = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    assert 'id="progress"' not in html  # nothing polls a finished comparison
    assert "hx-trigger" not in html


@pytest.fixture
def watched():
    """A running comparison on a private tree, submitted by its submitter `sub`; the tree
    also has an admin and a plain member."""
    tree = TreeFactory.create(name="security", public=False)
    sub = MembershipFactory.create(tree=tree, user=UserFactory.create(username="sub")).user
    c = ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree), revision_b=RevisionFactory.create(tree=tree),
        state="running", submitted_by=sub, visibility=Comparison.Visibility.RESTRICTED,
        scheduled_per_side=24,
    )  # fmt: skip
    running_run(c, "A", 0)
    RunFactory.create(comparison=c, side="B", index=0, order=1)  # queued
    admin = MembershipFactory.create(tree=tree, role=TreeMembership.Role.ADMIN).user
    member = MembershipFactory.create(tree=tree).user
    return c, sub, admin, member


def _cancel(client, c):
    return client.post(reverse("reports:comparison-cancel", args=[c.pk]))


@pytest.mark.parametrize("who", ["sub", "admin", "staff"])
def test_the_submitter_tree_admins_and_staff_cancel_from_the_page(client, watched, who):
    c, sub, admin, _ = watched
    user = {"sub": sub, "admin": admin,
            "staff": UserFactory.create(username="operator", is_staff=True)}[who]  # fmt: skip
    client.force_login(user)
    page = reverse("reports:comparison", args=[c.pk])
    html = client.get(page).content.decode()
    assert f'action="{reverse("reports:comparison-cancel", args=[c.pk])}"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    response = _cancel(client, c)
    assert response.status_code == 302
    assert response["Location"] == page
    c.refresh_from_db()
    assert (c.state, c.result, c.error_code) == ("done", "incomplete", "cancelled")
    assert c.error_message == f"cancelled by {user.username} on the web page"
    assert set(c.runs.values_list("state", "error_code")) == {("done", "cancelled")}
    html = client.get(page).content.decode()
    assert "<code>cancelled</code>" in html
    assert f"cancelled by {user.username} on the web page" in html
    assert 'id="cancel"' not in html  # nothing left to cancel
    assert _cancel(client, c).status_code == 302  # a second cancel changes nothing


def test_others_get_404_or_403_and_no_button(client, watched):
    c, _, _, member = watched
    page = reverse("reports:comparison", args=[c.pk])
    # anonymous and outsiders do not see it: 404, as if it did not exist
    assert _cancel(client, c).status_code == 404
    client.force_login(UserFactory.create(username="outsider"))
    assert _cancel(client, c).status_code == 404
    # a member sees it but may not cancel another's comparison
    client.force_login(member)
    assert 'id="cancel"' not in client.get(page).content.decode()
    assert _cancel(client, c).status_code == 403
    assert client.get(reverse("reports:comparison-cancel", args=[c.pk])).status_code == 405
    c.refresh_from_db()
    assert c.state == "running"


def test_cancel_without_the_csrf_token_is_refused(watched):
    from django.test import Client

    c, sub, _, _ = watched
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(sub)
    assert _cancel(strict, c).status_code == 403
    c.refresh_from_db()
    assert c.state == "running"


def test_anonymous_users_see_no_cancel_button_and_get_403_on_public(client, running_comparison):
    page = reverse("reports:comparison", args=[running_comparison.pk])
    assert 'id="cancel"' not in client.get(page).content.decode()
    assert _cancel(client, running_comparison).status_code == 403


def test_primary_metrics_come_first_in_the_verdict_table(client):
    c = ComparisonFactory.create(state="done", result="ok", verdict="regression")
    MetricVerdictFactory.create(comparison=c, metric="gps", statistic="value",
                                is_primary=False, verdict="regression")  # fmt: skip
    MetricVerdictFactory.create(comparison=c, metric="writer_duration", statistic="p90",
                                is_primary=False, verdict="improvement")  # fmt: skip
    MetricVerdictFactory.create(comparison=c, metric="writer_duration", statistic="p50",
                                is_primary=True, verdict="no-meaningful-change")  # fmt: skip
    html = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    rows = re.findall(r'data-metric="sync-rcu-latency/([^"]+)"', html)
    assert rows == ["writer_duration/p50", "gps/value", "writer_duration/p90"]


def test_the_run_table_links_each_run_page(client, done_comparison):
    html = client.get(reverse("reports:comparison", args=[done_comparison.pk])).content.decode()
    for run in done_comparison.runs.all():
        assert f'href="{reverse("reports:run", args=[run.pk])}"' in html


# --- run page -------------------------------------------------------------------------


def test_the_run_page_shows_outcome_timings_metrics_and_the_escaped_console(client):
    c = ComparisonFactory.create(state="running")
    end = timezone.now()
    run = RunFactory.create(
        comparison=c, side="B", index=3, state="done", result="ok", host="worker-7",
        started_at=end - timedelta(seconds=42.5), finished_at=end, wall_seconds=40.25,
        ready_seconds=3.5, host_busy_share=0.07,
        console_log="[    0.000000] Linux version 6.12\n<script>alert(1)</script>\n",
    )  # fmt: skip
    MeasurementFactory.create(run=run, samples=[float(x) for x in range(1, 301)])
    MeasurementFactory.create(run=run, metric="gps", unit="count", samples=[812.0])
    response = client.get(reverse("reports:run", args=[run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Run {run.pk}: sync-rcu-latency, side B, slot 3" in html
    assert f'href="{reverse("reports:comparison", args=[c.pk])}"' in html
    assert 'data-state="done" data-result="ok"' in html
    assert "42.5 s after it started" in html
    assert "40.25 s" in html
    assert "3.50 s" in html
    assert "host worker-7" in html
    # metrics: the primary first, with its summary
    metrics = re.findall(r'<tr class="metric" data-metric="([^"]+)">', html)
    assert metrics == ["sync-rcu-latency/writer_duration", "sync-rcu-latency/gps"]
    assert "first 200 of 300" in html
    assert '<td class="num">300</td><td class="num">1</td><td class="num">150.5</td>' in html
    # console: escaped, whole (it is short), with the download
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert" not in html
    assert reverse("reports:run-console", args=[run.pk]) in html
    assert 'id="console-cut"' not in html


def test_a_long_console_shows_its_head_and_tail_and_links_the_rest(client):
    head = "BOOT " * (pages.CONSOLE_HEAD_CHARS // 5)
    middle = "m" * 200_000
    tail = "Kernel panic - not syncing: <oops>\n" + "T" * (pages.CONSOLE_TAIL_CHARS - 35)
    run = RunFactory.create(console_log=head + middle + tail, state="done", result="failed",
                            error_code="panic", error_message="Kernel panic")  # fmt: skip
    response = client.get(reverse("reports:run", args=[run.pk]))
    html = response.content.decode()
    assert len(html) < pages.CONSOLE_HEAD_CHARS + pages.CONSOLE_TAIL_CHARS + 20_000
    omitted = len(head + middle + tail) - pages.CONSOLE_HEAD_CHARS - pages.CONSOLE_TAIL_CHARS
    assert omitted > 199_000
    assert f"{omitted} characters left out here" in html
    assert "Kernel panic - not syncing: &lt;oops&gt;" in html
    assert "m" * 10 not in html  # the head ends with 4 of them
    assert html.count(reverse("reports:run-console", args=[run.pk])) == 2
    assert 'id="no-metrics"' in html
    assert "only runs that finish ok are parsed into data" in html


@pytest.mark.parametrize(
    ("chars", "shown", "omitted"),
    [(5, "abcde", 0), (8, "abcdefgh", 0), (12, "abcdefghijkl", 0), (20, "abcd", 8)],
)
def test_console_excerpt(chars, shown, omitted):
    text = "abcdefghijklmnopqrst"[:chars]
    got = pages.console_excerpt(text[:4], text[-8:], chars, 4, 8)
    assert got.head + got.tail == (shown + (text[-8:] if omitted else ""))
    assert got.omitted == omitted
    assert got.chars == chars


def test_the_run_page_links_retries_both_ways(client):
    first = RunFactory.create(state="done", result="failed", error_code="timeout",
                              error_message="no output for 300 s")  # fmt: skip
    retry = RunFactory.create(comparison=first.comparison, retry_of=first)
    html = client.get(reverse("reports:run", args=[first.pk])).content.decode()
    assert f'href="{reverse("reports:run", args=[retry.pk])}"' in html
    assert "no output for 300 s" in html
    html = client.get(reverse("reports:run", args=[retry.pk])).content.decode()
    assert f'href="{reverse("reports:run", args=[first.pk])}"' in html


def test_runs_of_restricted_comparisons_are_404_to_outsiders(client):
    c = restricted_comparison()
    run = RunFactory.create(comparison=c)
    url = reverse("reports:run", args=[run.pk])
    assert_only_members_see(client, c, url)
    assert client.get(reverse("reports:run", args=[987654])).status_code == 404


def _report_with(runs_per_side, samples):
    c = ComparisonFactory.create(state="done", result="ok", verdict="regression")
    c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
    c.build_b = BuildFactory.create(revision=c.revision_b, state="done", result="ok")
    c.save()
    for i in range(runs_per_side):
        for side in "AB":
            run = timed_run(c, side, i, 60)
            MeasurementFactory.create(run=run, samples=[6.0 + k / samples for k in range(samples)])
            MeasurementFactory.create(run=run, metric="gps", unit="count", samples=[100.0 + i])
    for stat in ("p50", "p90", "mean"):
        MetricVerdictFactory.create(comparison=c, statistic=stat, is_primary=stat == "p50")
    return c


def test_the_report_and_run_pages_read_a_constant_number_of_queries(
    client, django_assert_max_num_queries
):
    small, big = _report_with(3, 10), _report_with(30, 100)
    page = lambda c: reverse("reports:comparison", args=[c.pk])  # noqa: E731
    assert query_count(client, page(small)) == query_count(client, page(big))
    with django_assert_max_num_queries(16):
        client.get(page(big))
    # running: the live part too
    Comparison.objects.filter(pk__in=[small.pk, big.pk]).update(state="running", result="",
                                                                  verdict="")  # fmt: skip
    assert query_count(client, page(small)) == query_count(client, page(big))
    live = lambda c: reverse("reports:comparison-live", args=[c.pk])  # noqa: E731
    assert query_count(client, live(small)) == query_count(client, live(big))
    with django_assert_max_num_queries(6):
        client.get(live(big))
    run_page = lambda c: reverse("reports:run", args=[c.runs.first().pk])  # noqa: E731
    assert query_count(client, run_page(small)) == query_count(client, run_page(big))
    with django_assert_max_num_queries(3):
        client.get(run_page(big))
