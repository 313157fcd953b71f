"""POST /api/v1/comparisons/<id>/cancel/: the submitter, the tree's admins and staff may;
another member who sees it gets 403; anyone who may not see it 404; anonymous 401."""

import pytest

from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who", ["alice", "carol", "staff"])
def test_the_submitter_tree_admins_and_staff_may_cancel(world, client_for, who):
    client = client_for(getattr(world, who))
    for c in (world.public, world.restricted):
        response = client.post(f"/api/v1/comparisons/{c.pk}/cancel/")
        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["state"], body["result"], body["error_code"]) == (
            "done", "incomplete", "cancelled"
        )  # fmt: skip
        c.refresh_from_db()
        assert c.error_code == Comparison.Error.CANCELLED
        assert set(c.runs.values_list("state", flat=True)) == {"done"}
        # Again: it had already ended.
        again = client.post(f"/api/v1/comparisons/{c.pk}/cancel/")
        assert again.status_code == 409
        assert "had already ended" in again.json()["detail"]


def test_another_submitter_who_sees_it_gets_403(world, client_for):
    client = client_for(world.dave)
    for c in (world.public, world.restricted):
        response = client.post(f"/api/v1/comparisons/{c.pk}/cancel/")
        assert response.status_code == 403
        assert "only the submitter" in response.json()["detail"]
        c.refresh_from_db()
        assert c.state == "queued"


def test_who_cannot_see_it_gets_404_and_anonymous_401(world, client_for, anon):
    assert (
        client_for(world.bob).post(f"/api/v1/comparisons/{world.restricted.pk}/cancel/").status_code
        == 404
    )
    assert (
        client_for(world.bob).post(f"/api/v1/comparisons/{world.public.pk}/cancel/").status_code
        == 403
    )
    assert anon.post(f"/api/v1/comparisons/{world.public.pk}/cancel/").status_code == 401
    world.restricted.refresh_from_db()
    world.public.refresh_from_db()
    assert world.restricted.state == world.public.state == "queued"
