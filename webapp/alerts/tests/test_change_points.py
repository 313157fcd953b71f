"""Change-point mails: to the tree's subscribers who asked for them."""

import pytest

from tests.support.factories import TargetFactory, TreeFactory, UserFactory
from webapp.alerts import services
from webapp.alerts.models import Alert, Subscription
from webapp.watch.models import ChangePoint, Push

pytestmark = pytest.mark.django_db


def _change_point(tree, regression=True):
    push = Push.objects.create(tree=tree, branch="rcu/next", before="a" * 40, after="b" * 40,
                               source="git", state="tested")  # fmt: skip
    return ChangePoint.objects.create(
        tree=tree, branch="rcu/next", benchmark="sync-rcu-latency", metric="writer_duration",
        target=TargetFactory.create(), push=push, before_median=6.0, after_median=6.6,
        change_pct=10.0, regression=regression,
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
    assert [services.deliver(pk) for pk in ids] == ["sent", "sent"]
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
