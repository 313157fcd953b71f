"""Change-point mails: to the tree's subscribers who asked for them."""

import pytest

from tests.support.factories import (
    MembershipFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
    watched_head,
)
from webapp.alerts import delivery, services
from webapp.alerts.models import Alert, Subscription
from webapp.trees.models import TreeMembership
from webapp.watch import history
from webapp.watch.models import ChangePoint, Push

pytestmark = pytest.mark.django_db


def _change_point(tree, regression=True):
    push = Push.objects.create(tree=tree, branch="rcu/next", before="a" * 40, after="b" * 40,
                               source="git", state="tested")  # fmt: skip
    return ChangePoint.objects.create(
        tree=tree, branch="rcu/next", benchmark="sync-rcu-latency", metric="writer_duration",
        target=TargetFactory.create(), push=push, before_median=6.0, after_median=6.6,
        change_pct=10.0, regression=regression, audience=ChangePoint.Audience.PUBLIC,
    )  # fmt: skip


def test_change_points_go_to_those_who_asked(smtp):
    tree = TreeFactory.create(name="rcu")
    Subscription.objects.create(address="cp@example.org", tree=tree, kinds=["change-point"])
    Subscription.objects.create(address="reg@example.org", tree=tree)  # regressions only
    Subscription.objects.create(address="all@example.org",
                                kinds=["change-point", "improvement"])  # fmt: skip
    cp = _change_point(tree)
    ids = services.notify_change_point(cp.pk)
    assert services.notify_change_point(cp.pk) == ids
    assert sorted(Alert.objects.filter(pk__in=ids).values_list("recipient", flat=True)) == [
        "all@example.org", "cp@example.org",
    ]  # fmt: skip
    assert [delivery.deliver(pk) for pk in ids] == ["sent", "sent"]
    msg = smtp.to("cp@example.org")[0].message
    assert msg["Subject"] == (
        f"[rcubench] rcu/rcu/next: sync-rcu-latency writer_duration +10.0% change point "
        f"(regression) at {'b' * 12}"
    )
    assert msg["In-Reply-To"] is None
    assert msg["Message-ID"].startswith(f"<rcubench.cp{cp.pk}.")
    assert "https://rcubench.example.org/trees/rcu/history/" in msg.get_content()
    better = _change_point(tree, regression=False)
    assert [Alert.objects.get(pk=pk).recipient
            for pk in services.notify_change_point(better.pk)] == ["all@example.org"]  # fmt: skip


def test_a_tree_that_is_not_public_mails_only_its_members(smtp):
    tree = TreeFactory.create(name="embargo", public=False)
    outsider = UserFactory.create(email="outsider@example.org")
    Subscription.objects.create(user=outsider, kinds=["change-point"])
    Subscription.objects.create(address="list@example.org", kinds=["change-point"])
    assert services.notify_change_point(_change_point(tree).pk) == []


def _history(tree, restricted_after: bool) -> None:
    """8 public heads of rcu/dev at 6.0 ms, then 8 at 7.25 ms: restricted ones, or public."""
    target = TargetFactory.create()
    for n in range(16):
        visibility = "restricted" if restricted_after and n >= 8 else "public"
        watched_head(tree, target, n, 6.0 if n < 8 else 7.25, visibility=visibility)


def _subscribers(tree):
    """A mailing list (no account), an account without a role, and a member of the tree."""
    Subscription.objects.create(address="rcu-list@vger.example.org", tree=tree,
                                kinds=["change-point"])  # fmt: skip
    outsider = UserFactory.create(username="outsider", email="outsider@example.org")
    Subscription.objects.create(user=outsider, tree=tree, kinds=["change-point"])
    member = MembershipFactory.create(tree=tree, user=UserFactory.create(
        username="paul", email="paul@example.org")).user  # fmt: skip
    Subscription.objects.create(user=member, tree=tree, kinds=["change-point"])
    return member


def _mailed(rows) -> list[str]:
    ids = [pk for cp in rows for pk in services.notify_change_point(cp.pk)]
    return sorted(Alert.objects.filter(pk__in=ids).values_list("recipient", flat=True))


def test_a_change_point_found_over_restricted_runs_is_mailed_to_members_only(smtp):
    tree = TreeFactory.create(name="rcu")
    _history(tree, restricted_after=True)
    member = _subscribers(tree)
    rows = history.record_change_points(tree, "rcu/dev")
    assert _mailed(rows) == ["paul@example.org"]
    [alert] = Alert.objects.all()
    assert delivery.deliver(alert.pk) == "sent"
    assert "+20.7%" in smtp.to("paul@example.org")[0].message["Subject"]
    # Checked again just before sending: a member who left the tree meanwhile gets nothing.
    Alert.objects.filter(pk=alert.pk).update(state=Alert.State.QUEUED)
    TreeMembership.objects.filter(user=member).delete()
    assert delivery.deliver(alert.pk) == "skipped"


def test_each_subscriber_gets_the_change_point_of_what_they_see_once(smtp):
    """A public history: found for both audiences, each subscriber mailed one of them."""
    tree = TreeFactory.create(name="rcu")
    _history(tree, restricted_after=False)
    _subscribers(tree)
    rows = history.record_change_points(tree, "rcu/dev")
    assert len(rows) == 2
    assert _mailed(rows) == ["outsider@example.org", "paul@example.org",
                             "rcu-list@vger.example.org"]  # fmt: skip
