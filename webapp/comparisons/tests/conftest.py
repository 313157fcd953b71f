"""Fixtures of the whole-comparison tests (test_end_to_end.py, test_verdicts_end_to_end.py):
the x86_64 target, the settings of the real worker processes, the demo's patched kernel,
and one real comparison that several tests read their assertions off.

Sharing a comparison between transactional tests: each of them empties the database when it
ends, so `shared_comparison` runs its comparison once a session (a real worker process,
real boots) and keeps every row it made, serialized; `cli_comparison` puts those rows back,
with their primary keys, into the database of each test that reads them.
"""

import importlib
import io
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core import serializers
from django.core.management import call_command
from django.core.management.base import CommandError
from django.core.management.color import no_style
from django.db import connection, models, transaction
from django.test import override_settings

from conftest import BASE_TAG, DEFAULT_TREE, TEST_BROKER_URL, _database_url
from engine.build.builder import build_kernel
from engine.run.hostload import parse_stat
from engine.vm.connection import open_connection
from tests.support.workers import WorkerProcesses
from webapp.celery import app  # the worker's app too (workers.celery_app extends it)
from webapp.comparisons.models import Comparison, ServedQueue, Target

DEFAULT_TARGETS = importlib.import_module("webapp.comparisons.migrations.0002_default_targets")
DEMO_MBOX = Path(__file__).resolve().parents[3] / "demo" / "0001-rcu-fqs-one-more-jiffy-demo.mbox"

# Others' share of the host's CPU time below which the host counts as quiet before a
# comparison's runs: idle with the worker up it is 0.00-0.03 (settings.RCUBENCH_CONTENTION_SHARE).
QUIET_SHARE = 0.1
QUIET_WAIT_SECONDS = 180.0


def _x86_target() -> Target:
    fields = next(t for t in DEFAULT_TARGETS.TARGETS if t["name"] == "qemu-x86_64")
    return Target.objects.get_or_create(name=fields["name"], defaults=fields)[0]


@pytest.fixture
def x86_target() -> Target:
    """The migrated qemu-x86_64 target, recreated: a transactional test before this one may
    have flushed it. (serialized_rollback instead breaks after a live_server test, whose
    flush leaves content types that the restore then inserts twice.)"""
    return _x86_target()


def worker_values(kernel_data_dir: Path) -> dict[str, str]:
    """The environment of these tests' worker processes."""
    return {
        "RCUBENCH_DATA_DIR": str(kernel_data_dir),  # the session's mirrors and artifacts
        "RCUBENCH_CCACHE_DIR": os.environ.get("RCUBENCH_CCACHE_DIR", "/var/lib/rcubench/ccache"),
        "RCUBENCH_ALLOW_FEW_RUNS": "1",
        "RCUBENCH_BOOT_TIMEOUT_SECONDS": "30",
        "RCUBENCH_BENCH_TIMEOUT_SECONDS": "15",
        "RCUBENCH_RUN_STALE_SECONDS": "10",
        "RCUBENCH_REAPER_INTERVAL_SECONDS": "2",
        "RCUBENCH_REDISPATCH_SECONDS": "6",
        "RCUBENCH_CANCEL_POLL_SECONDS": "0.5",
        "RCUBENCH_BENCH_TARGETS": "qemu-x86_64",
        "RCUBENCH_INSTANCE": "test-",  # not the VMs of a `make up` service on this host
    }


def submitter_settings(kernel_data_dir: Path) -> dict[str, Any]:
    """The settings this process, which submits, shares with the workers."""
    return {
        "RCUBENCH_ALLOW_FEW_RUNS": True,
        "RCUBENCH_DATA_DIR": str(kernel_data_dir),
        "RCUBENCH_INSTANCE": "test-",
    }


