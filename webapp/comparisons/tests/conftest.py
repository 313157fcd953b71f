"""Fixtures of the whole-comparison tests (test_end_to_end.py, test_verdicts_end_to_end.py):
the x86_64 target and the settings of the real worker processes."""

import importlib
import os

import pytest

from webapp.comparisons.models import Target

DEFAULT_TARGETS = importlib.import_module("webapp.comparisons.migrations.0002_default_targets")


@pytest.fixture
def x86_target() -> Target:
    """The migrated qemu-x86_64 target, recreated: a transactional test before this one may
    have flushed it. (serialized_rollback instead breaks after a live_server test, whose
    flush leaves content types that the restore then inserts twice.)"""
    fields = next(t for t in DEFAULT_TARGETS.TARGETS if t["name"] == "qemu-x86_64")
    return Target.objects.get_or_create(name=fields["name"], defaults=fields)[0]


@pytest.fixture
def env(x86_kernel, kernel_data_dir, settings, x86_target) -> dict[str, str]:
    """Settings of the worker processes (and of this process, which submits)."""
    values = {
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
    settings.RCUBENCH_ALLOW_FEW_RUNS = True
    settings.RCUBENCH_DATA_DIR = str(kernel_data_dir)
    settings.RCUBENCH_INSTANCE = "test-"
    return values
