"""The list page through Django's test client: its filters, the filter choices kept per
viewer, its polled rows and their memo, restricted rows, and a number of queries that does
not grow with the rows."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.support.factories import (
    BuildFactory,
    ComparisonFactory,
    MembershipFactory,
    RevisionFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.comparisons.models import Comparison
from webapp.reports import listing
from webapp.reports.tests.conftest import (
    assert_only_members_see,
    query_count,
    restricted_comparison,
    running_run,
    timed_run,
)

pytestmark = pytest.mark.django_db


LIST = reverse("reports:comparison-list")


# --- list -----------------------------------------------------------------------------


@pytest.fixture
def assorted():
    """Comparisons that differ in tree, submitter, state, verdict and benchmark."""
    alice = UserFactory.create(username="alice")
    bob = UserFactory.create(username="bob")
    rcu = TreeFactory.create(name="rcu")
    net = TreeFactory.create(name="net")

    def make(tree, **kw):
        return ComparisonFactory.create(
            revision_a=RevisionFactory.create(tree=tree),
            revision_b=RevisionFactory.create(tree=tree), **kw,
        )  # fmt: skip

    return {
        "rcu-alice-done": make(rcu, submitted_by=alice, state="done", result="ok",
                               verdict="regression"),
        "rcu-bob-running": make(rcu, submitted_by=bob, state="running",
                                benchmarks=["boot-time"]),
        "net-alice-done": make(net, submitted_by=alice, state="done", result="ok",
                               verdict="no-meaningful-change",
                               benchmarks=["sync-rcu-latency", "boot-time"]),
        "net-cli-building": make(net, state="building"),
    }  # fmt: skip


def _listed(client, **params):
    response = client.get(LIST, params)
    assert response.status_code == 200
    return response, {c.pk for c in response.context["page"].object_list}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"rcu-alice-done", "rcu-bob-running", "net-alice-done", "net-cli-building"}),
        ({"tree": "rcu"}, {"rcu-alice-done", "rcu-bob-running"}),
        ({"submitter": "alice"}, {"rcu-alice-done", "net-alice-done"}),
        ({"state": "running"}, {"rcu-bob-running"}),
        ({"verdict": "regression"}, {"rcu-alice-done"}),
        ({"benchmark": "boot-time"}, {"rcu-bob-running", "net-alice-done"}),
        ({"tree": "net", "submitter": "alice", "benchmark": "boot-time"}, {"net-alice-done"}),
        ({"tree": "net", "state": "running"}, set()),
    ],
)
def test_the_list_filters_by_tree_submitter_state_verdict_and_benchmark(
    client, assorted, params, expected
):
    response, shown = _listed(client, **params)
    assert shown == {assorted[k].pk for k in expected}
    html = response.content.decode()
    assert '<form method="get" class="filters" id="filters">' in html
    for name, value in params.items():  # the form keeps what was chosen
        assert re.search(rf'<option value="{value}" selected>', html), name
    if not expected:
        assert "No comparison matches these filters." in html


def test_an_unknown_filter_value_is_an_error_beside_its_field_not_every_row(client, assorted):
    response, shown = _listed(client, tree="no-such-tree")
    assert shown == set()
    assert response.context["list"].form.errors["tree"]
    assert 'class="errorlist"' in response.content.decode()


def test_the_filter_choices_leak_no_private_tree_or_its_members(client, assorted):
    secret = restricted_comparison(submitted_by=UserFactory.create(username="embargo-dev"))
    html = client.get(LIST).content.decode()
    assert 'value="rcu"' in html
    assert 'value="security"' not in html
    assert 'value="embargo-dev"' not in html
    _, shown = _listed(client, tree="security")  # not a choice for them: nothing shown
    assert shown == set()
    client.force_login(MembershipFactory.create(tree=secret.revision_a.tree).user)
    html = client.get(LIST).content.decode()
    assert 'value="security"' in html
    assert 'value="embargo-dev"' in html
    _, shown = _listed(client, tree="security")
    assert shown == {secret.pk}


def test_pages_keep_the_filters(client):
    tree = TreeFactory.create(name="rcu")
    for _ in range(listing.LIST_PAGE_SIZE + 2):
        ComparisonFactory.create(revision_a=RevisionFactory.create(tree=tree),
                                 revision_b=RevisionFactory.create(tree=tree))  # fmt: skip
    ComparisonFactory.create()  # another tree's
    html = client.get(LIST, {"tree": "rcu"}).content.decode()
    assert "page 1 of 2 (52 comparisons)" in html
    assert 'href="?tree=rcu&amp;page=2" rel="next"' in html
    _, shown = _listed(client, tree="rcu", page="2")
    assert len(shown) == 2


def test_unfinished_rows_poll_their_progress_and_finished_ones_do_not(client, assorted):
    running = assorted["rcu-bob-running"]
    running.scheduled_per_side = 24
    running.save()
    for i, seconds in enumerate([50, 70, 60]):
        timed_run(running, "AB"[i % 2], i, seconds, benchmark="boot-time")
    html = client.get(LIST).content.decode()
    rows = dict(re.findall(r'<tr id="comparison-(\d+)" data-state="\w+"([^>]*)>', html))
    row_url = reverse("reports:comparison-row", args=[running.pk])
    assert rows[str(running.pk)] == (
        f' hx-get="{row_url}" hx-trigger="every 5s" hx-swap="outerHTML"'
    )
    assert rows[str(assorted["net-cli-building"].pk)].startswith(" hx-get=")
    assert rows[str(assorted["rcu-alice-done"].pk)] == ""
    assert rows[str(assorted["net-alice-done"].pk)] == ""
    # htmx is served by the app: no CDN
    assert '<script src="/static/django_htmx/htmx-2.min.js" defer></script>' in html
    assert "cdn" not in html.lower()

    row = client.get(row_url)
    assert row.status_code == 200
    text = row.content.decode()
    assert text.lstrip().startswith(f'<tr id="comparison-{running.pk}"')
    assert 'data-done="3" data-total="48"' in text
    assert 'ETA <span class="eta" title="this comparison&#x27;s runs">~45 min</span>' in text
    assert "hx-trigger" in text
    # once it is done, the row it returns polls no more
    Comparison.objects.filter(pk=running.pk).update(state="done", result="ok",
                                                     verdict="improvement")  # fmt: skip
    text = client.get(row_url).content.decode()
    assert "hx-trigger" not in text
    assert '<span class="badge v-improvement">improvement</span>' in text


def test_a_row_is_rendered_again_whenever_a_value_it_shows_changes(client, assorted, monkeypatch):
    """listing.row_html keeps rendered rows in memory, keyed by what they show: a repeat is
    served from memory, and a change of any value shown (a run ending, a renamed tree, a
    verdict) renders it again, so the memo is never stale."""
    rendered = []
    real = listing._render_row

    def counting(c, p, names):
        rendered.append(c.pk)
        return real(c, p, names)

    monkeypatch.setattr(listing, "_render_row", counting)
    monkeypatch.setattr(listing, "_row_memo", type(listing._row_memo)())
    running = assorted["rcu-bob-running"]
    client.get(LIST)
    first = len(rendered)
    assert first == len(assorted)
    client.get(LIST)
    assert len(rendered) == first  # nothing changed: every row from memory
    timed_run(running, "A", 0, 60, benchmark="boot-time")
    text = client.get(LIST).content.decode()
    again = set(rendered[first:])
    assert running.pk in again  # its progress moved...
    building = assorted["net-cli-building"].pk  # ...and so did this one's ETA (the target's
    assert again == {running.pk, building}  # recent runs); the done rows did not change
    assert f'id="comparison-{running.pk}"' in text
    running.revision_a.tree.__class__.objects.filter(pk=running.revision_a.tree_id).update(
        name="rcu-renamed"
    )
    text = client.get(LIST).content.decode()
    assert ">rcu-renamed/" in text
    assert ">rcu/" not in text
    done = assorted["rcu-alice-done"]
    Comparison.objects.filter(pk=done.pk).update(verdict="improvement")
    text = client.get(LIST).content.decode()
    row = re.search(rf'<tr id="comparison-{done.pk}".*?</tr>', text, re.S)
    assert row is not None
    assert "v-improvement" in row.group(0)


def test_a_restricted_row_is_404_to_outsiders(client):
    c = restricted_comparison(state="running")
    url = reverse("reports:comparison-row", args=[c.pk])
    assert_only_members_see(client, c, url)


# --- query counts ---------------------------------------------------------------------


def _populate(n, target):
    """n comparisons on one tree: one in three running (a run going, two done)."""
    tree = TreeFactory.create(name="rcu")
    user = UserFactory.create(username="alice")
    for i in range(n):
        running = i % 3 == 0
        c = ComparisonFactory.create(
            revision_a=RevisionFactory.create(tree=tree),
            revision_b=RevisionFactory.create(tree=tree), target=target, submitted_by=user,
            scheduled_per_side=24,
            state="running" if running else "done", result="" if running else "ok",
            verdict="" if running else "improvement",
        )  # fmt: skip
        c.build_a = BuildFactory.create(revision=c.revision_a, state="done", result="ok")
        c.build_b = BuildFactory.create(revision=c.revision_b, state="running")
        c.save()
        if running:
            timed_run(c, "A", 0, 60)
            timed_run(c, "B", 0, 60)
            running_run(c, "A", 1)


@pytest.mark.parametrize("logged_in", [False, True])
def test_the_list_page_reads_a_constant_number_of_queries(
    client, django_assert_max_num_queries, logged_in
):
    target = TargetFactory.create()
    if logged_in:
        client.force_login(UserFactory.create(username="reader"))
    _populate(5, target)
    few = query_count(client, LIST)
    filtered_few = query_count(client, LIST, tree="rcu", submitter="alice", state="running",
                          benchmark="sync-rcu-latency")  # fmt: skip
    _populate(45, target)
    many = query_count(client, LIST)
    filtered_many = query_count(client, LIST, tree="rcu", submitter="alice", state="running",
                           benchmark="sync-rcu-latency")  # fmt: skip
    assert many == few
    assert filtered_many == filtered_few
    with django_assert_max_num_queries(10):
        client.get(LIST, {"tree": "rcu", "submitter": "alice"})
    # one row (the polled partial)
    c = Comparison.objects.filter(state="running").first()
    assert c is not None
    with django_assert_max_num_queries(5):
        client.get(reverse("reports:comparison-row", args=[c.pk]))


def test_the_filter_choices_are_read_once_per_viewer_then_kept(client, assorted):
    def choice_queries():
        with CaptureQueriesContext(connection) as q:
            assert client.get(LIST).status_code == 200
        return [s["sql"] for s in q.captured_queries if '"submitted_by_id" IS NOT NULL' in s["sql"]]

    assert len(choice_queries()) == 1
    assert choice_queries() == []  # kept for anonymous viewers
    client.force_login(UserFactory.create(username="reader"))
    assert len(choice_queries()) == 1  # a member's choices are their own
