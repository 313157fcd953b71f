"""/api/v1/regressions/: what the triage page and buttons do, for scripts."""

import pytest
from rest_framework.test import APIClient

from tests.support.factories import MembershipFactory, UserFactory, reported_regression
from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db


@pytest.fixture
def reg():
    return reported_regression()


def _member(reg, role="submitter") -> APIClient:
    user = UserFactory.create()
    MembershipFactory.create(tree=reg.tree, user=user, role=role)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_list_and_detail(reg):
    other = reported_regression()
    client = APIClient()
    body = client.get("/api/v1/regressions/").json()
    assert [r["id"] for r in body["results"]] == [other.pk, reg.pk]
    body = client.get(f"/api/v1/regressions/?tree={reg.tree.name}&state=untriaged").json()
    [row] = body["results"]
    assert (row["id"], row["state"], row["shift_pct"], row["comparison"], row["benchmark"]) == (
        reg.pk, "untriaged", 16.7, reg.comparison_id, "sync-rcu-latency",
    )  # fmt: skip
    assert row["url"].endswith(f"/regressions/{reg.pk}/")
    assert client.get("/api/v1/regressions/?state=fixed").json()["results"] == []
    detail = client.get(f"/api/v1/regressions/{reg.pk}/").json()
    assert [(t["from_state"], t["to_state"], t["via"]) for t in detail["transitions"]] == [
        ("", "untriaged", "report")
    ]


def test_a_member_moves_it(reg):
    client = _member(reg)
    fix = {"state": "fixed", "fixed_by": "rcu: revert the extra jiffy"}
    r = client.post(f"/api/v1/regressions/{reg.pk}/move/", fix, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert (body["state"], body["fixed_by"]) == ("fixed", "rcu: revert the extra jiffy")
    assert body["transitions"][-1]["via"] == "api"
    assert body["closed_at"] is not None


def test_refusals(reg):
    client = _member(reg)
    r = client.post(f"/api/v1/regressions/{reg.pk}/move/", {"state": "invalid"}, format="json")
    assert (r.status_code, r.json()) == (
        400, {"detail": "invalid needs a reason: why is it not a regression?"},
    )  # fmt: skip
    r = client.post(f"/api/v1/regressions/{reg.pk}/move/", {"state": "gone"}, format="json")
    assert r.status_code == 400
    assert "state" in r.json()
    stranger = APIClient()
    stranger.force_authenticate(UserFactory.create())
    ok = {"state": "acknowledged"}
    r = stranger.post(f"/api/v1/regressions/{reg.pk}/move/", ok, format="json")
    assert (r.status_code, r.json()["detail"]) == (
        403, f"triaging needs a role on tree {reg.tree.name} (admin or submitter)",
    )  # fmt: skip
    assert APIClient().post(f"/api/v1/regressions/{reg.pk}/move/", ok).status_code in (401, 403)
    Comparison.objects.filter(pk=reg.comparison_id).update(visibility="restricted")
    assert stranger.get(f"/api/v1/regressions/{reg.pk}/").status_code == 404
    r = stranger.post(f"/api/v1/regressions/{reg.pk}/move/", ok, format="json")
    assert r.status_code == 404
    reg.refresh_from_db()
    assert (reg.state, reg.transitions.count()) == ("untriaged", 1)
