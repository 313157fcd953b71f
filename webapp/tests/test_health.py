"""The /healthz probes against the real services, and against closed ports for the failures.

Nothing shared is stopped: failures are produced by pointing a probe at a port with nothing
listening, or a libvirt socket that does not exist.
"""

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper
from kombu.utils.url import maybe_sanitize_url

from webapp import health
from webapp.health import check_broker, check_database, check_libvirt

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    """Each test probes anew (the answer is cached per process for a few seconds)."""
    health.forget()
    yield
    health.forget()


class CountingListener:
    """A real listening socket that counts the connections made to it and hangs up on
    each: what a broker or libvirtd would see of /healthz's probes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.accepted = sock, 0
        sock.listen(64)
        sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


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
    assert check.detail == f"broker at {maybe_sanitize_url(django_settings.CELERY_BROKER_URL)}"


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


# What anyone may see: reachability per component, nothing naming software or hosts.
LEAKS = ("PostgreSQL", "libvirt ", "redis://", "127.0.0.1", "detail", "seconds", "Error")


@pytest.fixture
def user_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("dev", password="x" * 12))
    return client


@pytest.mark.parametrize("who", ["anonymous", "non-staff"])
def test_healthz_shows_others_reachability_only(who, client, user_client):
    response = (client if who == "anonymous" else user_client).get("/healthz")
    assert response.status_code == 200
    assert response.json()["checks"] == {
        "database": {"ok": True}, "broker": {"ok": True}, "libvirt": {"ok": True},
    }  # fmt: skip
    assert not [leak for leak in LEAKS if leak in response.content.decode()]


def test_healthz_failure_shows_anonymous_no_error_text(client, settings, closed_port):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port}/0"
    settings.RCUBENCH_HEALTH_TIMEOUT_SECONDS = 1.0
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert (body["failed"], body["checks"]["broker"]) == (["broker"], {"ok": False})
    text = response.content.decode()
    assert str(closed_port) not in text
    assert "refused" not in text.lower()


def test_healthz_shows_staff_versions_and_errors(admin_client, settings, closed_port):
    settings.CELERY_BROKER_URL = f"redis://:secret@127.0.0.1:{closed_port}/0"
    settings.RCUBENCH_HEALTH_TIMEOUT_SECONDS = 1.0
    response = admin_client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["detail"].startswith("PostgreSQL ")
    assert checks["libvirt"]["detail"].startswith("libvirt 9.")
    assert not checks["broker"]["ok"]
    assert "refused" in checks["broker"]["detail"].lower()
    assert all(isinstance(c["seconds"], float) for c in checks.values())
    assert "secret" not in json.dumps(checks)  # staff see addresses, never passwords


def test_healthz_is_never_cached_and_varies_by_login(client):
    response = client.get("/healthz")
    assert "no-cache" in response["Cache-Control"]
    assert "Cookie" in response["Vary"]


def test_anonymous_requests_within_the_window_share_one_probe(client, settings, tmp_path):
    """The review's cheap DoS: each anonymous /healthz opened a broker and a libvirt
    connection. Within RCUBENCH_HEALTH_CACHE_SECONDS, 20 requests open what one does."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    broker = CountingListener(tcp)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "libvirt-sock"))
    libvirt = CountingListener(unix)
    try:
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{tcp.getsockname()[1]}/0"
        settings.LIBVIRT_URI = f"qemu+unix:///system?socket={tmp_path}/libvirt-sock"
        settings.RCUBENCH_HEALTH_TIMEOUT_SECONDS = 1.0
        settings.RCUBENCH_HEALTH_CACHE_SECONDS = 30.0
        first = client.get("/healthz")
        assert first.json()["failed"] == ["broker", "libvirt"]
        once = (broker.accepted, libvirt.accepted)
        assert once[0] >= 1
        assert once[1] >= 1
        for _ in range(20):
            assert client.get("/healthz").json() == first.json()
        assert (broker.accepted, libvirt.accepted) == once
        # After the window, the next request probes again.
        settings.RCUBENCH_HEALTH_CACHE_SECONDS = 0.0
        client.get("/healthz")
        assert broker.accepted > once[0]
        assert libvirt.accepted > once[1]
    finally:
        broker.close()
        libvirt.close()
