"""Deployment files and defaults: docker-compose.yml validates, serves every queue and has
no default password; Ansible parses; the production settings pass `check --deploy`; `make up`
runs gunicorn unprivileged."""

import email
import json
import os
import pwd
import re
import secrets
import shutil
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from webapp.routing import all_queues

ROOT = Path(__file__).resolve().parents[2]  # tests/deploy/ -> the repository
VENV_BIN = Path(sys.executable).parent
DEFAULT_TARGETS = ["qemu-x86_64", "qemu-ppc64le"]
# What an operator's .env must provide to docker-compose.yml.
COMPOSE_SECRETS = {
    "POSTGRES_PASSWORD": "pg-Secret1",
    "REDIS_PASSWORD": "redisSecret2",
    "DJANGO_SECRET_KEY": "k" * 60,
}


def _compose(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "docker-compose"), *args],
        cwd=cwd,
        env={**os.environ, **COMPOSE_SECRETS} if env is None else env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_compose_file_validates():
    result = _compose("config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_compose_validation_rejects_a_broken_file(tmp_path):
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    with (tmp_path / "docker-compose.yml").open("a") as f:
        f.write("  oops:\n    image: redis:7\n    restart: sometimes\n")
    result = _compose("config", "--quiet", cwd=tmp_path)
    assert result.returncode != 0
    assert "restart" in result.stderr


@pytest.fixture(scope="module")
def compose_config() -> dict:
    result = _compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_has_the_designed_services(compose_config):
    assert {"postgres", "redis", "web", "beat"} <= set(compose_config["services"])


def test_every_queue_has_a_compose_worker(compose_config):
    served = []
    for service in compose_config["services"].values():
        command = service.get("command") or []
        if "worker" in command and "-Q" in command:
            served += command[command.index("-Q") + 1].split(",")
    assert sorted(served) == sorted(all_queues(DEFAULT_TARGETS))


@pytest.mark.parametrize("name", sorted(COMPOSE_SECRETS))
def test_compose_refuses_to_run_without_each_secret(tmp_path, name):
    """No default password or key: a missing one stops compose, naming it (the copy has no
    .env beside it)."""
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    env = {k: v for k, v in os.environ.items() if k not in COMPOSE_SECRETS}
    env.update({k: v for k, v in COMPOSE_SECRETS.items() if k != name})
    result = _compose("config", "--quiet", cwd=tmp_path, env=env)
    assert result.returncode != 0
    assert f"set {name} in .env" in result.stderr


def test_compose_uses_the_database_password_from_env(compose_config):
    services = compose_config["services"]
    password = COMPOSE_SECRETS["POSTGRES_PASSWORD"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == password
    assert f":{password}@postgres:" in services["web"]["environment"]["DATABASE_URL"]
    uses = re.findall(r"\$\{POSTGRES_PASSWORD(..)", (ROOT / "docker-compose.yml").read_text())
    assert uses
    assert set(uses) == {":?"}  # required everywhere, never a default


def test_compose_redis_requires_the_password_every_service_uses(compose_config):
    services = compose_config["services"]
    password = COMPOSE_SECRETS["REDIS_PASSWORD"]
    redis = services["redis"]
    assert redis["command"][redis["command"].index("--requirepass") + 1] == password
    assert "PONG" in " ".join(redis["healthcheck"]["test"])  # redis-cli exits 0 on NOAUTH
    app_services = {n: s for n, s in services.items() if s.get("image") == "rcubench:latest"}
    assert {"web", "beat", "migrate", "worker-build"} <= set(app_services)
    for name, service in app_services.items():
        url = service["environment"]["CELERY_BROKER_URL"]
        assert url == f"redis://:{password}@redis:6379/0", name
        assert service["environment"]["DJANGO_SECRET_KEY"] == COMPOSE_SECRETS["DJANGO_SECRET_KEY"]


def test_compose_publishes_the_web_port_on_localhost_only(compose_config):
    for name, service in compose_config["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", (name, port)
    assert compose_config["services"]["web"]["ports"]


def test_compose_workers_share_the_data_dir_with_the_host_at_the_same_path(compose_config):
    """The bench workers hand the host's libvirtd paths under the data dir (kernel,
    initramfs, console log): it is a writable bind mount at the host's own path, and the
    path every process stores in the database."""
    services = compose_config["services"]
    data = "/var/lib/rcubench-compose"
    for name in ("worker-control", "worker-build", *(f"worker-bench-{t}" for t in DEFAULT_TARGETS)):
        mounts = {m["target"]: m for m in services[name]["volumes"]}
        assert mounts[data]["type"] == "bind", name
        assert mounts[data]["source"] == data, name
        assert not mounts[data].get("read_only"), name
    for name, service in services.items():
        if service.get("image") == "rcubench:latest":
            assert service["environment"]["RCUBENCH_DATA_DIR"] == data, name


def test_compose_bench_workers_reach_the_host_libvirt(compose_config):
    for target in DEFAULT_TARGETS:
        service = compose_config["services"][f"worker-bench-{target}"]
        assert service["user"] == "root"  # libvirt's read-write socket is root's
        assert service["pid"] == "host"  # the run's QEMU in /proc (host load)
        sockets = [m for m in service["volumes"] if m["target"] == "/var/run/libvirt"]
        assert [m["source"] for m in sockets] == ["/var/run/libvirt"]


def test_official_images_stay_the_default_and_the_override_names_local_ones():
    default = _compose("config", "--format", "json")
    local = _compose("-f", "docker-compose.yml", "-f", "docker-compose.local-images.yml",
                     "config", "--format", "json")  # fmt: skip
    assert default.returncode == 0, default.stderr
    assert local.returncode == 0, local.stderr
    official, built = json.loads(default.stdout)["services"], json.loads(local.stdout)["services"]
    assert (official["postgres"]["image"], official["redis"]["image"]) == ("postgres:15", "redis:7")
    assert "ARG BASE_IMAGE=debian:12-slim" in (ROOT / "Dockerfile").read_text()
    assert "args" not in official["web"]["build"]
    assert built["postgres"]["image"] == "rcubench-compose/postgres:15"
    assert built["redis"]["image"] == "rcubench-compose/redis:7"
    for name, service in built.items():
        if "build" in service:
            assert service["build"]["args"] == {"BASE_IMAGE": "rcubench-compose/debian:12"}, name


# --- Settings: the secret key, `check --deploy` ------------------------------------------


def _production_env(**extra: str) -> dict[str, str]:
    """This process's environment without any Django setting and without the local .env
    (pytest's settings loaded it into os.environ), as a production host would have it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return {**env, "RCUBENCH_ENV_FILE": os.devnull, **extra}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


@pytest.mark.parametrize("value", [None, ""])
def test_settings_refuse_to_start_without_a_secret_key(value):
    env = _production_env() if value is None else _production_env(DJANGO_SECRET_KEY=value)
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in result.stderr


def test_debug_starts_without_a_secret_key():
    result = _manage("check", env=_production_env(DJANGO_DEBUG="true"))
    assert result.returncode == 0, result.stderr


def test_production_settings_pass_check_deploy():
    env = _production_env(DJANGO_SECRET_KEY=secrets.token_urlsafe(50))
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues (0 silenced)" in result.stdout


def test_local_plain_http_is_a_choice_check_deploy_flags():
    """DJANGO_HTTPS=false (the local .env of `make up` and the tests) turns the HTTPS-only
    settings off, and `check --deploy` says so."""
    env = _production_env(DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_HTTPS="false")
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode != 0
    for warning in ("W004", "W008", "W012", "W016"):
        assert f"security.{warning}" in result.stderr


def test_image_build_steps_run_without_an_env_file(tmp_path):
    """The Dockerfile's manage.py steps run at build time, with no .env and no secrets."""
    steps = [line.removeprefix("RUN ").strip() for line in (ROOT / "Dockerfile").read_text()
             .splitlines() if line.startswith("RUN ") and "manage.py" in line]  # fmt: skip
    assert steps
    env = _production_env(PATH=f"{VENV_BIN}:/usr/bin:/bin", STATIC_ROOT=str(tmp_path / "static"))
    for step in steps:
        result = subprocess.run(["sh", "-c", step], cwd=ROOT, env=env, capture_output=True,
                                text=True, check=False)  # fmt: skip
        assert result.returncode == 0, step + "\n" + result.stderr


# --- `make up`: gunicorn runs unprivileged ------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def service_env(transactional_db) -> Iterator[dict[str, str]]:
    """scripts/service.sh's environment: its own var dir and port, and the test database
    (the web user must reach the var dir: not under pytest's private tmp dir)."""
    from django.db import connection

    db = connection.settings_dict
    var = Path(tempfile.mkdtemp(prefix="rcubench-test-service-", dir="/var/tmp"))
    var.chmod(0o755)
    env = {
        **os.environ,
        "RCUBENCH_VAR_DIR": str(var),
        "RCUBENCH_BIND": f"127.0.0.1:{_free_port()}",
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}"
        f":{db['PORT'] or 5432}/{db['NAME']}",
    }
    try:
        yield env
    finally:
        subprocess.run(["bash", "scripts/service.sh", "down", "web"], cwd=ROOT, env=env,
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(var, ignore_errors=True)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True, check=False).stdout  # fmt: skip
    return [int(p) for p in out.split()]


def test_make_up_runs_gunicorn_as_an_unprivileged_user(service_env):
    up = subprocess.run(["bash", "scripts/service.sh", "up", "web"], cwd=ROOT, env=service_env,
                        capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    master = int((Path(service_env["RCUBENCH_VAR_DIR"]) / "run/web/web.pid").read_text())
    deadline = time.monotonic() + 30
    while len(workers := _children(master)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(workers) == 2
    expected = os.getuid() if os.getuid() != 0 else pwd.getpwnam("rcubench").pw_uid
    for pid in (master, *workers):
        uid = os.stat(f"/proc/{pid}").st_uid
        assert uid != 0, f"gunicorn pid {pid} runs as root"
        assert uid == expected
    # It reads the settings (.env) and reaches the database, the broker and libvirt.
    url = f"http://{service_env['RCUBENCH_BIND']}/healthz"
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310  (a local URL)
        body = json.load(response)
    assert body["status"] == "ok", body

    down = subprocess.run(["bash", "scripts/service.sh", "down", "web"], cwd=ROOT,
                          env=service_env, capture_output=True, text=True, check=False)  # fmt: skip
    assert "web: stopped" in down.stdout, down.stdout + down.stderr


def _connected(client: type[smtplib.SMTP], port: int, seconds: float, what: str) -> smtplib.SMTP:
    """A client connected to 127.0.0.1:`port`, once the process started there listens."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return client("127.0.0.1", port, timeout=5)
        except OSError:
            assert time.monotonic() < deadline, what
            time.sleep(0.2)


def test_make_up_starts_a_local_mail_sink_that_keeps_each_message(service_env):
    """`make up` runs aiosmtpd where alerts go to this machine: a message sent to it is a
    file under var/mail/new/, as sent (what `make demo` tells a developer to read)."""
    port = _free_port()
    env = {**service_env, "EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(port)}
    try:
        up = subprocess.run(["bash", "scripts/service.sh", "up", "mail"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        with _connected(smtplib.SMTP, port, 30, "the mail sink does not listen") as smtp:
            raw = b"Subject: [rcubench] test\r\nMessage-ID: <t@x>\r\n\r\nbody\r\n"
            smtp.sendmail("rcubench@localhost", ["dev@example.org"], raw)
        (kept,) = (Path(service_env["RCUBENCH_VAR_DIR"]) / "mail" / "new").iterdir()
        message = email.message_from_bytes(kept.read_bytes())
        assert (message["Subject"], message["Message-ID"]) == ("[rcubench] test", "<t@x>")
    finally:
        down = subprocess.run(["bash", "scripts/service.sh", "down", "mail"], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
    assert "mail: stopped" in down.stdout, down.stdout + down.stderr


def test_make_up_starts_the_mail_command_listener(service_env):
    """`make up` runs the LMTP listener (manage.py mail_listener) the MTA hands replies to:
    a real captured reply delivered to it is stored once, however often it is delivered."""
    # Django is set up by the fixture (transactional_db), not when this module loads.
    from webapp.alerts.models import InboundMail

    port = _free_port()
    env = {**service_env, "RCUBENCH_INBOUND_LMTP": f"127.0.0.1:{port}"}
    raw = (ROOT / "webapp/alerts/tests/fixtures/inbound/ack.eml").read_bytes()
    try:
        up = subprocess.run(["bash", "scripts/service.sh", "up", "inbound"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        assert up.returncode == 0, up.stdout + up.stderr
        with _connected(smtplib.LMTP, port, 60, "the listener does not listen") as lmtp:
            for _ in range(2):  # the MTA's retry after a lost answer
                assert lmtp.sendmail("jane@example.org", ["bench@localhost"], raw) == {}
        [row] = InboundMail.objects.all()
        assert (row.message_id, bytes(row.raw)) == ("<awoxT2vmeMnx396B@dev.example.org>", raw)
    finally:
        down = subprocess.run(["bash", "scripts/service.sh", "down", "inbound"], cwd=ROOT,
                              env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert "inbound: stopped" in down.stdout, down.stdout + down.stderr


def test_ansible_worker_playbook_parses():
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "--syntax-check", "playbooks/worker.yml"],
        cwd=ROOT / "ansible",
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
