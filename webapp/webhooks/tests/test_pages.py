"""The delivery log (page and admin) and the secret-making command."""

import hashlib
import hmac
import io

import pytest
from django.core.management import CommandError, call_command

from tests.support.factories import ComparisonFactory, MembershipFactory, UserFactory
from webapp.trees.models import TreeMembership
from webapp.watch.models import Push
from webapp.webhooks.models import Delivery, WebhookEndpoint
from webapp.webhooks.tests.conftest import NEW, OLD, Hooked, github_push

pytestmark = pytest.mark.django_db


def _deliver(client, hooked: Hooked, delivery: str, before: str = OLD, after: str = NEW) -> None:
    body = github_push(before=before, after=after)
    r = client.post(
        f"/hooks/github/{hooked.tree.name}/",
        data=body,
        content_type="application/json",
        **hooked.github_headers(body, delivery=delivery),
    )
    assert r.status_code == 202


def test_deliveries_page_for_tree_admins_and_staff_only(client, hooked: Hooked):
    _deliver(client, hooked, "first-delivery")
    _deliver(client, hooked, "second-delivery", before=NEW, after="1" * 40)
    comparison = ComparisonFactory.create(revision_a__tree=hooked.tree)
    Push.objects.get(deliveries__delivery_id="second-delivery").comparisons.add(comparison)
    url = f"/trees/{hooked.tree.name}/deliveries/"

    admin = MembershipFactory.create(tree=hooked.tree, role=TreeMembership.Role.ADMIN).user
    client.force_login(admin)
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert html.index("second-delivery") < html.index("first-delivery")  # newest first
    assert f'href="/comparisons/{comparison.pk}/"' in html
    assert "coalescing window" in html

    staff = UserFactory.create(is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 200

    submitter = MembershipFactory.create(tree=hooked.tree).user
    other_admin = MembershipFactory.create(role=TreeMembership.Role.ADMIN).user
    for user in (submitter, other_admin):
        client.force_login(user)
        assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 404
    assert client.get("/trees/no-such-tree/deliveries/").status_code == 404


def test_deliveries_page_is_paginated(client, hooked: Hooked):
    for i in range(55):
        Delivery.objects.create(
            tree=hooked.tree,
            source="git",
            event="push",
            delivery_id=f"d{i:03}",
            status_code=202,
            outcome="ok",
        )
    client.force_login(UserFactory.create(is_staff=True))
    first = client.get(f"/trees/{hooked.tree.name}/deliveries/").content.decode()
    assert "d054" in first
    assert "d004" not in first
    assert "page 1 of 2" in first
    second = client.get(f"/trees/{hooked.tree.name}/deliveries/?page=2").content.decode()
    assert "d004" in second
    assert "d054" not in second


def test_admin_shows_whether_secrets_are_set_never_their_values(
    admin_client, client, hooked: Hooked
):
    _deliver(client, hooked, "seen-in-admin")
    endpoint = WebhookEndpoint.objects.get(tree=hooked.tree)
    for url in (
        "/admin/webhooks/webhookendpoint/",
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
    ):
        r = admin_client.get(url)
        assert r.status_code == 200
        html = r.content.decode()
        assert hooked.secret not in html
        assert endpoint.gitlab_token_hash not in html
    assert (
        "HMAC secret set" in admin_client.get("/admin/webhooks/webhookendpoint/").content.decode()
    )
    deliveries = admin_client.get("/admin/webhooks/delivery/")
    assert deliveries.status_code == 200
    assert "seen-in-admin" in deliveries.content.decode()
    assert admin_client.get("/admin/webhooks/delivery/add/").status_code == 403


def test_webhook_secret_command_shows_once_and_rotates(client, hooked: Hooked, settings):
    settings.RCUBENCH_PUBLIC_URL = "https://rcubench.example.org"
    WebhookEndpoint.objects.all().delete()
    out = io.StringIO()
    call_command("webhook_secret", hooked.tree.name, stdout=out)
    text = out.getvalue()
    endpoint = WebhookEndpoint.objects.get(tree=hooked.tree)
    assert endpoint.hmac_secret in text
    token = text.split("GitLab secret token:")[1].split()[0]
    assert hashlib.sha256(token.encode()).hexdigest() == endpoint.gitlab_token_hash
    for source in ("github", "gitlab", "git"):
        assert f"https://rcubench.example.org/hooks/{source}/{hooked.tree.name}/" in text

    with pytest.raises(CommandError, match="--rotate"):
        call_command("webhook_secret", hooked.tree.name, stdout=io.StringIO())
    old = endpoint.hmac_secret
    call_command("webhook_secret", hooked.tree.name, "--rotate", stdout=io.StringIO())
    endpoint.refresh_from_db()
    assert endpoint.hmac_secret != old
    assert endpoint.rotated_at is not None

    body = github_push(before=OLD, after=NEW)
    mac = "sha256=" + hmac.new(old.encode(), body, hashlib.sha256).hexdigest()
    r = client.post(
        f"/hooks/github/{hooked.tree.name}/",
        data=body,
        content_type="application/json",
        HTTP_X_GITHUB_EVENT="push",
        HTTP_X_GITHUB_DELIVERY="x",
        HTTP_X_HUB_SIGNATURE_256=mac,
    )
    assert r.status_code == 403  # the old secret stopped working

    with pytest.raises(CommandError, match="no tree"):
        call_command("webhook_secret", "no-such-tree", stdout=io.StringIO())
