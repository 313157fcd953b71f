"""The local PostgreSQL and Redis have passwords (scripts/setup.sh: one pair per machine,
copied into each checkout's .env): whatever reaches them takes the URL, password included,
from the environment or .env, and the code holds none."""

import re
import subprocess
from pathlib import Path

import pytest

from conftest import broker_url_for_tests
from perf import _local

ROOT = Path(__file__).resolve().parents[1]


def test_the_tests_broker_is_database_15_of_the_services_with_its_password():
    assert broker_url_for_tests(None, "redis://:pw-1@127.0.0.1:6379/0") == (
        "redis://:pw-1@127.0.0.1:6379/15"
    )
    assert broker_url_for_tests("redis://:x@h:1/3", "redis://:pw-1@127.0.0.1:6379/0") == (
        "redis://:x@h:1/3"
    )


def test_perf_scripts_reach_the_configured_servers_in_databases_of_their_own(tmp_path, monkeypatch):
    env_file = tmp_path / ".env"
    env_file.write_text(
        "DATABASE_URL=postgres://rcubench:pg-Pw_1@127.0.0.1:5432/rcubench\n"
        "CELERY_BROKER_URL=redis://:redis-Pw_2@127.0.0.1:6379/0\n"
    )
    monkeypatch.setenv("RCUBENCH_ENV_FILE", str(env_file))
    monkeypatch.delenv("DATABASE_URL", raising=False)  # restored afterwards
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    assert _local.database_url("rcubench_perf") == (
        "postgres://rcubench:pg-Pw_1@127.0.0.1:5432/rcubench_perf"
    )
    assert _local.broker_url(13) == "redis://:redis-Pw_2@127.0.0.1:6379/13"
    # The environment wins over the file, as in webapp/settings.py.
    monkeypatch.setenv("DATABASE_URL", "postgres://me:mine@127.0.0.1:5432/x?sslmode=disable")
    assert _local.database_url("postgres") == "postgres://me:mine@127.0.0.1:5432/postgres"


# A URL of the local services with a literal password in it: user:password@ or :password@,
# where the password is not a placeholder ({...} and $... filled in, <...> in a comment).
LITERAL = re.compile(r"(postgres(ql)?|redis)://[^/@\s\"']*:[^/@\s\"'{$<]+@(127\.0\.0\.1|localhost)")


@pytest.mark.parametrize(
    ("text", "literal"),
    [
        ("postgres://rcubench:rcubench@127.0.0.1:5432/x", True),
        ("redis://:secret@127.0.0.1:6379/0", True),
        ("postgres://rcubench@127.0.0.1:5432/rcubench", False),
        ("redis://127.0.0.1:6379/15", False),
        ("f\"postgres://{s['USER']}:{s['PASSWORD']}@127.0.0.1\"", False),
        ("redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0", False),
        ("redis://:<password>@127.0.0.1:6379/0", False),
    ],
)
def test_the_guard_tells_a_literal_password(text, literal):
    assert bool(LITERAL.search(text)) == literal


def test_no_code_holds_a_local_services_password():
    """Code, scripts and settings, not tests (a test may name the old default it refuses)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    files = listed.stdout.split()
    found = [
        f"{name}:{n}"
        for name in files
        if re.search(r"\.(py|sh|yml|yaml|cfg|toml|example)$|^Makefile$|Dockerfile", name)
        and not re.search(r"(^|/)tests?/|(^|/)test_[^/]*\.py$|(^|/)conftest\.py$", name)
        for n, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
        if LITERAL.search(line)
    ]
    assert found == []
