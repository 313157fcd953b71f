"""Fixtures shared by the whole suite, among them a real Celery worker process on the real
Redis broker, writing to the test database."""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import pools as kombu_pools


@pytest.fixture
def closed_port() -> int:
    """A localhost TCP port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return port


ROOT = Path(__file__).resolve().parent
# Tests use their own Redis database so a `make up` worker on the same machine never steals
# (and runs against the wrong database) a message a test sent.
TEST_BROKER_URL = os.environ.get("RCUBENCH_TEST_BROKER_URL", "redis://127.0.0.1:6379/15")


def _database_url(settings_dict: dict) -> str:
    user = settings_dict["USER"]
    password = settings_dict["PASSWORD"]
    auth = f"{user}:{password}@" if password else f"{user}@"
    host = settings_dict["HOST"] or "127.0.0.1"
    return f"postgres://{auth}{host}:{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path) -> Iterator[subprocess.Popen]:
    """Start `celery worker` (solo pool) against the test database; stop it afterwards."""
    from django.db import connection

    from workers.celery_app import app

    original_url = app.conf.broker_url
    _use_broker(app, TEST_BROKER_URL)
    with app.connection_for_write() as conn:  # drop leftovers of an interrupted earlier run
        app.control.purge(connection=conn)

    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(connection.settings_dict),
        "CELERY_BROKER_URL": TEST_BROKER_URL,
    }
    cmd = [
        sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
        "--pool", "solo", "--without-gossip", "--without-mingle", "--loglevel", "INFO",
        "--hostname", f"test-{uuid.uuid4().hex[:8]}@%h",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "ready." not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"celery worker did not start:\n{log.read_text()}")
            time.sleep(0.2)
        proc.log_path = log  # type: ignore[attr-defined]
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _use_broker(app, original_url)


def _use_broker(app, url: str) -> None:
    # Under the CELERY settings namespace the key is CELERY_BROKER_URL; the producer pool
    # keeps connections to the old URL, so it is dropped.
    app.conf.CELERY_BROKER_URL = url
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    # The producer pool (per app, and kombu's global one keyed by connection) still holds
    # the closed pool: drop both so the next send connects to `url`.
    app.amqp._producer_pool = None
    kombu_pools.reset()  # type: ignore[attr-defined]
    assert app.conf.broker_url == url
