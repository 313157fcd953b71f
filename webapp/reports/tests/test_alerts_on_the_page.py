"""The comparison page lists its mails (to whom, why, outcome) for the tree's admins and
staff, outside the report body that is cached for every reader."""

import pytest
from django.urls import reverse

from tests.support.factories import MembershipFactory, UserFactory
from webapp.alerts.models import Alert
from webapp.trees.models import TreeMembership

pytestmark = pytest.mark.django_db


@pytest.fixture
def mailed(done_comparison):
    Alert.objects.create(
        comparison=done_comparison, kind="regression", recipient="rcu@vger.example.org",
        reason="because this address is subscribed to regressions", subject="Re: x",
        message_id="<rcubench.c1.x@bench.example.org>", state="failed", attempts=1,
        smtp_reply="550 5.1.1 no such list",
    )  # fmt: skip
    return done_comparison


def _page(client, c) -> str:
    return client.get(reverse("reports:comparison", args=[c.pk])).content.decode()


def test_the_trees_admins_see_its_mails_and_the_servers_reply(client, mailed):
    admin = UserFactory.create()
    MembershipFactory.create(tree=mailed.revision_a.tree, user=admin,
                             role=TreeMembership.Role.ADMIN)  # fmt: skip
    client.force_login(admin)
    html = _page(client, mailed)
    assert 'id="alerts"' in html
    assert "rcu@vger.example.org" in html
    assert "550 5.1.1 no such list" in html


@pytest.mark.parametrize("who", ["anonymous", "submitter"])
def test_nobody_else_sees_them_even_with_the_body_cached(client, mailed, who):
    admin = UserFactory.create(is_staff=True)
    client.force_login(admin)
    assert "rcu@vger.example.org" in _page(client, mailed)  # the body is cached now
    client.logout()
    if who == "submitter":
        user = UserFactory.create()
        MembershipFactory.create(tree=mailed.revision_a.tree, user=user)
        client.force_login(user)
    html = _page(client, mailed)
    assert "Comparison #" in html
    assert "rcu@vger.example.org" not in html
    assert 'id="alerts-heading"' not in html
