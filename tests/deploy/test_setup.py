"""The set-up script is idempotent: after `make test` ran it once, a second run does nothing.
It writes the local env file once, with the service URLs carrying this machine's passwords
(their making and copying: test_setup_services.py), and a password given for a Redis of
one's own."""

import grp
import os
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # tests/deploy/ -> the repository
PASSWORD = "test-Redis.pw_1"
MACHINE_SECRETS = Path("/etc/rcubench/secrets.env")


# What setup.sh writes into the env file: the settings of this process load that file into
# os.environ, and given in the environment each would override the file's (so a test's env
# file with a Redis password of its own would meet the machine's as an explicit one).
FROM_ENV_FILE = ("DATABASE_URL", "CELERY_BROKER_URL", "RCUBENCH_TEST_BROKER_URL",
                 "RCUBENCH_REDIS_PASSWORD", "RCUBENCH_DB_PASSWORD")  # fmt: skip


def _setup(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in FROM_ENV_FILE}
    return subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_setup_second_run_reports_nothing_to_do():
    result = _setup()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "setup: did" not in result.stdout, result.stdout
    assert result.stdout.strip().splitlines()[-1] == "setup: nothing to do"


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _redis(port: int, *args: str, password: str = "") -> str:
    env = {**os.environ, "REDISCLI_AUTH": password} if password else None
    result = subprocess.run(["redis-cli", "-p", str(port), *args], env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    return result.stdout.strip()


@pytest.fixture
def redis_port() -> Iterator[int]:
    """A free port for a Redis of the test's own; whatever runs there is shut down after."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield port
    for password in ("", PASSWORD):
        _redis(port, "shutdown", "nosave", password=password)


def test_setup_writes_the_env_file_once(tmp_path, redis_port):
    env_file = tmp_path / "rcubench.env"
    result = _setup(RCUBENCH_ENV_FILE=str(env_file), RCUBENCH_REDIS_PORT=str(redis_port),
                    RCUBENCH_REDIS_PASSWORD="")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    values = _env_file(env_file)
    assert len(values["DJANGO_SECRET_KEY"]) >= 50
    assert values["DJANGO_HTTPS"] == "false"
    machine = _env_file(MACHINE_SECRETS)  # made by the set-up `make test` ran first
    assert values["DATABASE_URL"] == (
        f"postgres://rcubench:{machine['RCUBENCH_DB_PASSWORD']}@127.0.0.1:5432/rcubench"
    )
    assert values["CELERY_BROKER_URL"] == f"redis://127.0.0.1:{redis_port}/0"
    assert values["RCUBENCH_TEST_BROKER_URL"] == f"redis://127.0.0.1:{redis_port}/15"
    info = env_file.stat()
    assert stat.S_IMODE(info.st_mode) == 0o640  # the secret key: owner and the web user only
    assert grp.getgrgid(info.st_gid).gr_name == "rcubench"

    again = _setup(RCUBENCH_ENV_FILE=str(env_file), RCUBENCH_REDIS_PORT=str(redis_port),
                   RCUBENCH_REDIS_PASSWORD="")  # fmt: skip
    assert again.stdout.strip().splitlines()[-1] == "setup: nothing to do", again.stdout
    assert _env_file(env_file) == values  # the key is kept, never regenerated


def test_setup_gives_redis_a_password_and_the_broker_urls_carry_it(tmp_path, redis_port):
    env_file = tmp_path / "rcubench.env"
    env_file.write_text("DJANGO_SECRET_KEY=kept-as-it-is\n")
    # A Redis already running without a password (as setup.sh started it before) gets one.
    subprocess.run(["redis-server", "--port", str(redis_port), "--daemonize", "yes",
                    "--save", "", "--appendonly", "no", "--logfile", str(tmp_path / "r.log")],
                   check=True, capture_output=True)  # fmt: skip
    for _ in range(50):
        if _redis(redis_port, "ping") == "PONG":
            break
        time.sleep(0.1)
    run = {"RCUBENCH_ENV_FILE": str(env_file), "RCUBENCH_REDIS_PORT": str(redis_port)}

    first = _setup(**run, RCUBENCH_REDIS_PASSWORD=PASSWORD)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"setup: did set the password of Redis on 127.0.0.1:{redis_port}" in first.stdout
    assert "NOAUTH" in _redis(redis_port, "ping")
    assert _redis(redis_port, "ping", password=PASSWORD) == "PONG"
    values = _env_file(env_file)
    assert values["DJANGO_SECRET_KEY"] == "kept-as-it-is"
    assert values["RCUBENCH_REDIS_PASSWORD"] == PASSWORD
    assert values["CELERY_BROKER_URL"] == f"redis://:{PASSWORD}@127.0.0.1:{redis_port}/0"
    assert values["RCUBENCH_TEST_BROKER_URL"] == f"redis://:{PASSWORD}@127.0.0.1:{redis_port}/15"

    # Later runs find the password in the env file; a restarted Redis gets it again, and
    # the process list never shows it.
    assert _setup(**run).stdout.strip().splitlines()[-1] == "setup: nothing to do"
    _redis(redis_port, "shutdown", "nosave", password=PASSWORD)
    restarted = _setup(**run)
    assert f"setup: did start Redis on 127.0.0.1:{redis_port} with a password" in restarted.stdout
    assert "NOAUTH" in _redis(redis_port, "ping")
    assert _redis(redis_port, "ping", password=PASSWORD) == "PONG"
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert PASSWORD not in ps.stdout


def test_setup_names_the_password_a_protected_redis_wants(tmp_path, redis_port):
    env_file = tmp_path / "rcubench.env"
    subprocess.run(["redis-server", "-", "--port", str(redis_port), "--daemonize", "yes",
                    "--save", "", "--appendonly", "no", "--logfile", str(tmp_path / "r.log")],
                   input=f'requirepass "{PASSWORD}"\n', check=True, capture_output=True,
                   text=True)  # fmt: skip
    result = _setup(RCUBENCH_ENV_FILE=str(env_file), RCUBENCH_REDIS_PORT=str(redis_port),
                    RCUBENCH_REDIS_PASSWORD="")  # fmt: skip
    assert result.returncode != 0
    assert "wants a password: RCUBENCH_REDIS_PASSWORD is unset or differs" in result.stderr
