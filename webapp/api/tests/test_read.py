"""Every read endpoint: what it answers, for whom; a restricted comparison and everything
under it is 404 to anyone outside its tree (anonymous, a logged-in non-member), through
every endpoint, and absent from every list."""

import csv
import io
import json

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from benchmarks import registry
from tests.support.factories import ComparisonFactory, PatchSeriesFactory
from webapp.api.serializers import ComparisonSerializer
from webapp.comparisons.models import Comparison
from webapp.trees.models import Tree

pytestmark = pytest.mark.django_db


def _get(client, url, **kw):
    response = client.get(url, **kw)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response, body


def test_trees_list_the_trees_the_caller_sees_with_their_role(world, anon, client_for):
    rows = anon.get("/api/v1/trees/").json()["results"]
    assert [(t["name"], t["role"], t["can_submit"]) for t in rows] == [("rcu", None, False)]
    assert [t["name"] for t in client_for(world.bob).get("/api/v1/trees/").json()["results"]] == [
        "rcu"
    ]
    # Fields that did nothing are gone (webhook secrets: ./manage.py webhook_secret; the
    # baseline: the watch policy's rule).
    assert not {"webhook_secret", "baseline_policy", "baseline_ref"} & set(rows[0])
    assert "url" not in rows[0]
    rows = client_for(world.carol).get("/api/v1/trees/").json()["results"]
    assert [(t["name"], t["role"], t["can_submit"]) for t in rows] == [
        ("embargo", "admin", True), ("rcu", "admin", True)
    ]  # fmt: skip
    one = client_for(world.bob).get("/api/v1/trees/rcu/").json()
    assert (one["name"], one["role"], one["can_submit"], one["public"]) == (
        "rcu",
        None,
        False,
        True,
    )
    assert client_for(world.staff).get("/api/v1/trees/rcu/").json()["can_submit"] is True
    assert anon.get("/api/v1/trees/nope/").status_code == 404


def test_an_embargoed_tree_is_404_to_outsiders_as_an_unknown_one(world, anon, client_for):
    """Its name and description (where operators write why it is embargoed) are its
    members' and staff's only: outsiders get the very answer of a name that does not exist."""
    world.embargo.description = "EMBARGOED: fix for CVE-2026-99999, disclosure 2027-01-15"
    world.embargo.save()
    for client in (anon, client_for(world.bob)):
        unknown = client.get("/api/v1/trees/no-such-tree/")
        embargoed = client.get("/api/v1/trees/embargo/")
        assert (embargoed.status_code, embargoed.content) == (404, unknown.content)
        assert b"embargo" not in client.get("/api/v1/trees/").content
    for member in (world.alice, world.staff):
        body = client_for(member).get("/api/v1/trees/embargo/").json()
        assert body["description"].startswith("EMBARGOED")


def test_targets_and_benchmarks(world, anon):
    targets = anon.get("/api/v1/targets/").json()["results"]
    x86 = next(t for t in targets if t["name"] == "qemu-x86_64")
    assert x86["arch"] == "x86_64"
    assert x86["cpus"] == x86["sockets"] * x86["cores"] * x86["threads"]
    body = anon.get("/api/v1/benchmarks/").json()
    assert body["count"] == len(registry.BENCHMARKS)
    sync = next(b for b in body["results"] if b["name"] == "sync-rcu-latency")
    primary = [m for m in sync["metrics"] if m["primary"]]
    assert primary == [{"name": "writer_duration", "unit": "ms", "direction": "lower",
                        "kind": "samples", "primary": True, "threshold": 2.0,
                        "threshold_is_absolute": False}]  # fmt: skip
    assert {"name": "rcuscale.nwriters", "value": "1"} in sync["parameters"]
    assert "CONFIG_RCU_SCALE_TEST=y" in sync["kconfig"]
    assert (sync["preset_of"], sync["preset"], sync["preset_parameters"]) == (None, None, None)
    # A preset: a benchmark of its own, saying what it is a variant of and what it sets.
    many = next(b for b in body["results"] if b["name"] == "sync-rcu-latency--many-writers")
    assert (many["preset_of"], many["preset"]) == ("sync-rcu-latency", "many-writers")
    assert many["preset_parameters"] == [{"name": "rcuscale.nwriters", "value": "16"}]
    assert {"name": "rcuscale.shutdown", "value": "1"} in many["parameters"]
    assert many["kconfig"] == sync["kconfig"]
    assert "16 writers" in many["notes"]
    exp = next(b for b in body["results"] if b["name"] == "sync-rcu-latency-exp")
    assert (exp["preset_of"], exp["preset"]) == ("sync-rcu-latency", "expedited")


