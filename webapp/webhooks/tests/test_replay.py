"""Replays: GitHub signs the body only, so anyone who saw a delivery (its body and
signature are on the repository's webhook settings page) can send it again with a fresh
X-GitHub-Delivery. Idempotency and ordering come from the signed body.

The first push creates the branch (before is all zeros), as the first push of a watched
branch GitHub delivers; a replay is that delivery's body, byte for byte."""

import pytest

from webapp.watch import services as watch
from webapp.watch.models import Push
from webapp.webhooks.models import Delivery
from webapp.webhooks.tests.conftest import NEW, OLD, Hooked, github_push

pytestmark = pytest.mark.django_db

CAPTURED_HEAD = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
LATER = "7a1f0e0cbd8d2c5e34f4a4e1ad9ba2a9c0c6f6f1"
CAPTURED = github_push(before="0" * 40, after=CAPTURED_HEAD)


def deliver(client, hooked: Hooked, body: bytes, delivery: str | None = None):
    return client.post(
        f"/hooks/github/{hooked.tree.name}/",
        data=body,
        content_type="application/json",
        **hooked.github_headers(body, delivery=delivery),
    )


def next_push(before: str, after: str) -> bytes:
    """The push GitHub sends after the first one."""
    return github_push(before=before, after=after)


@pytest.fixture
def hooked(db) -> Hooked:
    made = Hooked()
    made.policy.coalesce_seconds = 0  # the review's reproduction: decided at once
    made.policy.save()
    return made


def test_captured_push_replayed_with_a_new_delivery_id_is_a_duplicate(
    client, hooked: Hooked, settings
):
    settings.RCUBENCH_WEBHOOK_RATE = "3/day"  # a day's window: no boundary inside the test
    first = deliver(client, hooked, CAPTURED, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert first.status_code == 202, first.content
    genuine = deliver(client, hooked, next_push(CAPTURED_HEAD, LATER))
    assert genuine.status_code == 202, genuine.content
    newest = Push.objects.get(pk=genuine.json()["push"])

    for _ in range(5):  # the same signed body, each time with a delivery id of one's own
        replay = deliver(client, hooked, CAPTURED)
        assert replay.status_code == 200, replay.content
        assert replay.json()["repeat"] is True
        assert replay.json()["push"] == first.json()["push"]
        assert "repeat of the content of delivery" in replay.json()["detail"]

    # Nothing was stored and nothing supersedes the genuine newest push ...
    assert Push.objects.count() == 2
    assert Delivery.objects.count() == 2
    assert Push.objects.filter(pk__gt=newest.pk).count() == 0
    older = watch.process_push(first.json()["push"])
    assert older.state == Push.State.SUPERSEDED
    assert f"push {newest.pk} " in older.reason
    # ... and the replays spent none of the tree's budget (3 a day, 2 used by genuine pushes).
    third = deliver(client, hooked, next_push(LATER, NEW))
    assert third.status_code == 202, third.content


def test_late_or_replayed_older_push_does_not_supersede_the_newer_one(client, hooked: Hooked):
    """The older push was never stored (delivered out of order, or its first delivery lost):
    its head is the known head's `before`, so it is stale, not a new head."""
    newer = deliver(client, hooked, next_push(CAPTURED_HEAD, LATER))
    assert newer.status_code == 202
    late = deliver(client, hooked, CAPTURED)
    assert late.status_code == 200, late.content
    assert late.json()["detail"].startswith(f"stale: {CAPTURED_HEAD[:12]} is an older head")
    assert "push" not in late.json()
    assert list(Push.objects.values_list("after", flat=True)) == [LATER]
    assert Delivery.objects.get(pk=late.json()["delivery"]).push is None  # logged, no push


def test_push_not_following_the_known_head_does_not_supersede_a_pending_one(client, hooked: Hooked):
    hooked.policy.coalesce_seconds = 300
    hooked.policy.save()
    pending = deliver(client, hooked, github_push(before=OLD, after=NEW))
    assert pending.status_code == 202
    stray = deliver(client, hooked, github_push(before="1" * 40, after="2" * 40))
    assert stray.status_code == 200, stray.content
    assert "not superseding pending push" in stray.json()["detail"]
    assert Push.objects.count() == 1

    # Once nothing is pending, a push after a missed delivery is a new head again.
    Push.objects.update(state=Push.State.TESTED)
    after_gap = deliver(client, hooked, github_push(before="3" * 40, after="4" * 40))
    assert after_gap.status_code == 202, after_gap.content


def test_same_head_again_is_a_duplicate_and_a_return_to_an_older_head_is_not(
    client, hooked: Hooked
):
    assert deliver(client, hooked, github_push(before=OLD, after=NEW)).status_code == 202
    # The same after-sha on the same ref (another body, e.g. the branch re-created there).
    again = deliver(client, hooked, github_push(before="0" * 40, after=NEW))
    assert again.status_code == 200
    assert again.json()["detail"].startswith(f"duplicate: refs/heads/master is at {NEW[:12]}")
    # A force-push back to the older head follows the known head: a push like any other.
    back = deliver(client, hooked, github_push(before=NEW, after=OLD, forced=True))
    assert back.status_code == 202, back.content
    assert Push.objects.count() == 2
