"""The Celery app: Redis broker, JSON messages, one routing table, and the beat schedule.

Messages carry only "do step X for id N"; every step's state lives in PostgreSQL, so a lost
message or a killed worker is recovered from the database (heartbeats + the reaper).
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

from django.conf import settings

from workers.routing import TASK_ROUTES, all_queues

app = Celery(
    "rcubench",
    include=[
        "workers.tasks.control",
        "workers.tasks.build",
        "workers.tasks.bench",
        "workers.tasks.analysis",
    ],
)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = TASK_ROUTES
app.conf.task_queues = [Queue(name) for name in all_queues(settings.RCUBENCH_BENCH_TARGETS)]
app.conf.task_default_queue = "control"
app.conf.beat_schedule = {
    "reap-stale-runs": {
        "task": "rcubench.control.reap_stale_runs",
        "schedule": float(settings.RCUBENCH_REAPER_INTERVAL_SECONDS),
    },
    "kick-comparisons": {
        "task": "rcubench.control.kick_comparisons",
        "schedule": float(settings.RCUBENCH_REAPER_INTERVAL_SECONDS),
    },
    "reap-stale-builds": {
        "task": "rcubench.control.reap_stale_builds",
        "schedule": float(settings.RCUBENCH_REAPER_INTERVAL_SECONDS),
    },
}