def test_comparison_list_and_detail(world, anon):
    body = anon.get("/api/v1/comparisons/").json()
    assert [c["id"] for c in body["results"]] == [world.public.pk]
    c = anon.get(f"/api/v1/comparisons/{world.public.pk}/").json()
    assert (c["tree"], c["base_ref"], c["head_ref"], c["submitter"], c["visibility"]) == (
        "rcu", "v6.12", "rcu/dev", "alice", "public"
    )  # fmt: skip
    assert c["progress"]["done"] == 2
    assert c["progress"]["total"] == 2 * world.public.min_runs
    assert c["report_url"].endswith(f"/comparisons/{world.public.pk}/")


def test_runs_measurements_verdicts_and_exports(world, anon):
    pk = world.public.pk
    runs = anon.get(f"/api/v1/comparisons/{pk}/runs/").json()["results"]
    assert [(r["side"], r["result"], r["wall_seconds"]) for r in runs] == [
        ("A", "ok", 31.5), ("B", "ok", 31.5)
    ]  # fmt: skip
    assert "console_log" not in runs[0]
    assert runs[0]["console_url"].endswith("/console")
    run = anon.get(f"/api/v1/runs/{world.public_run.pk}/").json()
    assert run["comparison"] == pk
    ms = anon.get(f"/api/v1/runs/{world.public_run.pk}/measurements/").json()["results"]
    assert [(m["metric"], m["samples"]) for m in ms] == [
        ("gps", [120.0]), ("writer_duration", [6.0, 6.1, 5.9])
    ]  # fmt: skip
    verdicts = anon.get(f"/api/v1/comparisons/{pk}/verdicts/").json()["results"]
    assert [(v["metric"], v["verdict"], v["unit"]) for v in verdicts] == [
        ("writer_duration", "no-meaningful-change", "ms")
    ]  # fmt: skip
    response, body = _get(anon, f"/api/v1/comparisons/{pk}/data.csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0][:3] == ["comparison_id", "benchmark", "metric"]
    assert len(rows) == 1 + 2 * 4
    # Whatever the client accepts; errors are JSON.
    response, _ = _get(anon, f"/api/v1/comparisons/{pk}/data.csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    response, _ = _get(anon, "/api/v1/comparisons/999999/data.csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    response, body = _get(anon, f"/api/v1/comparisons/{pk}/data.json")
    assert response.status_code == 200
    data = json.loads(body)
    assert data["comparison"]
    assert len(data["samples"]["rows"]) == 8
    # The summary alone (what `compare --server --format json` reads): the rest, no samples.
    response, body = _get(anon, f"/api/v1/comparisons/{pk}/data.json?samples=false")
    assert response.status_code == 200
    assert json.loads(body) == {k: v for k, v in data.items() if k != "samples"}
    refused = anon.get(f"/api/v1/comparisons/{pk}/data.json?samples=maybe")
    assert (refused.status_code, refused.json()) == (400, {"samples": ["Must be a valid boolean."]})


RESTRICTED_URLS = [
    "/api/v1/comparisons/{c}/",
    "/api/v1/comparisons/{c}/runs/",
    "/api/v1/comparisons/{c}/verdicts/",
    "/api/v1/comparisons/{c}/data.csv",
    "/api/v1/comparisons/{c}/data.json",
    "/api/v1/runs/{r}/",
    "/api/v1/runs/{r}/measurements/",
]


@pytest.mark.parametrize("who", ["anonymous", "bob"])
@pytest.mark.parametrize("url", RESTRICTED_URLS)
def test_a_restricted_comparison_is_404_to_non_members_through_every_endpoint(
    world, client_for, who, url
):
    client = client_for(None if who == "anonymous" else world.bob)
    path = url.format(c=world.restricted.pk, r=world.restricted_run.pk)
    response, body = _get(client, path)
    assert response.status_code == 404, body
    # The same answer as for an id that does not exist: the id leaks nothing.
    missing, missing_body = _get(client, url.format(c=10**9, r=10**9))
    assert (missing.status_code, missing_body) == (404, body)
    # and the public one answers
    assert _get(client, url.format(c=world.public.pk, r=world.public_run.pk))[0].status_code == 200


def test_a_restricted_comparison_is_in_no_list_of_non_members(world, anon, client_for):
    for client in (anon, client_for(world.bob)):
        ids = [c["id"] for c in client.get("/api/v1/comparisons/").json()["results"]]
        assert ids == [world.public.pk]
        for params in ({"tree": "embargo"}, {"submitter": "alice"}, {"state": "queued"}):
            ids = [c["id"] for c in client.get("/api/v1/comparisons/", params).json()["results"]]
            assert world.restricted.pk not in ids


@pytest.mark.parametrize("who", ["alice", "dave", "carol", "staff"])
@pytest.mark.parametrize("url", RESTRICTED_URLS)
def test_members_and_staff_see_a_restricted_comparison(world, client_for, who, url):
    client = client_for(getattr(world, who))
    response, _ = _get(client, url.format(c=world.restricted.pk, r=world.restricted_run.pk))
    assert response.status_code == 200
    ids = {c["id"] for c in client.get("/api/v1/comparisons/").json()["results"]}
    assert ids == {world.public.pk, world.restricted.pk}


@pytest.mark.parametrize("pk", ["0", "-1", str(2**63), str(10**30)])
def test_ids_out_of_range_are_json_404s(world, anon, pk):
    for url in ("/api/v1/comparisons/{}/", "/api/v1/runs/{}/measurements/"):
        response = anon.get(url.format(pk))
        assert response.status_code == 404
        assert response.json() == {"detail": "no such object"}


def test_filters(world, client_for):
    client = client_for(world.alice)
    other = world.public.__class__.objects.get(pk=world.public.pk)
    other.benchmarks = ["boot-time"]
    other.save()

    def ids(**params):
        response = client.get("/api/v1/comparisons/", params)
        assert response.status_code == 200, response.content
        return {c["id"] for c in response.json()["results"]}

    assert ids(tree="rcu") == {world.public.pk}
    assert ids(tree="embargo") == {world.restricted.pk}
    assert ids(submitter="alice") == {world.public.pk, world.restricted.pk}
    assert ids(submitter="bob") == set()
    assert ids(state="queued") == {world.public.pk, world.restricted.pk}
    assert ids(state="done") == set()
    assert ids(benchmark="boot-time") == {world.public.pk}
    assert ids(benchmark="sync-rcu-latency") == {world.restricted.pk}
    assert ids(verdict="regression") == set()
    response = client.get("/api/v1/comparisons/", {"state": "exploded"})
    assert response.status_code == 400
    assert "state" in response.json()


def test_pagination(world, client_for):
    for _ in range(4):
        ComparisonFactory.create(revision_a=world.public.revision_a,
                                 revision_b=world.public.revision_b)  # fmt: skip
    client = client_for(world.bob)
    first = client.get("/api/v1/comparisons/", {"page_size": 2}).json()
    assert first["count"] == 5
    assert len(first["results"]) == 2
    assert first["previous"] is None
    assert "page=2" in first["next"]
    last = client.get("/api/v1/comparisons/", {"page_size": 2, "page": 3}).json()
    assert len(last["results"]) == 1
    assert last["next"] is None
    pages = [client.get("/api/v1/comparisons/", {"page_size": 2, "page": p}) for p in (1, 2, 3)]
    seen = {c["id"] for page in pages for c in page.json()["results"]}
    assert len(seen) == 5
    assert client.get("/api/v1/comparisons/", {"page": 99}).status_code == 404
    for url in ("/api/v1/trees/", "/api/v1/targets/", "/api/v1/benchmarks/",
                f"/api/v1/comparisons/{world.public.pk}/runs/",
                f"/api/v1/comparisons/{world.public.pk}/verdicts/",
                f"/api/v1/runs/{world.public_run.pk}/measurements/",
                "/api/v1/tokens/"):  # fmt: skip
        body = client.get(url, {"page_size": 1}).json()
        assert set(body) == {"count", "next", "previous", "results"}, url
        assert len(body["results"]) <= 1


def test_the_list_takes_a_constant_number_of_queries(world, anon, django_assert_max_num_queries):
    for _ in range(30):
        ComparisonFactory.create(revision_a=world.public.revision_a,
                                 revision_b=world.public.revision_b)  # fmt: skip
    with django_assert_max_num_queries(4):
        assert len(anon.get("/api/v1/comparisons/").json()["results"]) == 31


def test_list_rows_are_the_serializers_and_follow_every_change_they_show(world, anon):
    """The list serves rows from a per-process memo (services.comparison_rows): each equals
    the serializer's output, and any value a row shows makes a new one when it changes."""

    def listed() -> dict:
        rows = anon.get("/api/v1/comparisons/").json()["results"]
        return next(r for r in rows if r["id"] == world.public.pk)

    def serialized() -> dict:
        c = Comparison.objects.get(pk=world.public.pk)
        return json.loads(json.dumps(ComparisonSerializer(c).data, cls=DjangoJSONEncoder))

    assert listed() == serialized()
    assert listed() == serialized()  # from the memo
    c = world.public
    Comparison.objects.filter(pk=c.pk).update(state="done", result="ok", verdict="regression")
    assert listed()["verdict"] == "regression"
    Tree.objects.filter(pk=world.tree.pk).update(name="rcu-renamed")
    assert listed()["tree"] == "rcu-renamed"
    series = PatchSeriesFactory.create(subject="[PATCH 0/2] rcu: first")
    type(c.revision_b).objects.filter(pk=c.revision_b_id).update(series=series)
    assert listed()["series"]["subject"] == "[PATCH 0/2] rcu: first"
    type(series).objects.filter(pk=series.pk).update(subject="[PATCH v2 0/2] rcu: second")
    assert listed()["series"]["subject"] == "[PATCH v2 0/2] rcu: second"
    assert listed() == serialized()
