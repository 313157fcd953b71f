"""The tree page (watch policy, refs under test, pushes, newest comparisons) and the series
page (its patches and every comparison of it), with the visibility rules of the others."""

import pytest
from django.urls import reverse

from tests.support.factories import (
    ComparisonFactory,
    MembershipFactory,
    PatchSeriesFactory,
    RevisionFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
)
from webapp.comparisons.models import Comparison
from webapp.sweeps.models import Sweep, SweepPoint
from webapp.trees.models import Patch, TreeMembership
from webapp.watch.models import Push, WatchPolicy

pytestmark = pytest.mark.django_db


def _comparison(tree, series=None, **kw):
    return ComparisonFactory.create(
        revision_a=RevisionFactory.create(tree=tree, ref="v6.12"),
        revision_b=RevisionFactory.create(tree=tree, ref="rcu/next", series=series), **kw,
    )  # fmt: skip


@pytest.fixture
def watched():
    tree = TreeFactory.create(name="rcu", description="Paul's RCU tree")
    policy = WatchPolicy.objects.create(
        tree=tree, branches=["dev", "rcu/*"], start_ref="v6.12", anchor_ref="v6.12",
        benchmarks=["sync-rcu-latency"], coalesce_seconds=120,
    )  # fmt: skip
    policy.targets.add(TargetFactory.create())
    c = _comparison(tree, state="running", trigger="webhook")
    push = Push.objects.create(tree=tree, branch="dev", before="1" * 40, after="2" * 40,
                               source="github", state="tested",
                               baseline_rule="the start ref v6.12 (111111111111)")  # fmt: skip
    push.comparisons.add(c)
    Push.objects.create(
        tree=tree, branch="rcu/exp", before="3" * 40, after="4" * 40, source="git",
        state="superseded", reason="superseded by push 9",
    )  # fmt: skip
    return tree, c


def test_the_tree_page_shows_its_policy_refs_under_test_and_comparisons(client, watched):
    _, c = watched
    html = client.get(reverse("reports:tree", args=["rcu"])).content.decode()
    assert "Paul&#x27;s RCU tree" in html
    assert '<td class="mono">dev, rcu/*</td>' in html
    assert "every 10 tested heads" in html
    assert "the start ref v6.12 (111111111111)" in html  # the dev head's baseline rule
    assert "superseded by push 9" in html
    assert f'<tr id="comparison-{c.pk}"' in html
    assert 'id="history-link"' in html
    assert 'id="deliveries-link"' not in html  # for its admins only
    assert '<td id="policy-bisect">by hand (the report\'s Bisect button)</td>' in html
    WatchPolicy.objects.filter(tree__name="rcu").update(bisect_regressions=True)
    html = client.get(reverse("reports:tree", args=["rcu"])).content.decode()
    assert '<td id="policy-bisect">a tested head\'s primary regression is bisected' in html


def test_the_pushes_table_has_a_verdict_column_and_says_github_as_github_does(client, watched):
    tree, running = watched
    done = _comparison(tree, state="done", result="ok", verdict="regression", trigger="webhook")
    push = Push.objects.create(tree=tree, branch="dev", before="2" * 40, after="5" * 40,
                               source="github", state="tested")  # fmt: skip
    push.comparisons.add(done)
    html = client.get(reverse("reports:tree", args=["rcu"])).content.decode()
    table = html[html.index('<table id="pushes">') :].split("</table>")[0]
    header = table.split("</thead>")[0]
    assert header.endswith("<th>comparisons</th><th>verdict</th></tr>")
    rows = table.split("<tr data-state=")[1:]
    (new,) = [r for r in rows if f">{push.pk}</td>" in r]
    verdict = new.split('<td class="push-verdict">')[1].split("</td>")[0]
    assert 'data-verdict="regression"' in verdict
    (old,) = [r for r in rows if f"#{running.pk}</a>" in r]
    assert "running" in old.split('<td class="push-verdict">')[1]  # no verdict yet: its state
    assert "<td>GitHub</td>" in new
    assert "Github" not in html


def test_its_admins_see_the_deliveries_link(client, watched):
    tree, _ = watched
    admin = UserFactory.create()
    MembershipFactory.create(tree=tree, user=admin, role=TreeMembership.Role.ADMIN)
    client.force_login(admin)
    assert (
        'id="deliveries-link"' in client.get(reverse("reports:tree", args=["rcu"])).content.decode()
    )


