"""A password change ends every API token of the account (review 2026-11-26 #7): whoever
holds a stolen token loses it when the owner changes the password, through the password
change page, the admin's "change password" form, `manage.py changepassword` or any other
set_password. Saves that do not change the password (last login, a new e-mail, the hash
upgrade Django does at login) keep the tokens."""

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.core.management import call_command
from knox.models import AuthToken

from tests.support.factories import PASSWORD, UserFactory
from webapp.accounts import tokens

pytestmark = pytest.mark.django_db
NEW = "a new and long enough passphrase 42"


@pytest.fixture(autouse=True)
def _cheap_hashes(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice() -> User:
    user = UserFactory.create(username="alice")
    tokens.create_token(user, scopes=["read", "submit"])
    tokens.create_token(user, scopes=["read"])
    UserFactory.create(username="bob")
    tokens.create_token(User.objects.get(username="bob"), scopes=["read"])
    return user


def _left(user: User) -> int:
    return AuthToken.objects.filter(user=user).count()


def test_the_password_change_page_ends_the_tokens(alice, client):
    client.force_login(alice)
    response = client.post("/accounts/password/", {
        "old_password": PASSWORD, "new_password1": NEW, "new_password2": NEW,
    })  # fmt: skip
    assert response.status_code == 302, response.content
    assert _left(alice) == 0
    assert AuthToken.objects.filter(user__username="bob").count() == 1


def test_a_refused_password_change_keeps_them(alice, client):
    client.force_login(alice)
    response = client.post("/accounts/password/", {
        "old_password": "wrong", "new_password1": NEW, "new_password2": NEW,
    })  # fmt: skip
    assert response.status_code == 200
    assert _left(alice) == 2


def test_the_admins_password_form_ends_the_tokens(alice, client):
    staff = UserFactory.create(username="root", is_staff=True, is_superuser=True)
    client.force_login(staff)
    response = client.post(f"/admin/auth/user/{alice.pk}/password/", {
        "password1": NEW, "password2": NEW, "usable_password": "true",
    })  # fmt: skip
    assert response.status_code == 302, response.content
    assert _left(alice) == 0


def test_changepassword_and_set_password_end_them(alice, monkeypatch):
    monkeypatch.setattr("getpass.getpass", lambda prompt="": NEW)
    call_command("changepassword", "alice")
    assert _left(alice) == 0
    tokens.create_token(alice, scopes=["read"])
    alice.refresh_from_db()
    alice.set_unusable_password()
    alice.save()
    assert _left(alice) == 0


def test_saves_that_keep_the_password_keep_the_tokens(alice, client, settings):
    alice.email = "alice@example.org"
    alice.save()
    client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})  # last_login
    assert _left(alice) == 2
    # A hash upgrade at login (a new default hasher) is not a password change.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
    User.objects.filter(pk=alice.pk).update(password=make_password(PASSWORD, hasher="md5"))
    response = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    assert User.objects.get(pk=alice.pk).password.startswith("pbkdf2_sha256$")  # upgraded
    assert _left(alice) == 2
