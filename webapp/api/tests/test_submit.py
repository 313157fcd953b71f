"""POST /api/v1/comparisons/: the submission form's fields through the one submission
service; a refused request is a 400 naming the field with the service's own message, and
stores nothing."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from engine.build.tests.conftest import FIXTURES
from tests.support.factories import TargetFactory
from webapp.comparisons.models import Comparison, Target
from webapp.lab.models import LabHost
from webapp.routing import ADVANCE_COMPARISON
from webapp.trees import lore
from webapp.trees.models import PatchSeries, Revision

pytestmark = pytest.mark.django_db

TWO_PATCHES = (FIXTURES / "two-patches.mbox").read_bytes()


def _count() -> tuple[int, int, int]:
    return Comparison.objects.count(), Revision.objects.count(), PatchSeries.objects.count()


def test_submit_two_refs(world, client_for, django_capture_on_commit_callbacks, sent):
    client = client_for(world.alice)
    request = {
        "tree": "rcu", "base_ref": "v6.12", "head_ref": "rcu/dev",
        "benchmarks": ["sync-rcu-latency", "boot-time"], "target": "qemu-x86_64",
        "min_runs": 24, "max_runs": 48, "threshold_pct": 1.5, "seed": 7,
        "cmdline_b": "rcutree.jiffies_till_first_fqs=1",
    }  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/api/v1/comparisons/", request, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    c = Comparison.objects.get(pk=body["id"])
    assert response["Location"].endswith(f"/{c.pk}/")
    assert (c.trigger, c.submitted_by, c.requested_by) == ("api", world.alice, "api:alice")
    assert (c.revision_a.ref, c.revision_b.ref, c.benchmarks) == (
        "v6.12", "rcu/dev", ["sync-rcu-latency", "boot-time"]
    )  # fmt: skip
    assert (c.min_runs, c.max_runs, c.threshold_pct, c.seed) == (24, 48, 1.5, 7)
    assert c.cmdline_b == "rcutree.jiffies_till_first_fqs=1"
    assert c.visibility == "public"
    assert body["state"] == "queued"
    assert body["progress"]["phase"] == "building"
    assert sent == [(ADVANCE_COMPARISON, (c.pk,))]  # started, once committed


def test_submit_an_mbox_upload(world, client_for):
    upload = SimpleUploadedFile("series.mbox", TWO_PATCHES, content_type="application/mbox")
    response = client_for(world.alice).post(
        "/api/v1/comparisons/",
        {"tree": "embargo", "base_ref": "v6.12.117-debian", "series": upload,
         "benchmarks": ["sync-rcu-latency"], "patch_fallback": "true"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    body = response.json()
    c = Comparison.objects.get(pk=body["id"])
    series = c.revision_b.series
    assert series is not None
    assert bytes(series.mbox) == TWO_PATCHES
    assert series.patches.count() == 2
    assert c.revision_b.ref == "v6.12.117-debian"
    assert c.revision_b.patch_fallback
    assert c.visibility == "restricted"  # the embargoed tree's default
    assert body["series"]["subject"] == series.subject
    assert body["series"]["id"] == series.pk


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"base_ref": "--upload-pack=evil"}, "base_ref", "starts with '-'"),
        ({"head_ref": "a..b"}, "head_ref", "is not a branch, tag or sha"),
        ({"min_runs": 4}, "min_runs", "at least 24 runs per side are needed, got 4"),
        ({"max_runs": 10_000}, "max_runs", "is above the limit of"),
        ({"benchmarks": ["no-such"]}, "benchmarks", "unknown benchmark 'no-such'"),
        ({"benchmarks": []}, "benchmarks", "no benchmark requested"),
        # An unknown preset: the benchmark's presets are named, with what each sets.
        (
            {"benchmarks": ["sync-rcu-latency--nwriters-200"]},
            "benchmarks",
            "benchmark sync-rcu-latency has no preset 'nwriters-200'; its presets: "
            "sync-rcu-latency--many-writers (rcuscale.nwriters=16), ",
        ),
        # A free rcuscale value stays refused, pointing at the presets.
        (
            {"cmdline_b": "rcuscale.nwriters=200"},
            "cmdline_b",
            "ask for a preset instead, a reviewed variant chosen as a benchmark: "
            "sync-rcu-latency--many-writers (rcuscale.nwriters=16)",
        ),
        ({"target": "nowhere"}, "target", "no target named 'nowhere'"),
        # Answered as a tree without a role (no oracle of which trees exist).
        ({"tree": "nope"}, "tree", "you may not submit to tree nope"),
        # A name no tree can have (the one rule, webapp/trees/names.py) is refused as such.
        ({"tree": "../rcu"}, "tree", "Enter a valid tree name"),
        ({"cmdline_a": "init=/bin/sh"}, "cmdline_a", "init is set by the runner"),
        ({"visibility": "public", "tree": "embargo"}, "visibility", "is not public"),
        ({"patch_fallback": True}, "patch_fallback", "there is no patch series"),
        ({"threshold_pct": -1}, "threshold_pct", "the threshold must be >= 0"),
        ({"seed": -1}, "seed", "greater than or equal to 0"),
        ({"min_runs": "many"}, "min_runs", "A valid integer is required"),
    ],
)
def test_a_refused_request_is_a_400_naming_the_field(world, client_for, fields, field, message):
    before = _count()
    request = {"tree": "rcu", "base_ref": "v6.12", "head_ref": "rcu/dev", **fields}
    response = client_for(world.alice).post("/api/v1/comparisons/", request, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == [field], body
    assert message in body[field][0], body
    assert _count() == before


def test_a_user_without_a_role_on_the_tree_may_not_submit(world, client_for):
    response = client_for(world.bob).post(
        "/api/v1/comparisons/", {"tree": "rcu", "base_ref": "v6.12"}, format="json"
    )
    assert response.status_code == 400
    assert "you may not submit to tree rcu" in response.json()["tree"][0]


def test_a_bad_series_is_a_400_on_series(world, client_for):
    upload = SimpleUploadedFile("x.mbox", b"this is not a patch series\n")
    response = client_for(world.alice).post(
        "/api/v1/comparisons/", {"tree": "rcu", "base_ref": "v6.12", "series": upload},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 400
    assert list(response.json()) == ["series"]


def test_head_ref_and_series_together_are_refused(world, client_for):
    upload = SimpleUploadedFile("series.mbox", TWO_PATCHES)
    response = client_for(world.alice).post(
        "/api/v1/comparisons/",
        {"tree": "rcu", "base_ref": "v6.12", "head_ref": "x", "series": upload},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json() == {"head_ref": ["give a head ref or a patch series, not both"]}


def test_a_lab_pool_that_runs_trusted_kernels_only_refuses_a_submitter_on_target(world, client_for):
    """A lab host runs the kernel as root on real hardware: a trusted-only pool (the default,
    webapp/lab/pools.py) takes the refs of the tree's admins, not a submitter's."""
    pool = TargetFactory.create(name="lab-x86", kind=Target.Kind.LAB)
    LabHost.objects.create(target=pool, name="h1", address="127.0.0.1", key_file="/etc/k",
                           host_key="x", console_command="true", power_command="true")  # fmt: skip
    before = _count()
    request = {"tree": "rcu", "base_ref": "v6.12", "head_ref": "rcu/dev", "target": "lab-x86"}
    response = client_for(world.alice).post("/api/v1/comparisons/", request, format="json")
    assert response.status_code == 400, response.content
    [message] = response.json()["target"]
    assert message.startswith("lab pool lab-x86 runs trusted kernels only")
    assert "its submitter is not an admin of tree rcu" in message
    assert _count() == before
    response = client_for(world.carol).post("/api/v1/comparisons/", request, format="json")
    assert response.status_code == 201, response.content
    assert Comparison.objects.get(pk=response.json()["id"]).target == pool


def test_an_oversized_upload_is_413_with_the_limit(world, client_for, settings):
    settings.RCUBENCH_MAX_MBOX_BYTES = 1000
    before = _count()
    client = client_for(world.alice)
    big = SimpleUploadedFile("big.mbox", TWO_PATCHES + b"x" * 200_000)
    request = {"tree": "rcu", "base_ref": "v6.12", "series": big}
    response = client.post("/api/v1/comparisons/", request, format="multipart")
    assert response.status_code == 413, response.content
    message = response.json()["series"][0]
    assert "an mbox may be at most 1000" in message
    # Under the request limit but over the mbox limit: the field's own message.
    small = SimpleUploadedFile("big.mbox", TWO_PATCHES + b"x" * (5000 - len(TWO_PATCHES)))
    request = {"tree": "rcu", "base_ref": "v6.12", "series": small}
    response = client.post("/api/v1/comparisons/", request, format="multipart")
    assert response.status_code == 400
    assert response.json() == {"series": ["the mbox is 5000 bytes; the limit is 1000"]}
    assert _count() == before


def test_a_message_id_answers_a_clear_400_where_lore_is_not_reachable(world, client_for):
    before = _count()
    client = client_for(world.alice)
    response = client.post(
        "/api/v1/comparisons/",
        {"tree": "rcu", "base_ref": "v6.12", "message_id": "<20241201.1234-1-dev@example.org>"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    message = response.json()["message_id"][0]
    assert message.startswith("could not fetch <20241201.1234-1-dev@example.org> from lore: ")
    request = {"tree": "rcu", "base_ref": "v6.12", "message_id": "not an id"}
    response = client.post("/api/v1/comparisons/", request, format="json")
    assert response.status_code == 400
    assert "is not a message-id" in response.json()["message_id"][0]
    assert _count() == before


def test_a_message_id_submits_the_series_lore_has(world, client_for, monkeypatch):
    asked = []

    def fetch(message_id: str) -> bytes:
        asked.append(message_id)
        return TWO_PATCHES

    monkeypatch.setattr(lore, "fetch", fetch)
    response = client_for(world.alice).post(
        "/api/v1/comparisons/",
        {"tree": "rcu", "base_ref": "v6.12", "message_id": "<cover.1@example.org>"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    c = Comparison.objects.get(pk=response.json()["id"])
    assert c.revision_b.series is not None
    assert bytes(c.revision_b.series.mbox) == TWO_PATCHES
    assert asked == ["<cover.1@example.org>"]
    # What lore sent is checked as an upload is; its errors are the message-id's.
    monkeypatch.setattr(lore, "fetch", lambda message_id: b"not a series\n")
    response = client_for(world.alice).post(
        "/api/v1/comparisons/",
        {"tree": "rcu", "base_ref": "v6.12", "message_id": "<cover.2@example.org>"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert list(response.json()) == ["message_id"]


def test_malformed_json_is_a_400(world, client_for):
    response = client_for(world.alice).post(
        "/api/v1/comparisons/", b'{"tree": NaN', content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


@pytest.mark.parametrize("tree", ["rcu", "embargo", "no-such-tree"])
def test_an_account_without_a_role_is_refused_before_lore_is_asked(
    world, client_for, monkeypatch, tree
):
    """b4 holds a web worker up to lore.FETCH_TIMEOUT: the role is checked first."""
    asked = []

    def fetch(message_id: str) -> bytes:
        asked.append(message_id)
        return TWO_PATCHES

    monkeypatch.setattr(lore, "fetch", fetch)
    before = _count()
    response = client_for(world.bob).post(  # bob holds no role on any tree
        "/api/v1/comparisons/",
        {"tree": tree, "base_ref": "v6.12", "message_id": "<cover.1@example.org>"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json() == {
        "tree": [f"you may not submit to tree {tree}: ask its admins for the submitter role"]
    }
    assert asked == []
    assert _count() == before


def test_a_preset_is_submitted_as_a_benchmark_of_its_own(world, client_for):
    request = {"tree": "rcu", "base_ref": "v6.12", "head_ref": "rcu/dev",
               "benchmarks": ["sync-rcu-latency", "sync-rcu-latency--many-writers"]}  # fmt: skip
    response = client_for(world.alice).post("/api/v1/comparisons/", request, format="json")
    assert response.status_code == 201, response.content
    c = Comparison.objects.get(pk=response.json()["id"])
    assert c.benchmarks == ["sync-rcu-latency", "sync-rcu-latency--many-writers"]
