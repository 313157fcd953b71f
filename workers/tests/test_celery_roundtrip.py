"""A task travels through the real Redis broker to a real worker process and changes a row."""

import time
from datetime import timedelta

from django.utils import timezone

from webapp.factories import RunFactory
from workers.celery_app import app
from workers.routing import REAP_STALE_RUNS


def test_reaper_task_round_trip_updates_the_database(celery_worker_process):
    old = timezone.now() - timedelta(hours=1)
    run = RunFactory.create(state="running", started_at=old, heartbeat_at=old)

    app.send_task(REAP_STALE_RUNS)  # by name, routed to the control queue by the router

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state == "done":
            break
        time.sleep(0.2)
    log = celery_worker_process.log_path.read_text()
    assert (run.state, run.result, run.error_code) == ("done", "incomplete", "lost"), log
    assert "rcubench.control.reap_stale_runs" in log
    assert "succeeded" in log
