"""The local services' passwords (scripts/setup-lib.sh, called by scripts/setup.sh): made
once per machine into a root-only file, copied into each checkout's env file, given to the
PostgreSQL role (with pg_hba.conf asking for it) and to Redis. Each test calls the set-up
functions against services of its own, never the machine's: a throwaway PostgreSQL cluster
that trusts every local connection (as this machine's CI image does), a throwaway Redis
without a password, and a temporary secrets file."""

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.test_setup import _redis

ROOT = Path(__file__).resolve().parents[2]  # tests/deploy/ -> the repository
PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), Path("/usr/bin"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Machine:
    """A machine's secrets file and services, for the set-up functions."""

    secrets: Path
    pg_port: int = 5432
    redis_port: int = 6379

    def run(self, script: str, env_file: Path, **env: str) -> subprocess.CompletedProcess[str]:
        """`script` after sourcing scripts/setup-lib.sh, as setup.sh runs it."""
        variables = {
            "ENV_FILE": str(env_file), "PYTHON": "/usr/bin/python3",
            "RCUBENCH_MACHINE_SECRETS": str(self.secrets), "PG_ROLE": "rcubench",
            "PG_DB": "rcubench", "PG_PORT": str(self.pg_port), "REDIS_PORT": str(self.redis_port),
        }  # fmt: skip
        base = {k: v for k, v in os.environ.items() if not k.startswith("RCUBENCH_")}
        return subprocess.run(
            ["bash", "-c", f"set -euo pipefail; source scripts/setup-lib.sh; {script}"],
            cwd=ROOT, env={**base, **variables, **env}, capture_output=True, text=True,
            check=False, timeout=120,
        )  # fmt: skip

    def secret(self, key: str) -> str:
        return _values(self.secrets)[key]


def _values(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(secrets=tmp_path / "etc" / "rcubench" / "secrets.env")


def _checkout(tmp_path: Path, name: str, content: str = "") -> Path:
    env_file = tmp_path / name / ".env"
    env_file.parent.mkdir()
    env_file.write_text(content)
    return env_file


# --- the machine's secrets file and the checkouts' copies ---------------------------------

COPY = "choose_passwords; ensure_database_url; ensure_broker_urls"


def test_passwords_are_made_once_per_machine_and_every_checkout_copies_them(tmp_path, machine):
    developer = _checkout(tmp_path, "developer", "DJANGO_SECRET_KEY=kept\n")
    first = _ok(machine.run(COPY, developer))
    assert (
        f"setup: did make this machine's PostgreSQL and Redis passwords: {machine.secrets}" in first
    )
    db, redis = machine.secret("RCUBENCH_DB_PASSWORD"), machine.secret("RCUBENCH_REDIS_PASSWORD")
    assert min(len(db), len(redis)) >= 32
    assert db != redis
    info = machine.secrets.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)
    assert stat.S_IMODE(machine.secrets.parent.stat().st_mode) == 0o700
    values = _values(developer)
    assert values == {
        "DJANGO_SECRET_KEY": "kept",
        "DATABASE_URL": f"postgres://rcubench:{db}@127.0.0.1:5432/rcubench",
        "RCUBENCH_REDIS_PASSWORD": redis,
        "CELERY_BROKER_URL": f"redis://:{redis}@127.0.0.1:6379/0",
        "RCUBENCH_TEST_BROKER_URL": f"redis://:{redis}@127.0.0.1:6379/15",
    }
    before = developer.read_bytes()

    # CI's fresh clone on the same machine: the same passwords, the developer's file as it was.
    ci = _checkout(tmp_path, "ci")
    assert "setup: did make" not in _ok(machine.run(COPY, ci))
    assert _values(ci) == {k: v for k, v in values.items() if k != "DJANGO_SECRET_KEY"}
    assert developer.read_bytes() == before
    assert "setup: did" not in _ok(machine.run(COPY, developer))  # nothing left to do


def test_checkouts_set_up_at_the_same_time_agree_on_one_pair(tmp_path, machine):
    for attempt in range(5):
        machine.secrets = tmp_path / f"etc{attempt}" / "secrets.env"
        script = 'choose_passwords; echo "$PG_PASSWORD $REDIS_PASSWORD" >&2'
        procs = [subprocess.Popen(["bash", "-c", f"source scripts/setup-lib.sh; {script}"],
                                  cwd=ROOT, stderr=subprocess.PIPE, text=True, env={
                                      **{k: v for k, v in os.environ.items()
                                         if not k.startswith("RCUBENCH_")},
                                      "ENV_FILE": str(tmp_path / "none"),
                                      "PYTHON": "/usr/bin/python3",
                                      "RCUBENCH_MACHINE_SECRETS": str(machine.secrets)})
                 for _ in range(4)]  # fmt: skip
        answers = {p.communicate()[1].strip().splitlines()[-1] for p in procs}
        assert len(answers) == 1, answers
        assert answers == {f"{machine.secret('RCUBENCH_DB_PASSWORD')} "
                           f"{machine.secret('RCUBENCH_REDIS_PASSWORD')}"}  # fmt: skip


def test_a_redis_password_chosen_before_becomes_the_machines(tmp_path, machine):
    """A checkout whose env file already gave Redis a password (RCUBENCH_REDIS_PASSWORD, the
    old opt-in) seeds the machine's, so the Redis running with it keeps working for all."""
    env_file = _checkout(tmp_path, "old", "RCUBENCH_REDIS_PASSWORD=chosen-before.1\n")
    _ok(machine.run(COPY, env_file))
    assert machine.secret("RCUBENCH_REDIS_PASSWORD") == "chosen-before.1"
    fresh = _checkout(tmp_path, "fresh")
    _ok(machine.run(COPY, fresh))
    assert _values(fresh)["CELERY_BROKER_URL"] == "redis://:chosen-before.1@127.0.0.1:6379/0"


def test_a_database_password_given_must_be_the_machines(tmp_path, machine):
    env_file = _checkout(tmp_path, "a")
    _ok(machine.run("choose_passwords", env_file, RCUBENCH_DB_PASSWORD="given-1"))
    assert machine.secret("RCUBENCH_DB_PASSWORD") == "given-1"  # seeds a new machine
    refused = machine.run("choose_passwords", env_file, RCUBENCH_DB_PASSWORD="another-2")
    assert refused.returncode != 0
    assert f"RCUBENCH_DB_PASSWORD differs from this machine's ({machine.secrets})" in refused.stderr
    assert machine.secret("RCUBENCH_DB_PASSWORD") == "given-1"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # The old default, or a stale copy: the local role's URL follows the machine's
        # password, its database name kept (a developer's own database).
        ("postgres://rcubench:rcubench@127.0.0.1:5432/rcubench_ops",
         "postgres://rcubench:{db}@127.0.0.1:5432/rcubench_ops"),
        ("postgresql://rcubench@localhost:5432/rcubench", "postgres://rcubench:{db}@127.0.0.1:5432/rcubench"),
        # Another server or role is the operator's own.
        ("postgres://app:theirs@db.example.org:5432/rcubench", None),
        ("postgres://other:theirs@127.0.0.1:5432/rcubench", None),
    ],
)  # fmt: skip
def test_database_url_of_the_local_role_follows_the_machine(tmp_path, machine, before, after):
    env_file = _checkout(tmp_path, "a", f"DATABASE_URL={before}\n")
    _ok(machine.run(COPY, env_file))
    want = (after or before).format(db=machine.secret("RCUBENCH_DB_PASSWORD"))
    assert _values(env_file)["DATABASE_URL"] == want


