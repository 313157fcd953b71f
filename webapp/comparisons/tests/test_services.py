from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.factories import RunFactory
from webapp.comparisons.models import Run
from webapp.comparisons.runs import reap_stale_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def stale_seconds(settings):
    settings.RCUBENCH_RUN_STALE_SECONDS = 300
    return 300


def test_reaper_ends_only_silent_running_runs(stale_seconds):
    now = timezone.now()
    old = now - timedelta(seconds=stale_seconds + 1)
    fresh = now - timedelta(seconds=stale_seconds - 10)
    silent = RunFactory.create(state="running", started_at=old, heartbeat_at=old)
    never_beat = RunFactory.create(state="running", started_at=old, heartbeat_at=None)
    alive = RunFactory.create(state="running", started_at=old, heartbeat_at=fresh)
    queued = RunFactory.create(state="queued")
    finished = RunFactory.create(state="done", result="ok", started_at=old, heartbeat_at=old)

    assert reap_stale_runs(now=now) == 2

    for run in (silent, never_beat):
        run.refresh_from_db()
        assert (run.state, run.result, run.error_code) == ("done", "incomplete", Run.Error.LOST)
        assert run.finished_at == now
        assert "no heartbeat for more than 300 s" in run.error_message
    for run, state in ((alive, "running"), (queued, "queued"), (finished, "done")):
        run.refresh_from_db()
        assert run.state == state
    finished.refresh_from_db()
    assert finished.result == "ok"


def test_reaper_twice_is_a_no_op(stale_seconds):
    old = timezone.now() - timedelta(hours=1)
    RunFactory.create(state="running", started_at=old, heartbeat_at=old)
    assert reap_stale_runs() == 1
    assert reap_stale_runs() == 0