@pytest.fixture
def env(x86_kernel, kernel_data_dir, settings, x86_target) -> dict[str, str]:
    """Settings of the worker processes (and of this process, which submits)."""
    for name, value in submitter_settings(kernel_data_dir).items():
        setattr(settings, name, value)
    return worker_values(kernel_data_dir)


@pytest.fixture(scope="session")
def x86_demo_kernel(x86_kernel, build_settings, kernel_request):
    """`make demo`'s side B: the session's base kernel with demo/'s patch and every
    benchmark's Kconfig, built incrementally in the base's slot. The builder's commit of a
    series is the same wherever it is applied (the patch's dates, a fixed committer), so a
    tree or a compose stack holding that commit finds this kernel by its key."""
    return build_kernel(kernel_request(mbox=DEMO_MBOX.read_bytes()), build_settings)


# --- host state the tests read -----------------------------------------------------------


def rcubench_domains() -> list[str]:
    """The test VMs libvirt knows now (every test's are named rcubench-test-qemu-...)."""
    conn = open_connection("qemu:///system")
    try:
        return [
            d.name() for d in conn.listAllDomains() if d.name().startswith("rcubench-test-qemu-")
        ]
    finally:
        conn.close()


def busy_share(seconds: float = 3.0) -> float:
    """Everything's share of the host's CPU time over `seconds` (no VM runs now)."""
    first = parse_stat(Path("/proc/stat").read_text())
    time.sleep(seconds)
    last = parse_stat(Path("/proc/stat").read_text())
    return (last.busy - first.busy) / max(last.total - first.total, 1)


def wait_for_quiet() -> float:
    """The host's busy share once it is quiet (at most QUIET_SHARE), waiting up to
    QUIET_WAIT_SECONDS for a neighbour's job to end; the last share measured if it never
    is. On a dedicated host (CI) this returns at once."""
    deadline = time.monotonic() + QUIET_WAIT_SECONDS
    while (share := busy_share()) > QUIET_SHARE and time.monotonic() < deadline:
        pass
    return share


def state_lines(records: list[logging.LogRecord], procs: WorkerProcesses) -> list[dict]:
    """The structured "<kind> state" lines of this process (`records`: the submission's),
    then of the workers' and beat's log files (JSON lines)."""
    lines = [record.msg for record in records if isinstance(record.msg, dict)]
    for proc in procs.procs:
        for line in proc.log_path.read_text().splitlines():  # type: ignore[attr-defined]
            if line.startswith("{"):
                lines.append(json.loads(line))
    return [line for line in lines if str(line.get("event", "")).endswith(" state")]


# --- one comparison, read by several tests ------------------------------------------------

SHARED_RUNS = 4  # per side: two ABBA blocks (its readers need no change verdict)
SHARED_CMDLINE_B = "rcutree.jiffies_till_first_fqs=2"


