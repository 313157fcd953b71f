"""A task travels through the real Redis broker to a real worker process and changes a row."""

import time
from datetime import timedelta

from django.utils import timezone

from webapp.factories import RunFactory
from workers.tasks.control import reap_stale_runs


def test_reaper_task_round_trip_updates_the_database(celery_worker_process):
    old = timezone.now() - timedelta(hours=1)
    run = RunFactory.create(state="running", started_at=old, heartbeat_at=old)

    reap_stale_runs.delay()  # routed to the control queue by the routing table

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
