"""Authentication: knox tokens (stored hashed, per user, revocable, scoped: test_tokens.py),
created from a session, sent as "Authorization: Token ..."; writes need one; a missing,
bad, revoked or expired token is a 401."""

import base64
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.support.factories import PASSWORD
from webapp.api import services

pytestmark = pytest.mark.django_db

SUBMIT = {"tree": "rcu", "base_ref": "v6.12", "head_ref": "rcu/dev"}


def _basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def test_a_write_without_credentials_is_401_and_reads_are_public(world, anon):
    response = anon.post("/api/v1/comparisons/", SUBMIT, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert anon.post(f"/api/v1/comparisons/{world.public.pk}/cancel/").status_code == 401
    assert anon.get("/api/v1/tokens/").status_code == 401
    assert anon.get("/api/v1/comparisons/").status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "Token rcb_" + "0" * 64,  # well-formed, unknown
        "Token nonsense",
        "Token ",  # no token
        "Token a b",  # spaces
        "Token " + "x" * 5000,
        "Token \u00e9\u00e9",  # not ASCII
    ],
)
def test_a_bad_token_is_401_even_on_reads(world, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    for response in (client.get("/api/v1/comparisons/"),
                     client.post("/api/v1/comparisons/", SUBMIT, format="json")):  # fmt: skip
        assert response.status_code == 401, response.content
        assert "detail" in response.json()


def test_tokens_are_stored_hashed(world):
    instance, token = services.create_token(world.alice)
    row = AuthToken.objects.get(pk=instance.pk)
    assert token.startswith("rcb_")
    assert token not in (row.digest, row.token_key)
    assert row.token_key == token[:15]
    assert len(row.digest) == 128


def test_create_a_token_from_a_session_then_use_it_then_revoke_it(world):
    session = APIClient()
    session.force_login(world.alice)
    response = session.post("/api/v1/tokens/")
    assert response.status_code == 201, response.content
    token = response.json()["token"]

    with_token = APIClient()
    with_token.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    listed = with_token.get("/api/v1/tokens/").json()["results"]
    assert [t["token_key"] for t in listed] == [token[:15]]
    assert "token" not in listed[0]  # never shown again
    assert with_token.get(f"/api/v1/comparisons/{world.restricted.pk}/").status_code == 200

    assert session.delete(f"/api/v1/tokens/{token[:15]}/").status_code == 204
    response = with_token.get(f"/api/v1/comparisons/{world.restricted.pk}/")
    assert response.status_code == 401  # revoked
    assert not AuthToken.objects.filter(user=world.alice).exists()


def test_basic_auth_is_not_accepted_anywhere(world):
    """User name and password go only through the login form (django-axes' lockout): the
    API takes a token or a session."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=_basic("alice", PASSWORD))
    assert client.post("/api/v1/tokens/").status_code == 401
    assert client.get(f"/api/v1/comparisons/{world.restricted.pk}/").status_code == 404
    assert client.post("/api/v1/comparisons/", SUBMIT, format="json").status_code == 401
    assert not AuthToken.objects.exists()


def test_create_a_token_from_a_session(world):
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(world.bob)
    response = client.post("/api/v1/tokens/")
    assert response.status_code == 201
    assert AuthToken.objects.filter(user=world.bob).count() == 1


def test_a_session_write_needs_the_csrf_token(world):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.alice)
    response = client.post("/api/v1/comparisons/", SUBMIT, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_an_expired_token_is_401(world):
    instance, token = services.create_token(world.alice)
    AuthToken.objects.filter(pk=instance.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/comparisons/").status_code == 401
    assert not AuthToken.objects.filter(pk=instance.pk).exists()


def test_a_user_may_revoke_only_their_own_tokens(world):
    theirs, _ = services.create_token(world.alice)
    bob = APIClient()
    bob.force_login(world.bob)
    response = bob.delete(f"/api/v1/tokens/{theirs.token_key}/")
    assert response.status_code == 404
    assert AuthToken.objects.filter(pk=theirs.pk).exists()


def test_the_token_limit(world, settings):
    services.create_token(world.alice)
    client = APIClient()
    client.force_login(world.alice)
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 2}
    assert client.post("/api/v1/tokens/").status_code == 201
    response = client.post("/api/v1/tokens/")
    assert response.status_code == 403
    assert "revoke one first" in response.json()["detail"]


def test_an_inactive_user_token_is_401(world, client_for):
    client = client_for(world.alice)
    world.alice.is_active = False
    world.alice.save()
    assert client.get("/api/v1/comparisons/").status_code == 401


# --- the tokens page --------------------------------------------------------------------


def test_the_tokens_page_creates_a_token_shown_once_and_revokes_it(world, client):
    assert client.get("/accounts/tokens/").status_code == 302  # log in first
    client.force_login(world.alice)
    page = client.post("/accounts/tokens/")
    assert page.status_code == 200
    assert page["Cache-Control"] == "no-store"
    token = page.context["new_token"]
    assert token.startswith("rcb_")
    assert token in page.content.decode()
    again = client.get("/accounts/tokens/").content.decode()
    assert token not in again
    assert f"<code>{token[:15]}…</code>" in again

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/v1/tokens/").status_code == 200

    response = client.post(f"/accounts/tokens/{token[:15]}/revoke/")
    assert response.status_code == 302
    assert api.get("/api/v1/tokens/").status_code == 401
    assert f"<code>{token[:15]}…</code>" not in client.get("/accounts/tokens/").content.decode()


def test_the_tokens_page_revokes_only_the_users_own(world, client):
    theirs, _ = services.create_token(world.alice)
    client.force_login(world.bob)
    client.post(f"/accounts/tokens/{theirs.token_key}/revoke/")
    assert AuthToken.objects.filter(pk=theirs.pk).exists()
    assert client.get(f"/accounts/tokens/{theirs.token_key}/revoke/").status_code == 405


def test_the_browsable_api_renders(world, client):
    client.force_login(world.alice)
    response = client.get("/api/v1/comparisons/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert b"rest_framework" in response.content  # its own static files, no CDN
    # Nothing loaded from another host. (Not `"cdn" not in` the page: its random CSRF token
    # held those three letters in one CI run.)
    loaded = re.findall(rb'<(?:script|link|img)[^>]+(?:src|href)="([^"]*)"', response.content)
    assert loaded
    assert [u for u in loaded if re.match(rb"(https?:)?//", u)] == []
