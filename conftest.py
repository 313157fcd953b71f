"""Fixtures shared by the whole suite, among them a real Celery worker process on the real
Redis broker, writing to the test database (tests/support/workers.py); and the two tiers:
every test that builds, boots, spawns, serves or deploys is marked `system` here, so that
`make check` runs the rest (`pytest -m "not system"`) and `make test` runs everything."""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from kombu import pools as kombu_pools

from benchmarks.registry import BENCHMARKS, kconfig_for
from engine.build.builder import BuildRequest, BuildSettings, build_kernel
from tests.support.workers import WorkerProcesses
from workers.celery_app import app

pytest_plugins = ["tests.support.browser"]  # the `browser` fixture: real headless Chromium

ROOT = Path(__file__).resolve().parent

# Diagnostic runs after a verdict only where a test asks for them (the settings fixture, or
# a worker's RCUBENCH_DIAGNOSE): else every regression a test produces would queue traced
# runs behind it. In this process and, through the environment, in the workers it spawns.
os.environ["RCUBENCH_DIAGNOSE"] = "never"
django_settings.RCUBENCH_DIAGNOSE = "never"

# --- Two tiers: `system` marks what builds, boots, spawns, serves or deploys -------------
# A test that uses one of these fixtures, directly or through another fixture (pytest's
# item.fixturenames holds them all), is a system test: `make check` leaves it to `make test`.
SYSTEM_FIXTURES = {
    # Kernel builds on the default tree (Debian's linux-source-6.12): the session's kernels,
    # the data dir of their mirrors, slots and artifacts (and of the initramfs images and
    # boots built on it), and the build settings and requests the builder tests build with.
    "x86_kernel_race": "builds the x86_64 kernel",
    "x86_kernel": "builds the x86_64 kernel",
    "ppc64le_kernel": "cross-builds the ppc64le kernel",
    "kernel_data_dir": "holds kernel mirrors, builds, images and boots",
    "build_settings": "builds on the session's kernel data dir",
    "kernel_request": "builds the default kernel tree",
    "kernel_mirror": "mirrors the whole kernel tree",
    # Processes, a browser and servers.
    "celery_processes": "spawns celery worker and beat processes",
    "browser": "drives a real headless Chromium",
    "live_server": "serves the app on a live server thread",
    "standin": "boots the lab stand-in VM",
    "nginx_proxy": "serves the app with gunicorn behind nginx",
}
# Tests that spawn or deploy by themselves, with no fixture to tell.
SYSTEM_PATHS = (
    "tests/deploy/",  # docker compose, debootstrap chroots with Ansible, scripts/setup.sh
    "webapp/tests/test_web_load.py",  # perf/web_load.py serving the test database with gunicorn
)


def system_reason(item: pytest.Item) -> str | None:
    """Why `item` is a system test (its first system fixture, or its place), None if not."""
    for name in getattr(item, "fixturenames", ()):
        if name in SYSTEM_FIXTURES:
            return f"{name}: {SYSTEM_FIXTURES[name]}"
    where = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
    return next((f"{where}: spawns or deploys" for p in SYSTEM_PATHS if where.startswith(p)), None)


# tryfirst: the marks are set before `-m` deselects by them. The reason is the mark's
# argument (item.get_closest_marker("system").args), for whoever wonders why.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if reason := system_reason(item):
            item.add_marker(pytest.mark.system(reason))


@pytest.fixture
def closed_port() -> int:
    """A localhost TCP port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return port


def broker_url_for_tests(configured: str | None, broker_url: str) -> str:
    """RCUBENCH_TEST_BROKER_URL when set, else database 15 of the service's broker, with its
    password. Tests use their own Redis database so a `make up` worker on the same machine
    never steals (and runs against the wrong database) a message a test sent."""
    return configured or urlsplit(broker_url)._replace(path="/15", query="").geturl()


# By now pytest-django has loaded the settings, which read .env into the environment.
TEST_BROKER_URL = broker_url_for_tests(
    os.environ.get("RCUBENCH_TEST_BROKER_URL"), django_settings.CELERY_BROKER_URL
)


def _database_url(settings_dict: dict) -> str:
    user = settings_dict["USER"]
    password = settings_dict["PASSWORD"]
    auth = f"{user}:{password}@" if password else f"{user}@"
    host = settings_dict["HOST"] or "127.0.0.1"
    return f"postgres://{auth}{host}:{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"


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
    _use_broker(app, TEST_BROKER_URL)


@pytest.fixture
def celery_processes(transactional_db, tmp_path) -> Iterator[WorkerProcesses]:
    """Start workers (and beat) on demand against the test database; stop them afterwards."""
    from django.db import connection

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
    # keeps connections to the old URL, so it is dropped. Celery reads the environment
    # variable of that name before its own setting, and .env (which scripts/setup.sh gives
    # the broker's URL with its password) is in the environment since the settings loaded:
    # it is set too, which also sends the commands a test starts to the test broker.
    os.environ["CELERY_BROKER_URL"] = url
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
    return BuildSettings(
        root=kernel_data_dir / "build",
        mirrors=kernel_data_dir / "mirrors",
        ccache=Path(os.environ.get("RCUBENCH_CCACHE_DIR", "/var/lib/rcubench/ccache")),
        min_free_bytes=1 << 30,
    )


@pytest.fixture(scope="session")
def kernel_request():
    """BuildRequest for the default tree at BASE_TAG with every benchmark's Kconfig."""

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
    return build_kernel(kernel_request(arch="ppc64le"), build_settings)