@dataclass(frozen=True)
class SharedComparison:
    """What `shared_comparison` ran, kept beyond the database it ran in."""

    pk: int
    pks: list[int]  # every comparison in the database once it ended: [pk]
    rows: str  # every row of rcubench's models it made (Django's JSON serialization)
    targets: dict[int, str]  # the targets those rows name: pk -> name
    output: str  # what `compare` printed (and its error, if it gave one)
    states: list[dict]  # the "<kind> state" log lines (state_lines)
    logs: str  # the worker's log, for the tests' failure messages
    domains_left: list[str]  # test VMs libvirt still knew once the comparison had ended
    busy_share: float  # the host's, measured just before the comparison (wait_for_quiet)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _captured_logs() -> Iterator[list[logging.LogRecord]]:
    """This process's log records at INFO and above while inside: what caplog gives a test."""
    handler, root = _Records(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _kept_models() -> list[type[models.Model]]:
    """rcubench's models whose rows a comparison makes: not the targets (each test makes
    its own, see x86_target) nor the workers' heartbeats."""
    return [
        m for m in apps.get_models()
        if m.__module__.startswith("webapp.") and m not in (Target, ServedQueue)
    ]  # fmt: skip


@pytest.fixture(scope="session")
def shared_comparison(
    django_db_setup, django_db_blocker, x86_kernel, kernel_data_dir, tmp_path_factory
) -> SharedComparison:
    """One comparison from the command line through a real worker, once a session: the
    session's base kernel on both sides (one build, from the session's cache), side B with
    SHARED_CMDLINE_B, SHARED_RUNS runs a side, after waiting for a quiet host. It ran in
    the test database as a test's would, and its rows were then removed (as a transactional
    test's teardown removes them): `cli_comparison` brings them back per test. Sharing it
    spares the quiet-host test a comparison of its own (an A/A of 8 runs a side: 84 s in
    the baseline run of the whole suite, 2026-11-26)."""
    log_dir = tmp_path_factory.mktemp("shared-comparison")
    with django_db_blocker.unblock(), override_settings(**submitter_settings(kernel_data_dir)):
        _x86_target()
        with app.connection_for_write() as conn:  # drop leftovers of an interrupted earlier run
            app.control.purge(connection=conn)
        procs = WorkerProcesses({**os.environ, "CELERY_BROKER_URL": TEST_BROKER_URL,
                                 "DATABASE_URL": _database_url(connection.settings_dict)},
                                log_dir)  # fmt: skip
        out = io.StringIO()
        try:
            share = wait_for_quiet()
            procs.start_worker(**worker_values(kernel_data_dir))
            with _captured_logs() as records:
                try:
                    call_command(
                        "compare", "--tree", str(DEFAULT_TREE), "--base", BASE_TAG, "--bench",
                        "sync-rcu-latency", "--runs", str(SHARED_RUNS), "--max-runs",
                        str(SHARED_RUNS), "--cmdline-b", SHARED_CMDLINE_B, "--timeout", "600",
                        stdout=out,
                    )  # fmt: skip
                except CommandError as exc:  # the tests' assertions say what went wrong
                    out.write(f"\nCommandError: {exc}\n")
            domains_left = rcubench_domains()  # with the worker still up, as a test sees it
        finally:
            procs.stop_all()
        pks = list(Comparison.objects.order_by("pk").values_list("pk", flat=True))
        kept = _kept_models()
        rows = serializers.serialize("json", [o for m in kept for o in m._base_manager.all()])
        targets = dict(Target.objects.values_list("pk", "name"))
        shared = SharedComparison(
            pk=pks[-1] if pks else 0, pks=pks, rows=rows, targets=targets,
            output=out.getvalue(), states=state_lines(records, procs), logs=procs.logs(),
            domains_left=domains_left, busy_share=share,
        )  # fmt: skip
        call_command("flush", interactive=False, verbosity=0)
    return shared


@pytest.fixture
def cli_comparison(shared_comparison: SharedComparison, env, transactional_db) -> Comparison:
    """The shared comparison's rows in this test's database, with their primary keys (its
    runs' console files stay where the worker wrote them, under the session's data dir).
    A target its rows name is this test's target of that name."""
    if not shared_comparison.pks:
        pytest.fail(f"compare made no comparison:\n{shared_comparison.output}\n"
                    f"{shared_comparison.logs}")  # fmt: skip
    kept = _kept_models()
    with transaction.atomic():
        for found in serializers.deserialize("json", shared_comparison.rows):
            row = found.object
            for field in row._meta.concrete_fields:
                pk = getattr(row, field.attname)
                if field.is_relation and field.related_model is Target and pk is not None:
                    target = Target.objects.get(name=shared_comparison.targets[pk])
                    setattr(row, field.attname, target.pk)
            found.save()
        # Rows inserted with their keys leave the sequences behind: set them past them.
        with connection.cursor() as cursor:
            for sql in connection.ops.sequence_reset_sql(no_style(), kept):
                cursor.execute(sql)
    return Comparison.objects.get(pk=shared_comparison.pk)