def test_an_unwatched_tree_says_so(client):
    TreeFactory.create(name="net")
    assert 'id="not-watched"' in client.get(reverse("reports:tree", args=["net"])).content.decode()


def test_a_members_only_tree_is_404_to_others_and_its_restricted_rows_hidden(client):
    secret = TreeFactory.create(name="security", public=False)
    _comparison(secret, visibility=Comparison.Visibility.RESTRICTED)
    url = reverse("reports:tree", args=["security"])
    assert client.get(url).status_code == 404
    client.force_login(UserFactory.create())
    assert client.get(url).status_code == 404
    member = UserFactory.create()
    MembershipFactory.create(tree=secret, user=member)
    client.force_login(member)
    assert client.get(url).status_code == 200
    assert client.get(reverse("reports:tree", args=["nonesuch"])).status_code == 404


def test_a_public_trees_restricted_comparison_is_not_listed_to_outsiders(client):
    tree = TreeFactory.create(name="rcu")
    hidden = _comparison(tree, visibility=Comparison.Visibility.RESTRICTED)
    shown = _comparison(tree)
    html = client.get(reverse("reports:tree", args=["rcu"])).content.decode()
    assert f'id="comparison-{shown.pk}"' in html
    assert f'id="comparison-{hidden.pk}"' not in html


def test_the_series_page_lists_its_patches_and_comparisons(client):
    tree = TreeFactory.create(name="rcu")
    series = PatchSeriesFactory.create(subject="[PATCH 0/2] rcu: fqs", author="Dev <d@x.org>",
                                       message_id="<cover@x.org>")  # fmt: skip
    for i, subject in enumerate(["rcu: one", "rcu: two"], 1):
        Patch.objects.create(series=series, index=i, subject=f"[PATCH {i}/2] {subject}",
                             message_id=f"<{i}@x.org>")  # fmt: skip
    c = _comparison(tree, series=series)
    html = client.get(reverse("reports:series", args=[series.pk])).content.decode()
    assert "[PATCH 0/2] rcu: fqs" in html
    assert "&lt;cover@x.org&gt;" in html
    assert "[PATCH 2/2] rcu: two" in html
    assert f'id="comparison-{c.pk}"' in html


def test_a_series_only_a_restricted_comparison_tests_is_404_to_outsiders(client):
    tree = TreeFactory.create(name="security", public=False)
    series = PatchSeriesFactory.create()
    _comparison(tree, series=series, visibility=Comparison.Visibility.RESTRICTED)
    assert client.get(reverse("reports:series", args=[series.pk])).status_code == 404


def test_the_report_links_its_tree_and_series(client):
    tree = TreeFactory.create(name="rcu")
    series = PatchSeriesFactory.create()
    c = _comparison(tree, series=series)
    html = client.get(reverse("reports:comparison", args=[c.pk])).content.decode()
    assert f'href="{reverse("reports:tree", args=["rcu"])}"' in html
    assert f'href="{reverse("reports:series", args=[series.pk])}"' in html


def test_a_tree_named_with_a_dot_has_its_pages(client):
    """The default tree is linux-6.12: not a slug, and its pages and links must work."""
    tree = TreeFactory.create(name="linux-6.12")
    c = _comparison(tree)
    assert reverse("reports:tree", args=["linux-6.12"]) == "/trees/linux-6.12/"
    assert client.get("/trees/linux-6.12/").status_code == 200
    assert client.get("/trees/linux-6.12/history/").status_code == 200
    assert client.get(f"/comparisons/{c.pk}/").status_code == 200
    assert client.get("/api/v1/trees/linux-6.12/").status_code == 200


def test_a_pushs_sweep_is_linked_beside_its_comparisons(client, watched):
    _, c = watched
    push = Push.objects.get(comparisons=c)
    sweep = Sweep.objects.create(
        axis="variant", parameter="rcuscale.nwriters", values=["1", "4"], log_axis=True,
        base_target=c.target, benchmark="sync-rcu-latency", trigger="webhook",
        verdict="scales-worse",
    )  # fmt: skip
    SweepPoint.objects.create(sweep=sweep, position=0, value="1", x=1.0, comparison=c)
    push.sweeps.add(sweep)
    html = client.get(reverse("reports:tree", args=["rcu"])).content.decode()
    row = html.split(f'<td class="num">{push.pk}</td>')[1].split("</tr>")[0]
    assert f'<a href="/sweeps/{sweep.pk}/" class="push-sweep">sweep #{sweep.pk}</a>' in row
    assert "badge v-scales-worse" in row
