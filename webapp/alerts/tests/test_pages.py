"""The subscriptions page and the unsubscribe link (a page, and RFC 8058's one-click POST)."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.factories import MembershipFactory, TreeFactory, UserFactory
from webapp.alerts import services
from webapp.alerts.models import OptOut, Subscription

pytestmark = pytest.mark.django_db


def test_unsubscribe_page_then_one_click_post_without_session_or_csrf():
    url = reverse("alerts:unsubscribe", args=[services.unsubscribe_token("Dev@Example.ORG")])
    client = Client(enforce_csrf_checks=True)
    page = client.get(url)
    assert page.status_code == 200
    assert b"Unsubscribe Dev@example.org" in page.content
    assert not OptOut.objects.exists()  # a GET (a link scanner) changes nothing
    # What a mail client sends for List-Unsubscribe-Post: List-Unsubscribe=One-Click.
    done = client.post(url, "List-Unsubscribe=One-Click",
                       content_type="application/x-www-form-urlencoded")  # fmt: skip
    assert done.status_code == 200
    assert b"gets no more rcubench alert mail" in done.content
    assert services.opted_out("dev@example.org")
    assert client.post(url).status_code == 200  # twice: still one row
    assert OptOut.objects.count() == 1


@pytest.mark.parametrize("mangle", [lambda t: t[:-2] + "xx", lambda t: "x" + t, lambda t: "abc"])
def test_a_tampered_unsubscribe_token_is_refused(mangle):
    token = mangle(services.unsubscribe_token("dev@example.org"))
    client = Client(enforce_csrf_checks=True)
    for response in (client.get(f"/alerts/unsubscribe/{token}/"),
                     client.post(f"/alerts/unsubscribe/{token}/")):  # fmt: skip
        assert response.status_code == 400
        assert b"This unsubscribe link is not valid" in response.content
    assert not OptOut.objects.exists()


def test_a_token_of_another_signer_is_refused():
    from django.core import signing

    forged = signing.Signer(salt="something else").sign_object("dev@example.org")
    assert Client().post(f"/alerts/unsubscribe/{forged}/").status_code == 400


def test_subscriptions_page_adds_and_deletes_ones_own(client):
    user = UserFactory.create(email="me@example.org")
    mine = TreeFactory.create(name="rcu", public=False)
    MembershipFactory.create(tree=mine, user=user)
    hidden = TreeFactory.create(name="secret", public=False)
    TreeFactory.create(name="public-tree")
    assert client.get("/accounts/subscriptions/").status_code == 302  # login first
    client.force_login(user)
    page = client.get("/accounts/subscriptions/").content.decode()
    assert "rcu" in page
    assert "public-tree" in page
    assert "secret" not in page  # the tree select: trees the user may see
    response = client.post("/accounts/subscriptions/", {"tree": hidden.pk,
                           "benchmark": "", "kinds": ["regression"]})  # fmt: skip
    assert response.status_code == 200  # refused: not a choice
    assert not Subscription.objects.exists()
    response = client.post("/accounts/subscriptions/", {"tree": mine.pk,
                           "benchmark": "sync-rcu-latency",
                           "kinds": ["regression", "change-point"]})  # fmt: skip
    assert response.status_code == 302
    s = Subscription.objects.get()
    assert (s.user, s.tree, s.benchmark, s.kinds) == (user, mine, "sync-rcu-latency",
                                                      ["regression", "change-point"])  # fmt: skip
    other = UserFactory.create()
    theirs = Subscription.objects.create(user=other)
    client.post(f"/accounts/subscriptions/{theirs.pk}/delete")
    assert Subscription.objects.filter(pk=theirs.pk).exists()  # not mine: untouched
    client.post(f"/accounts/subscriptions/{s.pk}/delete")
    assert not Subscription.objects.filter(pk=s.pk).exists()


def test_the_subscriptions_page_needs_csrf():
    user = UserFactory.create()
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/accounts/subscriptions/", {"kinds": ["regression"]})
    assert response.status_code == 403


def test_the_owner_sees_an_opt_out_and_may_undo_it(client):
    user = UserFactory.create(email="me@example.org")
    client.force_login(user)
    page = client.get("/accounts/subscriptions/").content.decode()
    assert 'id="mailed"' in page
    assert 'id="opted-out"' not in page
    services.opt_out("ME@example.org")
    page = client.get("/accounts/subscriptions/").content.decode()
    assert 'id="mailed"' not in page  # no longer says mail goes out
    assert "<strong>me@example.org</strong> unsubscribed from all rcubench mail on" in page
    added = client.post("/accounts/subscriptions/", {"benchmark": "", "kinds": ["regression"]},
                        follow=True).content.decode()  # fmt: skip
    assert "Subscription added, but me@example.org has unsubscribed from all rcubench mail" in added
    assert "Mail me again" in added
    assert client.get("/accounts/subscriptions/mail-again").status_code == 405  # POST only
    assert services.opted_out("me@example.org")
    again = client.post("/accounts/subscriptions/mail-again", follow=True).content.decode()
    assert "me@example.org gets rcubench mail again" in again
    assert 'id="mailed"' in again
    assert not services.opted_out("me@example.org")


def test_only_the_logged_in_owner_undoes_an_opt_out():
    services.opt_out("me@example.org")
    services.opt_out("other@example.org")
    assert Client().post("/accounts/subscriptions/mail-again").status_code == 302  # log in
    user = UserFactory.create(email="me@example.org")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/accounts/subscriptions/mail-again").status_code == 403  # no CSRF
    assert services.opted_out("me@example.org")
    someone = UserFactory.create(email="someone@example.org")
    client.force_login(someone)
    page = client.get("/accounts/subscriptions/")
    assert b"other@example.org" not in page.content
    token = page.cookies["csrftoken"].value
    client.post("/accounts/subscriptions/mail-again", HTTP_X_CSRFTOKEN=token)
    assert OptOut.objects.count() == 2  # another address's opt-out: untouched
