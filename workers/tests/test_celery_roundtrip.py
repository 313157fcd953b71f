"""A task travels through the real Redis broker to a real worker process and changes a row."""

import json
import time
from datetime import timedelta

from django.utils import timezone

from tests.support.factories import RunFactory
from webapp.routing import REAP_STALE_RUNS
from workers.celery_app import app


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


def test_a_prefork_worker_writes_its_tasks_state_changes_as_json_lines_to_its_log_file(
    celery_processes, tmp_path
):
    """As `make up` runs it: the state lines are written in the pool's child process, where
    Django configures logging again; they must still reach the worker's log file."""
    log = tmp_path / "worker.json"
    celery_processes.start_worker(pool="prefork", RCUBENCH_LOG_FILE=str(log))
    old = timezone.now() - timedelta(hours=1)
    run = RunFactory.create(state="running", started_at=old, heartbeat_at=old)

    app.send_task(REAP_STALE_RUNS)

    deadline = time.monotonic() + 60
    while run.state != "done" and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # JSON only
    mine = [line for line in lines if line.get("run") == run.pk]
    assert [(line["event"], line["state"], line["error"]) for line in mine] == [
        ("run state", "done", "lost")
    ], log.read_text()
    assert any("succeeded" in line["event"] for line in lines)  # Celery's own lines too
