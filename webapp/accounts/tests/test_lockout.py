"""The login lockout behind the TLS proxy: django-axes counts failures per (user name, client
address), the client address being the entry the trusted proxy appended to X-Forwarded-For
(RCUBENCH_NUM_PROXIES of them), never the proxy's own address nor an entry the client wrote.
So a stranger's failures lock only the stranger; the owner logs in from anywhere else."""

from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from tests.support.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

PROXY = "172.18.0.1"  # the compose bridge: the address every proxied request arrives from
ATTACKER, VICTIM = "203.0.113.66", "198.51.100.7"


@pytest.fixture(autouse=True)
def _cheap_hashes(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _login(password: str, remote: str, xff: str | None = None, name: str = "alice") -> int:
    meta: dict[str, Any] = {"REMOTE_ADDR": remote}
    if xff is not None:
        meta["HTTP_X_FORWARDED_FOR"] = xff
    response = Client().post("/accounts/login/", {"username": name, "password": password}, **meta)
    return response.status_code


def attempt_addresses() -> list[str]:
    """The addresses django-axes counted failures against."""
    attempts = apps.get_model("axes", "AccessAttempt").objects
    return list(attempts.values_list("ip_address", flat=True))


def _lock_out(settings, remote: str, xff: str | None) -> None:
    codes = [_login("wrong", remote, xff) for _ in range(settings.AXES_FAILURE_LIMIT)]
    assert codes[-1] == 429, codes  # the last failure locks the (name, address) pair


def test_behind_the_proxy_a_strangers_failures_do_not_lock_the_owner(settings):
    settings.RCUBENCH_NUM_PROXIES = 1
    UserFactory.create(username="alice")
    _lock_out(settings, PROXY, ATTACKER)
    assert _login(PASSWORD, PROXY, ATTACKER) == 429  # the stranger stays locked
    assert _login(PASSWORD, PROXY, VICTIM) == 302  # the owner, through the same proxy
    assert attempt_addresses() == [ATTACKER]  # never the proxy's


def test_an_address_the_client_wrote_is_neither_trusted_nor_a_way_out(settings):
    """Through the proxy, X-Forwarded-For is "<what the client sent>, <its real address>":
    only the last entry counts. Naming the victim's address locks nobody but the stranger,
    and rotating the forged entries does not reset the stranger's count."""
    settings.RCUBENCH_NUM_PROXIES = 1
    UserFactory.create(username="alice")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login("wrong", PROXY, f"{VICTIM}, 10.0.0.{n}, {ATTACKER}")
    assert _login(PASSWORD, PROXY, f"10.9.9.9, {ATTACKER}") == 429
    assert _login(PASSWORD, PROXY, VICTIM) == 302


def test_without_a_proxy_the_header_is_ignored(settings):
    """Served directly (no proxy configured), anyone could write X-Forwarded-For: the peer
    address is the client's, whatever the header says."""
    settings.RCUBENCH_NUM_PROXIES = 0
    UserFactory.create(username="alice")
    _lock_out(settings, ATTACKER, VICTIM)
    assert _login(PASSWORD, ATTACKER, "192.0.2.1") == 429
    assert _login(PASSWORD, VICTIM) == 302


@pytest.mark.parametrize("xff", ["not-an-address", "", " , ", "1.2.3.4.5", "x" * 5000])
def test_a_header_that_is_not_an_address_counts_against_the_proxy_hop(settings, xff):
    """A malformed last entry (a proxy misconfigured, or a client reaching gunicorn directly)
    is never stored as an address: the failure counts against the peer, no 500."""
    settings.RCUBENCH_NUM_PROXIES = 1
    UserFactory.create(username="alice")
    assert _login("wrong", PROXY, xff) == 200
    assert attempt_addresses() == [PROXY]
