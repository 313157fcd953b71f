"""/api/v1/bisections/ and POST /api/v1/comparisons/<id>/bisect/: the bisections you may
see (those of comparisons you see), one with its steps as its page shows them, starting one
(the submit scope and a role on the tree; 201, 200 when it joined a running one, 400 with
the service's reason) and cancelling one."""

import pytest
from django.utils import timezone

from tests.support.factories import BisectionFactory, StepFactory, bisectable_comparison
from webapp.bisections.models import Bisection, Step
from webapp.comparisons.models import Comparison
from webapp.routing import ADVANCE_BISECTION

pytestmark = pytest.mark.django_db


@pytest.fixture
def bisections(world):
    """A finished attribution of alice's public comparison and a running bisection of her
    restricted one, asked for by alice."""
    public = bisectable_comparison(world.tree, submitted_by=world.alice)
    restricted = bisectable_comparison(world.embargo, submitted_by=world.alice,
                                       visibility=Comparison.Visibility.RESTRICTED)  # fmt: skip
    done = BisectionFactory.create(
        comparison=public, mode=Bisection.Mode.ATTRIBUTE, state="done", result="ok",
        outcome=Bisection.Outcome.ATTRIBUTED, summary="Beyond the threshold: patch 2/3.",
        requested_by=world.alice, finished_at=timezone.now(),
    )  # fmt: skip
    for position, shift in ((1, 0.2), (2, 9.0), (3, 0.4)):
        StepFactory.create(bisection=done, kind=Step.Kind.PATCH, position=position,
                           comparison=public, answer=Step.Answer.MEASURED, shift=shift,
                           ci_low=shift - 1, ci_high=shift + 1)  # fmt: skip
    running = BisectionFactory.create(comparison=restricted, state="bisecting",
                                      requested_by=world.alice)  # fmt: skip
    StepFactory.create(bisection=running, position=2)
    return done, running


def test_the_list_holds_the_bisections_of_comparisons_you_see(world, bisections, client_for, anon):
    done, running = bisections
    body = anon.get("/api/v1/bisections/").json()
    assert [b["id"] for b in body["results"]] == [done.pk]
    assert body["count"] == 1
    body = client_for(world.alice, ["read"]).get("/api/v1/bisections/").json()
    assert [b["id"] for b in body["results"]] == [running.pk, done.pk]  # newest first
    row = body["results"][1]
    assert (row["mode"], row["state"], row["outcome"], row["comparison"], row["positions"]) == (
        "attribute", "done", "attributed", done.comparison_id, 3
    )  # fmt: skip
    assert (row["effect"], row["effect_low"], row["effect_high"], row["unit"]) == (10, 8, 12, "%")
    assert row["requested_by"] == "alice"
    assert row["url"].endswith(f"/bisections/{done.pk}/")
    assert "steps" not in row
    paged = client_for(world.alice).get("/api/v1/bisections/", {"page_size": 1}).json()
    assert [b["id"] for b in paged["results"]] == [running.pk]
    assert paged["next"]


def test_one_bisection_with_its_commits_steps_and_waterfall(world, bisections, anon, client_for):
    done, running = bisections
    body = anon.get(f"/api/v1/bisections/{done.pk}/").json()
    assert [(c["position"], c["label"], c["subject"]) for c in body["commits"]] == [
        (1, "patch 1/3", "rcu: step 1"), (2, "patch 2/3", "rcu: step 2"),
        (3, "patch 3/3", "rcu: step 3"),
    ]  # fmt: skip
    assert [(s["kind"], s["position"], s["answer"], s["shift"]) for s in body["steps"]] == [
        ("patch", 1, "measured", 0.2), ("patch", 2, "measured", 9.0),
        ("patch", 3, "measured", 0.4),
    ]  # fmt: skip
    assert body["steps"][0]["comparison_url"].endswith(f"/comparisons/{done.comparison_id}/")
    assert [(w["position"], w["start"], w["beyond_threshold"]) for w in body["waterfall"]] == [
        (1, 0.0, False), (2, 0.2, True), (3, pytest.approx(9.2), False)
    ]  # fmt: skip
    assert body["threshold"] == done.comparison.threshold_pct
    assert body["steps_needed"] == 3
    assert body["summary"] == "Beyond the threshold: patch 2/3."
    # A restricted comparison's bisection: 404 to anyone outside its tree, as an unknown id.
    for client in (anon, client_for(world.bob)):
        assert client.get(f"/api/v1/bisections/{running.pk}/").status_code == 404
    assert anon.get("/api/v1/bisections/-1/").status_code == 404
    mine = client_for(world.alice, ["read"]).get(f"/api/v1/bisections/{running.pk}/").json()
    assert (mine["state"], mine["waterfall"], [s["answer"] for s in mine["steps"]]) == (
        "bisecting", [], [""]
    )  # fmt: skip
    assert mine["steps"][0]["comparison"] is None


