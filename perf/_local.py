"""The machine's PostgreSQL and Redis as this checkout reaches them, for perf scripts that
make databases of their own there: DATABASE_URL and CELERY_BROKER_URL from the environment,
else from .env (scripts/setup.sh writes them with the machine's passwords), with another
database in the path. Nothing here holds a password."""

import os
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
