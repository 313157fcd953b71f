"""Every rcubench Celery task has a hard time limit, longer than the engine's own timeouts
it must leave room for (those end a slow build or run and record why), and sized from the
settings: the limit only ends a task that hangs."""

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from engine.build.builder import BuildSettings
from engine.build.git import ensure_mirror
from workers.celery_app import app

ROOT = Path(__file__).resolve().parents[1]
TASKS = {
    "rcubench.control.advance_comparison",
    "rcubench.control.advance_unfinished_comparisons",
    "rcubench.control.reap_stale_runs",
    "rcubench.control.reap_stale_builds",
    "rcubench.build.build_kernel",
    "rcubench.bench.run_benchmark",
    "rcubench.control.prune_console_dirs",
    "rcubench.analysis.conclude_look",
}


@pytest.fixture(scope="module")
def tasks():
    app.loader.import_default_modules()  # the worker's task modules (the app's include list)
    return {name: task for name, task in app.tasks.items() if name.startswith("rcubench.")}


def test_every_rcubench_task_has_a_hard_and_a_soft_time_limit(tasks):
    assert set(tasks) >= TASKS
    for name, task in tasks.items():
        assert isinstance(task.time_limit, int), name
        assert isinstance(task.soft_time_limit, int), name
        assert 0 < task.soft_time_limit < task.time_limit, name


def test_the_build_limit_leaves_room_for_the_build_its_locks_and_the_fetch(tasks):
    mirror = 2 * inspect.signature(ensure_mirror).parameters["timeout"].default  # lock + fetch
    covered = settings.RCUBENCH_BUILD_TIMEOUT_SECONDS + 2 * BuildSettings.lock_timeout + mirror
    assert tasks["rcubench.build.build_kernel"].soft_time_limit > covered


def test_the_bench_limit_leaves_room_for_boot_and_benchmark(tasks):
    covered = settings.RCUBENCH_BOOT_TIMEOUT_SECONDS + settings.RCUBENCH_BENCH_TIMEOUT_SECONDS
    assert tasks["rcubench.bench.run_benchmark"].soft_time_limit >= covered + 600


def test_control_and_analysis_limits_are_small(tasks):
    for name, task in tasks.items():
        if name.startswith(("rcubench.control.", "rcubench.analysis.")):
            assert task.time_limit <= 1800, name


def test_limits_follow_the_timeouts_in_the_settings():
    code = (
        "import json; from workers.celery_app import app; app.loader.import_default_modules();"
        "print(json.dumps({n: app.tasks[n].time_limit for n in"
        " ('rcubench.build.build_kernel', 'rcubench.bench.run_benchmark')}))"
    )
    env = {
        **os.environ,
        "RCUBENCH_BUILD_TIMEOUT_SECONDS": "100000",
        "RCUBENCH_BOOT_TIMEOUT_SECONDS": "5000",
        "RCUBENCH_BENCH_TIMEOUT_SECONDS": "20000",
    }
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    limits = json.loads(out)
    assert limits["rcubench.build.build_kernel"] > 100000 + 2 * BuildSettings.lock_timeout
    assert limits["rcubench.bench.run_benchmark"] > 25000