def test_a_submitter_starts_a_bisection_and_a_second_request_joins_it(
    world, client_for, sent, django_capture_on_commit_callbacks
):
    c = bisectable_comparison(world.tree)
    client = client_for(world.dave)
    request = {"benchmark": "sync-rcu-latency", "metric": "writer_duration", "statistic": "p50"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/api/v1/comparisons/{c.pk}/bisect/", request, format="json")
    assert response.status_code == 201, response.content
    b = Bisection.objects.get()
    assert response["Location"].endswith(f"/api/v1/bisections/{b.pk}/")
    body = response.json()
    assert (body["id"], body["mode"], body["kind"], body["state"], body["trigger"]) == (
        b.pk, "bisect", "series", "queued", "api"
    )  # fmt: skip
    assert (body["requested_by"], body["steps_needed"], body["steps"]) == ("dave", 3, [])
    assert sent == [(ADVANCE_BISECTION, (b.pk,))]  # started once committed
    again = client_for(world.alice).post(f"/api/v1/comparisons/{c.pk}/bisect/", {}, format="json")
    assert again.status_code == 200
    assert again.json()["id"] == b.pk
    attribute = client.post(f"/api/v1/comparisons/{c.pk}/bisect/", {"mode": "attribute"},
                            format="json")  # fmt: skip
    assert attribute.status_code == 201
    assert attribute.json()["mode"] == "attribute"
    assert Bisection.objects.count() == 2


def test_a_refused_bisection_is_a_400_with_the_reason(world, client_for):
    c = bisectable_comparison(world.tree, verdict="no-meaningful-change")
    client = client_for(world.alice)
    response = client.post(f"/api/v1/comparisons/{c.pk}/bisect/", {}, format="json")
    assert response.status_code == 400
    assert response.json() == {"detail": f"comparison #{c.pk} has no primary regression or "
                               "improvement (its verdict: no-meaningful-change)"}  # fmt: skip
    partial = client.post(f"/api/v1/comparisons/{c.pk}/bisect/", {"metric": "gps"},
                          format="json")  # fmt: skip
    assert partial.status_code == 400
    assert "or none of them" in partial.json()["non_field_errors"][0]
    mode = client.post(f"/api/v1/comparisons/{c.pk}/bisect/", {"mode": "x"}, format="json")
    assert mode.status_code == 400
    assert "mode" in mode.json()
    assert not Bisection.objects.exists()


def test_starting_needs_the_submit_scope_and_a_role_on_the_tree(world, client_for, anon):
    public = bisectable_comparison(world.tree)
    restricted = bisectable_comparison(world.embargo, visibility="restricted")
    read_only = client_for(world.alice, ["read"]).post(f"/api/v1/comparisons/{public.pk}/bisect/")
    assert read_only.status_code == 403
    assert "lacks the 'submit' scope" in read_only.json()["detail"]
    assert anon.post(f"/api/v1/comparisons/{public.pk}/bisect/").status_code == 401
    bob = client_for(world.bob)
    response = bob.post(f"/api/v1/comparisons/{public.pk}/bisect/")
    assert response.status_code == 403
    assert "bisecting needs a role on tree rcu" in response.json()["detail"]
    assert bob.post(f"/api/v1/comparisons/{restricted.pk}/bisect/").status_code == 404
    assert bob.post("/api/v1/comparisons/-3/bisect/").status_code == 404
    assert not Bisection.objects.exists()


def test_cancel_who_asked_may_others_may_not(world, bisections, client_for, anon):
    done, running = bisections
    url = f"/api/v1/bisections/{running.pk}/cancel/"
    assert client_for(world.bob).post(url).status_code == 404  # may not see it
    assert anon.post(url).status_code == 401
    response = client_for(world.dave).post(url)
    assert response.status_code == 403
    assert "only who asked for it" in response.json()["detail"]
    assert client_for(world.alice, ["read"]).post(url).status_code == 403  # the scope
    response = client_for(world.alice).post(url)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["state"], body["result"], body["error_code"], body["error_message"]) == (
        "done", "incomplete", "cancelled", "cancelled by alice"
    )  # fmt: skip
    again = client_for(world.carol).post(url)  # a tree admin may, but it had ended
    assert again.status_code == 409
    assert "had already ended" in again.json()["detail"]
    assert client_for(world.carol).post(f"/api/v1/bisections/{done.pk}/cancel/").status_code == 409
