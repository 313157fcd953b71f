"""docker-compose.yml run for real (issue 20): `docker compose up` with the images built on
this host (docker-compose.local-images.yml: no registry is reachable here) reaches a healthy
/healthz on 127.0.0.1, and the demo comparison (`make demo`'s: the default tree's base
against base + demo/'s patch, sync-rcu-latency, 24 runs a side, x86_64) completes through
the containers' workers, the bench worker driving this host's libvirtd.

Everything runs under one project name (rcubench-compose-<hex>) with its own .env (random
passwords, a free web port) and data directory under /var/tmp; `docker compose down -v`,
the data directory and any domain left behind are removed at the end, also on failure. The
images stay, as a cache: the base, PostgreSQL and Redis images are rebuilt only when their
recipe changes (scripts/compose-images.sh), the app image from this working tree only from
the first layer the change reaches (Docker's layer cache).

Time (2 cores): the app image and the base kernel build dominate a first run. To keep the
kernel warm, the stack's ccache starts as a hard-linked copy of this host's
(/var/lib/rcubench/ccache, which the suite's own kernel builds fill with this very kernel:
they use every benchmark's Kconfig, as comparisons do), so the base kernel compiles from
ccache; the patched kernel then rebuilds incrementally in its slot. The default tree is a
shared clone of the host's (its objects bind-mounted read-only, nothing copied). The 24 runs
a side are the demo's own minimum: fewer would not be the demo."""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # tests/deploy/ -> the repository
HOST_DATA = Path("/var/lib/rcubench")
HOST_TREES = HOST_DATA / "trees"
HOST_CCACHE = Path(os.environ.get("RCUBENCH_CCACHE_DIR", HOST_DATA / "ccache"))
IMAGE_UID = 10001  # the image's user (Dockerfile), owner of the data directory
APP_IMAGE = "rcubench-compose/rcubench:test"
BASE_TAG = "v6.12.117-debian"
DEMO_MBOX = "demo/0001-rcu-fqs-one-more-jiffy-demo.mbox"
HEALTHY_WITHIN = 180.0  # seconds from `up` to a healthy web container
DEMO_WITHIN = 1800  # seconds: a cold base kernel (~6 min) and 48 runs (~5 min), with margin


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    for argv in (["docker", "info"], ["docker", "compose", "version"]):
        if subprocess.run(argv, capture_output=True, check=False).returncode != 0:
            return False
    return True


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="docker, debootstrap and libvirt need root"),
    pytest.mark.skipif(not _docker_ready(), reason="no dockerd or compose (scripts/setup.sh)"),
]


def _log(message: str) -> None:
    print(f"test_compose: {message}", file=sys.stderr, flush=True)


