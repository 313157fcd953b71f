"""The /healthz probes against the real services, and against closed ports for the failures.

Nothing shared is stopped: failures are produced by pointing a probe at a port with nothing
listening, or a libvirt socket that does not exist.
"""

import time

import pytest
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper

from webapp.health import check_broker, check_database, check_libvirt

pytestmark = pytest.mark.django_db


def test_database_probe_ok():
    check = check_database()
    assert check.ok, check.detail
    assert check.detail.startswith("PostgreSQL ")


def test_database_probe_fails_on_closed_port(closed_port):
    wrapper = DatabaseWrapper({**connection.settings_dict, "PORT": closed_port})
    try:
        check = check_database(wrapper)
    finally:
        wrapper.close()
    assert not check.ok
    assert "OperationalError" in check.detail
    assert str(closed_port) in check.detail


def test_broker_probe_ok():
    check = check_broker()
    assert check.ok, check.detail
    assert check.detail == "broker at redis://127.0.0.1:6379/0"


def test_broker_probe_fails_fast_on_closed_port(closed_port):
    start = time.monotonic()
    check = check_broker(f"redis://127.0.0.1:{closed_port}/0", timeout=1.0)
    assert not check.ok
    assert "refused" in check.detail.lower()
    assert time.monotonic() - start < 10


def test_libvirt_probe_ok():
    check = check_libvirt()
    assert check.ok, check.detail
    assert check.detail.startswith("libvirt 9.")


def test_libvirt_probe_fails_on_missing_socket(tmp_path):
    check = check_libvirt(f"qemu+unix:///system?socket={tmp_path}/no-such-sock")
    assert not check.ok
    assert "no-such-sock" in check.detail


def test_healthz_all_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["failed"] == []
    assert set(body["checks"]) == {"database", "broker", "libvirt"}
    assert all(check["ok"] for check in body["checks"].values())


def test_healthz_503_names_the_broker_when_it_is_down(client, settings, closed_port):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port}/0"
    settings.RCUBENCH_HEALTH_TIMEOUT_SECONDS = 1.0
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["failed"]) == ("fail", ["broker"])
    assert body["checks"]["database"]["ok"]
    assert body["checks"]["libvirt"]["ok"]


def test_healthz_503_names_libvirt_when_it_is_down(client, settings, tmp_path):
    settings.LIBVIRT_URI = f"qemu+unix:///system?socket={tmp_path}/sock"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failed"] == ["libvirt"]


def test_healthz_is_get_only(client):
    assert client.post("/healthz").status_code == 405
