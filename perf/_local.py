"""The machine's PostgreSQL and Redis as this checkout reaches them, for perf scripts that
make databases of their own there: DATABASE_URL and CELERY_BROKER_URL from the environment,
else from .env (scripts/setup.sh writes them with the machine's passwords), with another
database in the path. Nothing here holds a password."""

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import environ

ROOT = Path(__file__).resolve().parents[1]


def _configured(name: str, default: str) -> str:
    # As webapp/settings.py reads them (the environment wins over the file), and with its
    # defaults.
    environ.Env.read_env(os.environ.get("RCUBENCH_ENV_FILE", ROOT / ".env"))
    return os.environ.get(name) or default


def database_url(name: str) -> str:
    """The configured PostgreSQL server and role, database `name`."""
    url = _configured("DATABASE_URL", "postgres://rcubench@127.0.0.1:5432/rcubench")
    return urlsplit(url)._replace(path=f"/{name}", query="").geturl()


def broker_url(db: int) -> str:
    """The configured Redis (with its password), database `db`."""
    url = _configured("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    return urlsplit(url)._replace(path=f"/{db}", query="").geturl()


def use_own_services(db_name: str, broker_db: int) -> None:
    """Point this process (and the workers it starts) at database `db_name` and Redis
    database `broker_db` of the machine's servers: set before Django is."""
    os.environ["CELERY_BROKER_URL"] = broker_url(broker_db)
    os.environ["DATABASE_URL"] = database_url(db_name)


def start_celery_worker(
    args: list[str], log: Path, env: dict[str, str] | None = None, timeout: float = 60.0
) -> "subprocess.Popen[bytes]":
    """`celery -A workers.celery_app worker <args>`, its output in `log`, returned once it
    says it is ready; exits with the log's tail if it dies or is not ready in `timeout`."""
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", *args]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env or dict(os.environ), stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + timeout
    while "ready." not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the worker did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return proc