# --- PostgreSQL ---------------------------------------------------------------------------


@dataclass
class Cluster:
    port: int
    log: Path

    def login(self, role: str, password: str | None, db: str = "rcubench") -> bool:
        """Whether `role` signs in over TCP with `password` (None: gives none)."""
        env = {**os.environ, "PGPASSFILE": "/dev/null", "PGCONNECT_TIMEOUT": "5"}
        env.pop("PGPASSWORD", None)
        if password is not None:
            env["PGPASSWORD"] = password
        result = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", role, "-d", db, "-w",
             "-qtAX", "-c", "SELECT 1"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return result.returncode == 0


def _as_postgres(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True,
                          capture_output=True, text=True)  # fmt: skip


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster on a port of its own that trusts every local
    connection, every statement logged; the role rcubench with the old default password
    'rcubench', the database rcubench, and another role that signs in with no password."""
    data = Path(tempfile.mkdtemp(prefix="rcubench-pg-"))
    shutil.chown(data, "postgres", "postgres")
    port = _free_port()
    log = data / "server.log"
    _as_postgres(str(PG_BIN / "initdb"), "-D", str(data / "db"), "-A", "trust", "--no-sync")
    opts = (f"-p {port} -k /var/run/postgresql -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c log_statement=all -c shared_buffers=16MB -c max_connections=20")  # fmt: skip
    _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-o", opts, "-l", str(log),
                 "-w", "start")  # fmt: skip
    try:
        for sql in (
            "CREATE ROLE rcubench LOGIN CREATEDB PASSWORD 'rcubench'",
            "CREATE ROLE other LOGIN",
            "CREATE DATABASE rcubench OWNER rcubench",
        ):
            _as_postgres("psql", "-p", str(port), "-v", "ON_ERROR_STOP=1", "-qc", sql)
        yield Cluster(port, log)
    finally:
        _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "-w",
                     "stop")  # fmt: skip
        shutil.rmtree(data, ignore_errors=True)


def test_postgres_asks_the_role_for_the_machines_password(tmp_path, machine, cluster):
    machine.pg_port = cluster.port
    env_file = _checkout(tmp_path, "a")
    assert cluster.login("rcubench", "anything")  # trusted: the password means nothing yet
    setup = "choose_passwords; ensure_pg_password; ensure_database_url"
    first = _ok(machine.run(setup, env_file))
    assert "setup: did make PostgreSQL ask role rcubench for its password" in first
    assert "setup: did set the password of PostgreSQL role rcubench" in first
    password = machine.secret("RCUBENCH_DB_PASSWORD")

    assert cluster.login("rcubench", password)
    assert not cluster.login("rcubench", "rcubench")  # the old default
    assert not cluster.login("rcubench", None)
    assert not cluster.login("rcubench", "anything", db="postgres")  # every database
    # Nothing else is locked out: another role over TCP, the superuser on the socket.
    assert cluster.login("other", None)
    _as_postgres("psql", "-p", str(cluster.port), "-qtAc", "SELECT 1")
    assert _values(env_file)["DATABASE_URL"] == (
        f"postgres://rcubench:{password}@127.0.0.1:{cluster.port}/rcubench"
    )
    # The password went to the server on psql's stdin, out of its statement log.
    assert "ALTER ROLE" not in cluster.log.read_text()
    assert password not in cluster.log.read_text()

    hba = _as_postgres("psql", "-p", str(cluster.port), "-qtAXc", "SHOW hba_file").stdout.strip()
    rules = Path(hba).read_text()
    assert rules.count("# BEGIN rcubench") == 1
    again = _ok(machine.run(setup, env_file))
    assert "setup: did" not in again, again
    assert Path(hba).read_text() == rules

    # The machine's password changed (by an operator, in the secrets file): set again.
    machine.secrets.write_text(machine.secrets.read_text().replace(password, "rotated-1"))
    rotated = _ok(machine.run(setup, env_file))
    assert "setup: did set the password of PostgreSQL role rcubench" in rotated
    assert cluster.login("rcubench", "rotated-1")
    assert not cluster.login("rcubench", password)
    assert Path(hba).read_text() == rules


# --- Redis --------------------------------------------------------------------------------


@pytest.fixture
def redis_port(tmp_path: Path, machine: Machine) -> Iterator[int]:
    """A throwaway Redis without a password, as setup.sh started the machine's before."""
    port = _free_port()
    subprocess.run(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--daemonize",
                    "yes", "--save", "", "--appendonly", "no", "--logfile",
                    str(tmp_path / "redis.log")], check=True, capture_output=True)  # fmt: skip
    for _ in range(50):
        if _redis(port, "ping") == "PONG":
            break
        time.sleep(0.1)
    machine.redis_port = port
    yield port
    for password in (
        "",
        *([machine.secret("RCUBENCH_REDIS_PASSWORD")] if machine.secrets.exists() else []),
    ):
        _redis(port, "shutdown", "nosave", password=password)


