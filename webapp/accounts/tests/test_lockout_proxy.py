"""The login lockout through a real reverse proxy (nginx) in front of a real gunicorn, as the
TLS proxy of the deployment docs is: gunicorn sees every client arrive from the proxy's
address. A stranger's failed logins lock out the stranger, not the account; a forged
X-Forwarded-For neither frames another client nor lets the stranger out. System: it spawns
gunicorn and nginx (the `nginx_proxy` fixture); test_lockout.py proves the same rule through
Django's test client."""

import pytest
from django.db import connection

from conftest import TEST_BROKER_URL
from tests.support.factories import PASSWORD, UserFactory
from webapp.accounts.tests.proxy import PROXY_HOP, Browser, behind_nginx
from webapp.accounts.tests.test_lockout import attempt_addresses

ATTACKER, VICTIM = "127.0.0.66", "127.0.0.7"


@pytest.fixture
def nginx_proxy(transactional_db, tmp_path):
    """nginx's port in front of gunicorn serving the test database, with one trusted proxy."""
    s = connection.settings_dict
    database = (f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:"
                f"{s['PORT'] or 5432}/{s['NAME']}")  # fmt: skip
    broker = TEST_BROKER_URL
    env = {"DATABASE_URL": database, "DJANGO_HTTPS": "false", "DJANGO_DEBUG": "false",
           "CELERY_BROKER_URL": broker, "RCUBENCH_API_CACHE_URL": broker,
           "RCUBENCH_NUM_PROXIES": "1", "AXES_FAILURE_LIMIT": "5",
           "RCUBENCH_LOG_FILE": str(tmp_path / "web.log")}  # fmt: skip
    with behind_nginx(env, tmp_path) as port:
        yield port


def test_behind_nginx_a_strangers_failures_lock_out_only_the_stranger(nginx_proxy):
    UserFactory.create(username="alice", password=PASSWORD)
    attacker, victim = Browser(ATTACKER, nginx_proxy), Browser(VICTIM, nginx_proxy)
    # The stranger names the victim's address in a header of its own: nginx appends the
    # stranger's real one after it, and that is the one counted.
    codes = [attacker.login("alice", "wrong", forged_xff=VICTIM) for _ in range(5)]
    assert codes == [200, 200, 200, 200, 429]
    assert attacker.login("alice", PASSWORD) == 429
    assert attacker.login("alice", PASSWORD, forged_xff="127.0.0.55") == 429
    assert victim.login("alice", PASSWORD) == 302  # the owner, through the same proxy
    # Recorded against the stranger's address, never the proxy's or a forged one.
    assert attempt_addresses() == [ATTACKER]
    assert PROXY_HOP not in attempt_addresses()
