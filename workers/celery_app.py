"""The Celery worker: the sender's app (webapp/celery.py) with the task modules, their hard
time limits, the beat schedule, the serving bootstep and logging. Workers and beat start
from here (`celery -A workers.celery_app worker|beat`); nothing in the web app imports it.
"""

from typing import Any

from celery.signals import setup_logging
from django.conf import settings

from engine.build.builder import BuildSettings
from engine.lab.runner import REPROVISION_TIMEOUT
from webapp.celery import app
from webapp.routing import (
    ADVANCE_UNFINISHED,
    PRUNE_CONSOLE_DIRS,
    REAP_STALE_BUILDS,
    REAP_STALE_RUNS,
    RESEND_LOST_ALERTS,
    WATCH_TICK,
)
from workers.serving import ServeTargets

__all__ = ["app"]

app.conf.include = [
    "workers.tasks.control",
    "workers.tasks.builds",
    "workers.tasks.bench",
    "workers.tasks.analysis",
    "workers.tasks.alerts",
    "workers.tasks.bisections",
    "workers.startup",
]
# A worker started on a bench queue serves every enabled Target matching RCUBENCH_SERVE,
# picking up new ones while it runs (workers/serving.py).
app.steps["consumer"].add(ServeTargets)

# --- Hard time limits (seconds), one per kind of task ---
# A task past its hard limit has its pool process killed and is acknowledged, not
# redelivered; the reapers end its row from the silent heartbeat. Each limit exceeds the
# longest the task may take within the engine's own timeouts, which end a slow build or run
# first and record why: the hard limit only ends a task that hangs (a patch loop, a stuck
# call). The soft limit comes a minute earlier and raises SoftTimeLimitExceeded in the task,
# which records the failure itself. Only the prefork pool enforces them (not --pool solo).
SOFT_MARGIN = 60
# The mirror's lock and its clone or fetch, up to an hour each (engine/build/git.py).
MIRROR_SECONDS = 2 * 3600
BUILD_TIME_LIMIT = int(
    settings.RCUBENCH_BUILD_TIMEOUT_SECONDS  # config + make
    + 2 * BuildSettings.lock_timeout  # waiting for the slot's lock, then the cache key's
    + MIRROR_SECONDS
    + 900  # patching, copying the artifact out, pruning the cache
)
BENCH_TIME_LIMIT = int(
    settings.RCUBENCH_BOOT_TIMEOUT_SECONDS
    + settings.RCUBENCH_BENCH_TIMEOUT_SECONDS
    + 600  # waiting for the guest image's lock (engine/vm/images.py)
    + 600  # image, domain set-up and teardown, parsing a capped console, storing
)
# A lab run also waits for a free host, then brings it back: a boot, and as many power
# cycles and boots as it may take, each at most 3600 s (LabHost.boot_timeout_seconds),
# each after a reprovision on a pool that takes untrusted kernels.
LAB_TIME_LIMIT = int(
    BENCH_TIME_LIMIT
    + settings.RCUBENCH_LAB_HOST_WAIT_SECONDS
    + (1 + settings.RCUBENCH_LAB_RECOVERY_TRIES) * (3600 + 120 + REPROVISION_TIMEOUT)
)
# Database work only: the state machine, the reapers, and the statistics of one look.
CONTROL_TIME_LIMIT = 300
# A watched push: the tree's mirror fetched (webapp/watch/baselines.py, 600 s at most), git
# merge-base, then the submission's own checks against the tree.
WATCH_TIME_LIMIT = 1200
# The orchestrator re-sends a look whose try started longer ago than this (its worker died).
ANALYSIS_TIME_LIMIT = settings.RCUBENCH_ANALYSIS_TIME_LIMIT_SECONDS
_REAPER = float(settings.RCUBENCH_REAPER_INTERVAL_SECONDS)
app.conf.beat_schedule = {
    "reap-stale-runs": {"task": REAP_STALE_RUNS, "schedule": _REAPER},
    "advance-unfinished-comparisons": {"task": ADVANCE_UNFINISHED, "schedule": _REAPER},
    "reap-stale-builds": {"task": REAP_STALE_BUILDS, "schedule": _REAPER},
    # Console files of deleted runs (the delete removes them when it can reach them).
    "prune-console-dirs": {"task": PRUNE_CONSOLE_DIRS, "schedule": 3600.0},
    # Watched trees: polling, pushes due or waiting, change points of finished heads.
    # Alerts whose task message was lost (webapp/alerts/delivery.py, resend_lost).
    "resend-lost-alerts": {"task": RESEND_LOST_ALERTS, "schedule": 300.0},
    "watch-tick": {"task": WATCH_TICK, "schedule": float(settings.RCUBENCH_WATCH_TICK_SECONDS)},
}


@setup_logging.connect
def _logging_is_djangos(**_: Any) -> None:
    """Worker and beat log as the web app does (LOGGING in webapp/settings.py: JSON lines to
    RCUBENCH_LOG_FILE, at LOG_LEVEL), from the main process and the pool's children alike
    (Django configures logging again in each child). A receiver here keeps Celery from
    installing its own handlers and level (its --logfile and --loglevel are not used)."""
    from django.utils.log import configure_logging

    configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
