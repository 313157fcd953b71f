"""Reachability of the components rcubench needs: database, broker, libvirt.

/healthz is anonymous and unthrottled, and each probe opens a connection (broker and
libvirt with a timeout of seconds), so `cached_checks` answers from one probe per
RCUBENCH_HEALTH_CACHE_SECONDS per process: a flood of requests costs the broker and
libvirt nothing more than one prober would.
"""

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from kombu import Connection
from kombu.utils.url import maybe_sanitize_url

from engine.vm.connection import describe as describe_libvirt


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str  # versions, addresses, error texts: for staff only (webapp/views.py)
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _timed(probe: Callable[[], str]) -> Check:
    start = time.monotonic()
    try:
        detail = probe()
    except Exception as exc:  # noqa: BLE001  (any failure is the answer of a health probe)
        return Check(False, f"{type(exc).__name__}: {exc}".strip(), time.monotonic() - start)
    return Check(True, detail, time.monotonic() - start)


def check_database(connection: BaseDatabaseWrapper | None = None) -> Check:
    conn = connection if connection is not None else connections["default"]

    def probe() -> str:
        with conn.cursor() as cursor:
            cursor.execute("SELECT version()")
            row = cursor.fetchone()
        return str(row[0]).split(" on ")[0] if row else "connected"

    return _timed(probe)


def check_broker(url: str | None = None, timeout: float | None = None) -> Check:
    url = url or settings.CELERY_BROKER_URL
    timeout = timeout if timeout is not None else settings.RCUBENCH_HEALTH_TIMEOUT_SECONDS

    def probe() -> str:
        with Connection(url, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1)
            return f"broker at {maybe_sanitize_url(url)}"

    return _timed(probe)


def check_libvirt(uri: str | None = None) -> Check:
    return _timed(lambda: describe_libvirt(uri or settings.LIBVIRT_URI))


def run_checks() -> dict[str, Check]:
    return {
        "database": check_database(),
        "broker": check_broker(),
        "libvirt": check_libvirt(),
    }


_cache_lock = threading.Lock()
_cached: tuple[tuple[object, ...], float, dict[str, Check]] | None = None


def _cache_key() -> tuple[object, ...]:
    # What the probes depend on: a changed setting (tests override them) is a new probe.
    db = connections["default"].settings_dict
    return (settings.CELERY_BROKER_URL, settings.LIBVIRT_URI,
            settings.RCUBENCH_HEALTH_TIMEOUT_SECONDS, db.get("HOST"), db.get("PORT"),
            db.get("NAME"))  # fmt: skip


def cached_checks() -> dict[str, Check]:
    """run_checks, at most once per RCUBENCH_HEALTH_CACHE_SECONDS in this process; requests
    that come while a probe runs wait for its answer instead of probing again."""
    global _cached
    key = _cache_key()
    with _cache_lock:
        fresh = settings.RCUBENCH_HEALTH_CACHE_SECONDS
        if _cached is not None and _cached[0] == key and time.monotonic() - _cached[1] < fresh:
            return _cached[2]
        checks = run_checks()
        _cached = (key, time.monotonic(), checks)
        return checks


def forget() -> None:
    """Drop the cached answer (tests; the next request probes)."""
    global _cached
    with _cache_lock:
        _cached = None