def test_redis_gets_the_machines_password_and_keeps_it(tmp_path, machine, redis_port):
    developer = _checkout(tmp_path, "developer")
    setup = "choose_passwords; ensure_redis; ensure_broker_urls"
    first = _ok(machine.run(setup, developer))
    assert f"setup: did set the password of Redis on 127.0.0.1:{redis_port}" in first
    password = machine.secret("RCUBENCH_REDIS_PASSWORD")
    assert "NOAUTH" in _redis(redis_port, "ping")
    assert _redis(redis_port, "ping", password=password) == "PONG"
    assert _values(developer)["CELERY_BROKER_URL"] == (
        f"redis://:{password}@127.0.0.1:{redis_port}/0"
    )

    # A fresh checkout finds Redis with the machine's password: nothing changes.
    ci = _checkout(tmp_path, "ci")
    second = _ok(machine.run(setup, ci))
    assert "password set" in second
    assert "set the password of Redis" not in second
    assert _values(ci)["RCUBENCH_TEST_BROKER_URL"] == (
        f"redis://:{password}@127.0.0.1:{redis_port}/15"
    )

    # A checkout holding another password is refused; Redis keeps the machine's.
    stale = _checkout(tmp_path, "stale", "RCUBENCH_REDIS_PASSWORD=stale-1\n")
    refused = machine.run(setup, stale)
    assert refused.returncode != 0
    assert "wants a password: RCUBENCH_REDIS_PASSWORD is unset or differs" in refused.stderr
    assert f"(this machine's is in {machine.secrets})" in refused.stderr
    assert _redis(redis_port, "ping", password=password) == "PONG"
