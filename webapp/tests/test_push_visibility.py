"""What a watched tree's pushes show (tree page, history page and API, change points,
comparison lists) follows the visibility of the comparisons behind it: a public tree's
restricted push comparisons, and the change points found over their runs, are its members'
and staff's only. Outsiders, anonymous or logged in, see none of them, not even an id, a
branch or a sha."""

import pytest
from django.urls import reverse

from tests.support.factories import (
    MembershipFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
    head_sha,
    watched_head,
)
from webapp.watch import history

pytestmark = pytest.mark.django_db


@pytest.fixture
def embargoed_push():
    """A public tree whose rcu/dev history is 8 public heads at 6.0 ms, one public head at
    7.25 ms, then 7 restricted ones at 7.25 ms: over all of them a change of +20.8% at the
    ninth head, a public one, whose median after comes from the restricted runs; over the
    public heads alone, no change point. And a branch embargo-fix whose one push is
    restricted."""
    tree = TreeFactory.create(name="rcu")
    target = TargetFactory.create()
    public = [watched_head(tree, target, n, 6.0 if n < 8 else 7.25)[1] for n in range(9)]
    restricted = [
        watched_head(tree, target, n, 7.25, visibility="restricted",
                     verdict="regression" if n == 9 else "no-meaningful-change")[1]
        for n in range(9, 16)
    ]  # fmt: skip
    restricted.append(watched_head(tree, target, 20, 7.25, visibility="restricted",
                                   branch="embargo-fix", verdict="regression")[1])  # fmt: skip
    history.record_change_points(tree, "rcu/dev")
    return tree, public, restricted


def _outsiders(client):
    yield "anonymous"
    client.force_login(UserFactory.create(username="outsider"))
    yield "outsider"


def _restricted_shas() -> list[str]:
    return [head_sha(1000 + n)[:12] for n in [*range(9, 16), 20]]


def test_the_tree_page_shows_outsiders_nothing_of_restricted_pushes(client, embargoed_push):
    tree, public, restricted = embargoed_push
    url = reverse("reports:tree", args=[tree.name])
    for who in _outsiders(client):
        html = client.get(url).content.decode()
        assert f'href="/comparisons/{public[-1].pk}/"' in html, who
        assert head_sha(1008)[:12] in html  # the newest head they may see
        for c in restricted:
            assert f"/comparisons/{c.pk}/" not in html, who
        for sha in _restricted_shas():
            assert sha not in html, who
        assert "embargo-fix" not in html, who
        assert "badge v-regression" not in html, who  # the restricted verdicts
        # The change point at the public ninth head was found over the restricted runs.
        assert 'id="change-points"' not in html, who
        assert "7.2850" not in html, who  # its median after


def test_the_tree_page_shows_members_and_staff_everything(client, embargoed_push):
    tree, _, restricted = embargoed_push
    url = reverse("reports:tree", args=[tree.name])
    for user in (MembershipFactory.create(tree=tree).user,
                 UserFactory.create(username="operator", is_staff=True)):  # fmt: skip
        client.force_login(user)
        html = client.get(url).content.decode()
        assert f'href="/comparisons/{restricted[0].pk}/"' in html
        assert "embargo-fix" in html
        assert head_sha(1020)[:12] in html
        assert 'id="change-points"' in html
        assert "6.0350 → 7.2850" in html  # the change point, found over all the runs


def test_the_history_shows_outsiders_neither_points_nor_change_points_of_them(
    client, embargoed_push
):
    tree, public, _ = embargoed_push
    api = f"/api/v1/trees/{tree.name}/history/"
    page = reverse("watch:tree-history", args=[tree.name])
    for who in _outsiders(client):
        [s] = client.get(api).json()["series"]
        assert [p["comparison_id"] for p in s["points"]] == [c.pk for c in public], who
        assert s["change_points"] == [], who
        html = client.get(page).content.decode()
        for sha in _restricted_shas():
            assert sha not in html, who
    client.force_login(MembershipFactory.create(tree=tree).user)
    assert len(client.get(api).json()["series"]) == 2  # embargo-fix too
    [s] = client.get(api + "?branch=rcu/dev").json()["series"]
    assert len(s["points"]) == 16
    [cp] = s["change_points"]
    assert cp["sha"] == head_sha(1008)
    assert cp["change_pct"] == pytest.approx(100 * (7.285 / 6.035 - 1))


def test_the_comparison_api_shows_outsiders_none_of_them(client, embargoed_push):
    tree, public, restricted = embargoed_push
    for who in _outsiders(client):
        for url in ("/api/v1/comparisons/?page_size=100",
                    f"/api/v1/comparisons/?tree={tree.name}&page_size=100"):  # fmt: skip
            ids = {row["id"] for row in client.get(url).json()["results"]}
            assert ids == {c.pk for c in public}, who
        for c in restricted:
            assert client.get(f"/api/v1/comparisons/{c.pk}/").status_code == 404, who
    client.force_login(MembershipFactory.create(tree=tree).user)
    ids = {r["id"] for r in client.get("/api/v1/comparisons/?page_size=100").json()["results"]}
    assert ids == {c.pk for c in public + restricted}
    assert client.get(f"/api/v1/comparisons/{restricted[0].pk}/").status_code == 200