def _run(argv: list[str], timeout: float = 1800, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False,
                            timeout=timeout, **kwargs)  # fmt: skip
    assert result.returncode == 0, f"{argv}:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Stack:
    project: str
    tmp: Path
    data: Path
    port: int
    instance: str  # RCUBENCH_INSTANCE: the project's VMs are named rcubench-<instance>...
    seconds: dict[str, float] = field(default_factory=dict)

    def compose(
        self, *args: str, timeout: float = 1800, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = ["docker", "compose", "-p", self.project, "--env-file", str(self.tmp / ".env"),
                "-f", str(ROOT / "docker-compose.yml"),
                "-f", str(ROOT / "docker-compose.local-images.yml"),
                "-f", str(self.tmp / "test.yml"), *args]  # fmt: skip
        if check:
            return _run(argv, timeout=timeout, cwd=ROOT)
        return subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=timeout, cwd=ROOT)  # fmt: skip

    def manage(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """./manage.py in the control worker's container (it sees the data directory)."""
        return self.compose("exec", "-T", "worker-control", "python", "manage.py", *args,
                            timeout=timeout, check=False)  # fmt: skip


def _env_file(stack: Stack) -> str:
    return "".join(
        f"{key}={value}\n"
        for key, value in {
            "POSTGRES_PASSWORD": secrets.token_hex(16),
            "REDIS_PASSWORD": secrets.token_hex(16),
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "RCUBENCH_HTTP_PORT": stack.port,
            "RCUBENCH_COMPOSE_DATA_DIR": stack.data,
            "RCUBENCH_IMAGE": APP_IMAGE,
        }.items()
    )


def _test_override(stack: Stack) -> str:
    """What only this test adds: plain HTTP (as `make up`), its own VM names, and the host's
    trees (read-only) where the default tree's shared clone finds its objects."""
    trees = f"      - {HOST_TREES}:{HOST_TREES}:ro\n"
    env = f"""    environment:
      DJANGO_HTTPS: "false"
      RCUBENCH_INSTANCE: {stack.instance}
"""
    app = ["web", "beat", "worker-analysis", "worker-bench-qemu-x86_64",
           "worker-bench-qemu-ppc64le"]  # fmt: skip
    out = "services:\n"
    for name in app:
        out += f"  {name}:\n{env}"
    for name in ("worker-control", "worker-build"):
        out += f"  {name}:\n{env}    volumes:\n{trees}"
    return out


def _seed_data_dir(data: Path) -> None:
    """The default tree as a shared clone of the host's, and the host's ccache, both owned
    by the image's user (git refuses a repository another user owns)."""
    data.mkdir(mode=0o755)
    trees = data / "trees"
    trees.mkdir()
    _run(["git", "clone", "--quiet", "--bare", "--shared", str(HOST_TREES / "linux-6.12.git"),
          str(trees / "linux-6.12.git")])  # fmt: skip
    ccache = data / "ccache"
    if HOST_CCACHE.is_dir() and any(HOST_CCACHE.iterdir()):
        # Hard links: nothing copied, and ccache replaces files by rename, never in place,
        # so the host's entries are never written through them.
        copied = subprocess.run(["cp", "-al", f"{HOST_CCACHE}/.", str(ccache)], check=False,
                                capture_output=True)  # fmt: skip
        if copied.returncode != 0:  # another file system
            shutil.rmtree(ccache, ignore_errors=True)
            _run(["cp", "-a", f"{HOST_CCACHE}/.", str(ccache)])
    ccache.mkdir(exist_ok=True)
    # The directories only: the linked files stay as they are (0644, the host's).
    for path in [data, *(p for p in data.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.chown(path, IMAGE_UID, IMAGE_UID)
    for path in (trees / "linux-6.12.git").rglob("*"):
        os.chown(path, IMAGE_UID, IMAGE_UID, follow_symlinks=False)


def _destroy_domains(prefix: str) -> list[str]:
    names = subprocess.run(["virsh", "-q", "-c", "qemu:///system", "list", "--all", "--name"],
                           capture_output=True, text=True, check=False).stdout.split()  # fmt: skip
    gone = [n for n in names if n.startswith(prefix)]
    for name in gone:
        subprocess.run(["virsh", "-c", "qemu:///system", "destroy", name], capture_output=True,
                       check=False)  # fmt: skip
    return gone


def _image_id(name: str) -> str:
    found = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", name],
                           capture_output=True, text=True, check=False)  # fmt: skip
    return found.stdout.strip() if found.returncode == 0 else ""


def _healthz(port: int) -> dict | None:
    """/healthz's answer (a 503 too: it names what failed), or None if nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as exc:
        return json.load(exc)
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    started = time.monotonic()
    token = secrets.token_hex(4)
    tmp = Path(tempfile.mkdtemp(prefix=f"rcubench-compose-{token}-", dir="/var/tmp"))
    tmp.chmod(0o755)  # QEMU (libvirt-qemu) reaches the kernels and consoles under it
    stack = Stack(project=f"rcubench-compose-{token}", tmp=tmp, data=tmp / "data",
                  port=_free_port(), instance=f"compose-{token}-")  # fmt: skip
    try:
        t = time.monotonic()
        _run(["bash", str(ROOT / "scripts" / "compose-images.sh")], cwd=ROOT)
        stack.seconds["base/postgres/redis images"] = time.monotonic() - t
        _seed_data_dir(stack.data)
        (tmp / ".env").write_text(_env_file(stack))
        (tmp / ".env").chmod(0o600)
        (tmp / "test.yml").write_text(_test_override(stack))

        t = time.monotonic()
        before = _image_id(APP_IMAGE)
        stack.compose("build", "migrate", timeout=3600)  # one image serves every app service
        if before and before != _image_id(APP_IMAGE):  # the previous tree's, now untagged
            subprocess.run(["docker", "image", "rm", before], capture_output=True, check=False)
        stack.seconds["app image"] = time.monotonic() - t

        t = time.monotonic()
        stack.compose("up", "-d", timeout=600)
        deadline = time.monotonic() + HEALTHY_WITHIN
        while True:
            body = _healthz(stack.port)
            state = stack.compose("ps", "--format", "{{.Service}} {{.Health}}", check=False)
            if body is not None and body["status"] == "ok" and "web healthy" in state.stdout:
                break
            assert time.monotonic() < deadline, f"not healthy: {body}\n{state.stdout}"
            time.sleep(2)
        stack.seconds["up to healthy"] = time.monotonic() - t
        yield stack
    finally:
        if stack.data.exists():
            logs = stack.compose("logs", "--no-color", "--tail", "40", check=False)
            (tmp / "compose.log").write_text(logs.stdout + logs.stderr)
        down = stack.compose("down", "-v", "--remove-orphans", "--timeout", "30", check=False)
        left = _destroy_domains(f"rcubench-{stack.instance}")
        shutil.rmtree(tmp, ignore_errors=True)
        stack.seconds["whole"] = time.monotonic() - started
        _log(", ".join(f"{k} {v:.0f} s" for k, v in stack.seconds.items()))
        assert down.returncode == 0, down.stderr
        assert not left, f"domains left running: {left}"


def test_web_answers_healthz_on_localhost_only(stack):
    body = _healthz(stack.port)
    assert body == {"status": "ok", "failed": [],
                    "checks": {"database": {"ok": True}, "broker": {"ok": True},
                               "libvirt": {"ok": True}}}  # fmt: skip
    # Only web publishes a port, on 127.0.0.1; PostgreSQL and Redis (whose host ports the
    # host's own servers hold) are reached by the containers only.
    services = json.loads(stack.compose("config", "--format", "json").stdout)["services"]
    with_ports = {n: s["ports"] for n, s in services.items() if s.get("ports")}
    assert list(with_ports) == ["web"]
    assert [p["host_ip"] for p in with_ports["web"]] == ["127.0.0.1"]


def test_demo_comparison_completes_through_the_containers(stack):
    t = time.monotonic()
    out = stack.manage(
        "compare", "--tree", "linux-6.12", "--base", BASE_TAG, "--series", DEMO_MBOX,
        "--bench", "sync-rcu-latency", "--arch", "x86_64", "--runs", "24", "--max-runs", "96",
        timeout=DEMO_WITHIN,
    )  # fmt: skip
    stack.seconds["demo comparison"] = time.monotonic() - t
    _log(out.stdout[-3000:])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-6000:]
    assert "verdict: regression" in out.stdout, out.stdout[-4000:]

    # Every run was booted by the bench worker's container, through the host's libvirtd
    # (the domain names carry this project's instance).
    bench = stack.compose("ps", "-q", "worker-bench-qemu-x86_64").stdout.strip()
    hostname = _run(["docker", "inspect", "-f", "{{.Config.Hostname}}", bench]).stdout.strip()
    query = stack.manage(
        "shell", "--no-imports", "-c",
        "from webapp.comparisons.models import Comparison, Run\n"
        "c = Comparison.objects.latest('pk')\n"
        "runs = Run.objects.filter(comparison=c, result='ok')\n"
        "print(c.verdict, runs.count(), sorted(set(runs.values_list('host', flat=True))))",
    )  # fmt: skip
    assert query.returncode == 0, query.stderr[-4000:]
    verdict, ok_runs, hosts = query.stdout.strip().splitlines()[-1].split(" ", 2)
    assert verdict == "regression"
    assert int(ok_runs) >= 48
    assert hosts == f"['{hostname}']"
    kernels = list((stack.data / "build" / "artifacts").glob("*/*/meta.json"))
    assert len(kernels) == 2, kernels  # base and base + patch, built in the build container
    # The consoles QEMU wrote on the host, where the bench worker read them.
    consoles = list((stack.data / "runs").glob("*/console.log"))
    assert sum(b"writer-duration" in c.read_bytes() for c in consoles) >= 48
