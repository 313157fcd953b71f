"""API tokens are scoped and managed from a logged-in session only (review 2026-11-26 #7):
a stolen token can neither mint a spare nor revoke the owner's tokens; a read-only token
reads but may not submit or cancel (403 naming the scope); "revoke all" ends every token
at once."""

import base64
import importlib

import pytest
from django.apps import apps as django_apps
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.support.factories import PASSWORD
from webapp.accounts.models import TokenGrant
from webapp.api import services
from webapp.comparisons.models import Comparison

pytestmark = pytest.mark.django_db

SUBMIT = {"tree": "rcu", "base_ref": "v6.12", "head_ref": "rcu/dev"}


def _token_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def test_a_token_cannot_mint_or_revoke_tokens(world):
    """The review's reproduction: token A alone created token B (201), which outlived the
    owner's revocation of A. Now every token-management request with a token is a 403."""
    _, stolen = services.create_token(world.alice, scopes=["read", "submit"])
    owners, _ = services.create_token(world.alice, scopes=["read"])
    thief = _token_client(stolen)
    response = thief.post("/api/v1/tokens/")
    assert response.status_code == 403, response.content
    assert "logged-in session" in response.json()["detail"]
    assert thief.delete(f"/api/v1/tokens/{owners.token_key}/").status_code == 403
    assert thief.delete("/api/v1/tokens/").status_code == 403
    assert AuthToken.objects.filter(user=world.alice).count() == 2  # nothing made or ended
    assert thief.get("/api/v1/tokens/").status_code == 200  # listing is reading


def test_a_password_is_no_way_to_manage_tokens_either(world):
    """HTTP Basic (user name and password) is not accepted: a script gets its token from
    the page (or a session), so the API is no password-guessing endpoint."""
    client = APIClient()
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {basic}")
    assert client.post("/api/v1/tokens/").status_code == 401
    assert not AuthToken.objects.exists()


@pytest.mark.parametrize(
    ("body", "scopes"),
    [({}, ["read"]), ({"scopes": ["read"]}, ["read"]), ({"scopes": ["submit"]}, ["read", "submit"]),
     ({"scopes": ["read", "submit"]}, ["read", "submit"])],
)  # fmt: skip
def test_a_session_creates_a_token_with_its_scopes(world, body, scopes):
    response = _session(world.alice).post("/api/v1/tokens/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["scopes"] == scopes
    row = AuthToken.objects.get(user=world.alice)
    assert TokenGrant.objects.get(token=row).scopes == scopes
    listed = _token_client(response.json()["token"]).get("/api/v1/tokens/").json()["results"]
    assert listed[0]["scopes"] == scopes


@pytest.mark.parametrize("scopes", [["admin"], ["read", "write"], "read", [""], [None]])
def test_an_unknown_scope_is_a_400_naming_it_and_stores_nothing(world, scopes):
    response = _session(world.alice).post("/api/v1/tokens/", {"scopes": scopes}, format="json")
    assert response.status_code == 400, response.content
    assert "scopes" in response.json()
    assert not AuthToken.objects.exists()


def test_a_read_token_reads_but_may_not_submit_or_cancel(world, client_for):
    reader = client_for(world.alice, scopes=["read"])
    assert reader.get(f"/api/v1/comparisons/{world.restricted.pk}/").status_code == 200
    before = Comparison.objects.count()
    response = reader.post("/api/v1/comparisons/", SUBMIT, format="json")
    assert response.status_code == 403, response.content
    assert "'submit' scope" in response.json()["detail"]
    assert Comparison.objects.count() == before
    response = reader.post(f"/api/v1/comparisons/{world.public.pk}/cancel/")
    assert response.status_code == 403
    assert "'submit' scope" in response.json()["detail"]
    world.public.refresh_from_db()
    assert world.public.state != "cancelled"
    # The same account with a submit token may.
    writer = client_for(world.alice, scopes=["read", "submit"])
    assert writer.post(f"/api/v1/comparisons/{world.public.pk}/cancel/").status_code == 200


def test_a_token_without_a_grant_row_is_read_only(world):
    """A token made outside rcubench's service (knox's own manager, the admin) has no
    scopes row: it may read, never write."""
    _, token = AuthToken.objects.create(user=world.alice, prefix="rcb_")
    client = _token_client(token)
    assert client.get(f"/api/v1/comparisons/{world.restricted.pk}/").status_code == 200
    assert client.post("/api/v1/comparisons/", SUBMIT, format="json").status_code == 403


def test_revoke_all_from_a_session(world, client_for):
    tokens = [client_for(world.alice) for _ in range(3)]
    kept = client_for(world.bob)
    response = _session(world.alice).delete("/api/v1/tokens/")
    assert response.status_code == 200, response.content
    assert response.json() == {"revoked": 3}
    assert {t.get("/api/v1/tokens/").status_code for t in tokens} == {401}
    assert kept.get("/api/v1/tokens/").status_code == 200  # another account's
    assert _session(world.alice).delete("/api/v1/tokens/").json() == {"revoked": 0}


def test_revoke_one_from_a_session(world, client_for):
    client = client_for(world.alice)
    key = AuthToken.objects.get(user=world.alice).token_key
    assert _session(world.alice).delete(f"/api/v1/tokens/{key}/").status_code == 204
    assert client.get("/api/v1/tokens/").status_code == 401
    assert _session(world.alice).delete(f"/api/v1/tokens/{key}/").status_code == 404


# --- the tokens page --------------------------------------------------------------------


def test_the_page_creates_a_scoped_token_and_revokes_all(world, client):
    client.force_login(world.alice)
    read = client.post("/accounts/tokens/").context["new_token"]
    submit = client.post("/accounts/tokens/", {"submit": "on"}).context["new_token"]
    page = client.get("/accounts/tokens/").content.decode()
    assert "read, submit" in page
    assert (
        _token_client(read).post("/api/v1/comparisons/", SUBMIT, format="json").status_code == 403
    )
    response = client.post("/accounts/tokens/revoke-all/")
    assert response.status_code == 302
    assert "2 tokens revoked" in client.get("/accounts/tokens/").content.decode()
    assert {_token_client(t).get("/api/v1/tokens/").status_code for t in (read, submit)} == {401}
    assert client.get("/accounts/tokens/revoke-all/").status_code == 405


def test_tokens_issued_before_scopes_keep_read_and_submit(world):
    """The data migration (accounts 0002): a token without a grant row, as every token was
    before scopes, gets read and submit, so a CLI already set up keeps submitting."""
    migration = importlib.import_module("webapp.accounts.migrations.0002_grant_issued_tokens")
    old, token = AuthToken.objects.create(user=world.alice, prefix="rcb_")
    scoped, _ = services.create_token(world.alice, ["read"])
    migration.grant_issued(django_apps, None)
    assert TokenGrant.objects.get(token=old).scopes == ["read", "submit"]
    assert TokenGrant.objects.get(token=scoped).scopes == ["read"]  # untouched
    cancel = _token_client(token).post(f"/api/v1/comparisons/{world.public.pk}/cancel/")
    assert cancel.status_code == 200, cancel.content
