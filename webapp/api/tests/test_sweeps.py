"""/api/v1/sweeps/: submit a sweep, read it with its points, cancel it."""

import numpy as np
import pytest
from rest_framework.test import APIClient

from tests.support.factories import MembershipFactory, TreeFactory, UserFactory, ended_point
from webapp.comparisons.models import Comparison
from webapp.sweeps import services
from webapp.sweeps.models import Sweep, SweepPoint

pytestmark = pytest.mark.django_db
PARAM = "rcutree.jiffies_till_first_fqs"


@pytest.fixture
def member(settings):
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    tree = TreeFactory.create()
    user = UserFactory.create()
    MembershipFactory.create(tree=tree, user=user, role="submitter")
    client = APIClient()
    client.force_authenticate(user)
    return client, tree


def _body(tree, **kw):
    return {"tree": tree.name, "base_ref": "v6.12", "head_ref": "rcu/next",
            "benchmarks": ["sync-rcu-latency"], "min_runs": 4, "max_runs": 8,
            "axis": "cmdline", "parameter": PARAM, "values": ["1", "2", "4"], **kw}  # fmt: skip


def test_submit_read_and_cancel(member):
    client, tree = member
    r = client.post("/api/v1/sweeps/", _body(tree), format="json")
    assert r.status_code == 201, r.json()
    body = r.json()
    assert r["Location"].endswith(f"/api/v1/sweeps/{body['id']}/")
    assert (body["axis"], body["parameter"], body["values"], body["state"]) == (
        "cmdline", PARAM, ["1", "2", "4"], "running",
    )  # fmt: skip
    assert [p["x"] for p in body["points"]] == [1.0, 2.0, 4.0]
    assert body["url"].endswith(f"/sweeps/{body['id']}/")
    c = Comparison.objects.get(pk=body["points"][1]["comparison"])
    assert (c.cmdline_b, c.cohort, c.submitted_by_id) == (f"{PARAM}=2", f"sweep-{body['id']}",
                                                          c.submitted_by_id)  # fmt: skip
    assert APIClient().get(f"/api/v1/sweeps/{body['id']}/").json()["id"] == body["id"]
    assert [s["id"] for s in APIClient().get("/api/v1/sweeps/").json()["results"]] == [body["id"]]
    r = client.post(f"/api/v1/sweeps/{body['id']}/cancel/")
    assert r.status_code == 200, r.json()
    assert {p["state"] for p in r.json()["points"]} == {"incomplete"}


def test_a_refused_sweep_is_a_400_naming_the_field_and_stores_nothing(member):
    client, tree = member
    r = client.post("/api/v1/sweeps/", _body(tree, values=["1", "1"]), format="json")
    assert (r.status_code, r.json()) == (400, {"values": ["a value is given twice"]})
    r = client.post("/api/v1/sweeps/", _body(tree, axis="speed"), format="json")
    assert r.status_code == 400
    assert "axis" in r.json()
    assert not Sweep.objects.exists()
    assert not Comparison.objects.exists()


def test_anonymous_cannot_submit_and_a_stranger_cannot_cancel(member):
    client, tree = member
    assert APIClient().post("/api/v1/sweeps/", _body(tree), format="json").status_code in (401, 403)
    pk = client.post("/api/v1/sweeps/", _body(tree), format="json").json()["id"]
    stranger = APIClient()
    stranger.force_authenticate(UserFactory.create())
    assert stranger.post(f"/api/v1/sweeps/{pk}/cancel/").status_code == 403
    assert not Comparison.objects.filter(state="done").exists()
    assert APIClient().get("/api/v1/sweeps/999999/").status_code == 404


def test_a_concluded_sweep_shows_the_statistic_judged_and_its_points(member):
    client, tree = member
    pk = client.post("/api/v1/sweeps/", _body(tree), format="json").json()["id"]
    rng = np.random.default_rng(2)
    for p in SweepPoint.objects.filter(sweep_id=pk).select_related("comparison"):
        ended_point(p.comparison, p.x**0.2, p.x**0.5, rng)  # type: ignore[operator]
    assert services.conclude(pk)
    assert Sweep.objects.filter(pk=pk, metric="writer_duration", statistic="p50").exists()
    body = APIClient().get(f"/api/v1/sweeps/{pk}/").json()
    assert (body["state"], body["metric"], body["statistic"]) == ("done", "writer_duration", "p50")
    assert "points" not in body["result"]  # the rows judged are `points`, once
    assert [len(p["runs_a"]) for p in body["points"]] == [12, 12, 12]
    assert body["finished_points"] == 3


def test_a_variant_sweep_names_each_points_benchmark(member):
    client, tree = member
    body = _body(tree, axis="variant", parameter="rcuscale.nwriters", values=["1", "2", "8"])
    r = client.post("/api/v1/sweeps/", body, format="json")
    assert r.status_code == 201, r.json()
    points = r.json()["points"]
    assert [(p["x"], p["benchmark"]) for p in points] == [
        (1.0, "sync-rcu-latency"), (2.0, "sync-rcu-latency--nwriters-2"),
        (8.0, "sync-rcu-latency--nwriters-8"),
    ]  # fmt: skip
    assert r.json()["log_axis"] is True
    r = client.post("/api/v1/sweeps/", {**body, "values": ["1", "200"]}, format="json")
    assert (r.status_code, r.json()) == (
        400, {"values": ["rcuscale.nwriters=200: not a whole number in [1, 32]"]})  # fmt: skip
