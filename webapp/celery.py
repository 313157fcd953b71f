"""The Celery app as a sender needs it: the Redis broker, JSON messages, the routing table and
the queues. The web app, the CLI and the services send through it (webapp/dispatch.py).

The worker (workers/celery_app.py) extends this same app object with what only a worker
needs: the task modules, their time limits, the beat schedule, the serving bootstep and
logging. Messages carry only "do step X for id N"; every step's state lives in PostgreSQL,
so a lost message or a killed worker is recovered from the database (heartbeats + the
reaper).
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

from django.conf import settings

from webapp.routing import CONTROL, all_queues, route_task

app = Celery("rcubench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_routes = (route_task,)
app.conf.task_queues = [Queue(name) for name in all_queues(settings.RCUBENCH_BENCH_TARGETS)]
app.conf.task_default_queue = CONTROL
