"""Fixtures shared by the whole suite, among them a real Celery worker process on the real
Redis broker, writing to the test database."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kombu import pools as kombu_pools

pytest_plugins = ["tests.support.browser"]  # the `browser` fixture: real headless Chromium


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


class WorkerProcesses:
    """Real `celery worker` (solo pool) and `celery beat` processes on the test broker,
    writing to the test database; started, killed and restarted by a test."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: list[subprocess.Popen] = []

    def start_worker(self, pool: str = "solo", **extra_env: str) -> subprocess.Popen:
        """A worker as the tests need it (solo pool); pool="prefork" starts it as
        scripts/service.sh does (prefork, no --loglevel: LOG_LEVEL applies)."""
        log = self.log_dir / f"worker-{len(self.procs)}.log"
        cmd = [
            sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
            "--pool", pool, "--concurrency", "1", "--without-gossip", "--without-mingle",
            "--hostname", f"test-{uuid.uuid4().hex[:8]}@%h",
            *(["--loglevel", "INFO"] if pool == "solo" else []),
        ]  # fmt: skip
        proc = self._spawn(cmd, log, extra_env)
        # Its log lines go to RCUBENCH_LOG_FILE when that is set, else to its output.
        ready_in = Path(extra_env.get("RCUBENCH_LOG_FILE") or log)
        deadline = time.monotonic() + 60
        while not ready_in.exists() or "ready." not in ready_in.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"celery worker did not start:\n{log.read_text()}")
            time.sleep(0.2)
        return proc

    def start_beat(self, **extra_env: str) -> subprocess.Popen:
        log = self.log_dir / f"beat-{len(self.procs)}.log"
        schedule = self.log_dir / f"beat-{len(self.procs)}.schedule"
        cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat",
               "--loglevel", "INFO", "--schedule", str(schedule)]  # fmt: skip
        return self._spawn(cmd, log, extra_env)

    def _spawn(self, cmd: list[str], log: Path, extra_env: dict[str, str]) -> subprocess.Popen:
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env={**self.env, **extra_env}, stdout=out,
                                    stderr=subprocess.STDOUT)  # fmt: skip
        proc.log_path = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def wait_for(self, what: Callable[[], Any], timeout: float, step: float = 0.25) -> Any:
        """What `what()` returns once it is truthy, asked every `step` seconds; the test
        fails with the workers' logs after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if got := what():
                return got
            time.sleep(step)
        pytest.fail(f"timed out after {timeout:.0f} s\n{self.logs()}")

    def until_done(self, comparison: Any, timeout: float = 300) -> Any:
        """`comparison` (a Comparison), refreshed, once its state is done."""

        def ended() -> bool:
            comparison.refresh_from_db()
            return bool(comparison.state == "done")

        self.wait_for(ended, timeout)
        return comparison

    def logs(self) -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.log_path.read_text()[-6000:]}"  # type: ignore[attr-defined]
                         for p in self.procs)  # fmt: skip

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(autouse=True)
def _empty_process_cache() -> None:
    """The default cache is each process's memory (the list's filter choices): no test sees
    what another left there."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True, scope="session")
def _targets_need_no_worker() -> None:
    """Tests submit without a worker serving the target: the served-target check is off, in
    this process and in the workers and commands it starts (their environment). The tests of
    the check (webapp/comparisons/tests/test_serving.py) turn it on with `settings`."""
    from django.conf import settings

    os.environ["RCUBENCH_REQUIRE_SERVED_TARGETS"] = "0"
    settings.RCUBENCH_REQUIRE_SERVED_TARGETS = False


@pytest.fixture(autouse=True, scope="session")
def _tasks_go_to_the_test_broker() -> None:
    """Every task a test sends (a submission's first step, sent on commit in live-server
    tests) goes to the test broker, never to the default one that a `make up` worker on
    this machine consumes; celery_processes purges what is left there before it starts."""
    from workers.celery_app import app

    _use_broker(app, TEST_BROKER_URL)


@pytest.fixture
def celery_processes(transactional_db, tmp_path) -> Iterator[WorkerProcesses]:
    """Start workers (and beat) on demand against the test database; stop them afterwards."""
    from django.db import connection

    from workers.celery_app import app

    original_url = app.conf.broker_url
    _use_broker(app, TEST_BROKER_URL)
    with app.connection_for_write() as conn:  # drop leftovers of an interrupted earlier run
        app.control.purge(connection=conn)
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(connection.settings_dict),
        "CELERY_BROKER_URL": TEST_BROKER_URL,
    }
    procs = WorkerProcesses(env, tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()
        _use_broker(app, original_url)


@pytest.fixture
def celery_worker_process(celery_processes) -> subprocess.Popen:
    """One `celery worker` (solo pool) against the test database."""
    return celery_processes.start_worker()


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


# --- Real kernels, shared by the build, VM and service tests ------------------------------
DEFAULT_TREE = (
    Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench")) / "trees/linux-6.12.git"
)
BASE_TAG = "v6.12.117-debian"


def _bench_fragment() -> tuple[str, ...]:
    from benchmarks.registry import BENCHMARKS, kconfig_for

    return kconfig_for(BENCHMARKS)


@pytest.fixture(scope="session")
def kernel_data_dir() -> Iterator[Path]:
    """A data dir for this test session's mirrors, slots and artifacts (the machine's ccache
    is shared, so only a machine's first run compiles cold). Under /var/tmp, not pytest's
    tmp_path: the unprivileged build user and QEMU must reach it."""
    root = Path(tempfile.mkdtemp(prefix="rcubench-test-data-", dir="/var/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def build_settings(kernel_data_dir):
    from engine.build.builder import BuildSettings

    return BuildSettings(
        root=kernel_data_dir / "build",
        mirrors=kernel_data_dir / "mirrors",
        ccache=Path(os.environ.get("RCUBENCH_CCACHE_DIR", "/var/lib/rcubench/ccache")),
        min_free_bytes=1 << 30,
    )


@pytest.fixture(scope="session")
def kernel_request():
    """BuildRequest for the default tree at BASE_TAG with every benchmark's Kconfig."""
    from engine.build.builder import BuildRequest

    def make(**kw: object) -> BuildRequest:
        fields: dict[str, object] = {
            "tree_url": str(DEFAULT_TREE),
            "ref": BASE_TAG,
            "arch": "x86_64",
            "fragments": _bench_fragment(),
            "allow_local": True,
        }
        return BuildRequest(**{**fields, **kw})  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def x86_kernel_race(build_settings, kernel_request):
    """The session's x86_64 benchmark kernel, requested twice at the same moment: one
    request builds it, the other waits and gets the stored artifact."""
    from engine.build.builder import build_kernel

    barrier = threading.Barrier(2)

    def one(_: int):
        barrier.wait()
        return build_kernel(kernel_request(), build_settings)

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(2)))


@pytest.fixture(scope="session")
def x86_kernel(x86_kernel_race):
    return next(o for o in x86_kernel_race if not o.cached)


@pytest.fixture(scope="session")
def ppc64le_kernel(build_settings, kernel_request):
    from engine.build.builder import build_kernel

    return build_kernel(kernel_request(arch="ppc64le"), build_settings)
