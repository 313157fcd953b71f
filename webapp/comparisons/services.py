"""Services over comparisons and runs (called by tasks, views and commands)."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from webapp.comparisons.models import Run
from webapp.states import Result, State


def reap_stale_runs(now: datetime | None = None) -> int:
    """Mark running runs whose worker went silent as incomplete ("lost"); return how many.

    A run's worker beats its heartbeat while it works; a run that has not beaten for
    RCUBENCH_RUN_STALE_SECONDS (worker killed, host gone) is ended here so it is never
    counted as data. One conditional UPDATE: a run that finishes meanwhile is not touched.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.RCUBENCH_RUN_STALE_SECONDS)
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    return Run.objects.filter(silent, state=State.RUNNING).update(
        state=State.DONE,
        result=Result.INCOMPLETE,
        error_code=Run.Error.LOST,
        error_message=(
            f"no heartbeat for more than {settings.RCUBENCH_RUN_STALE_SECONDS} s; "
            "presumed lost (worker killed or host down)"
        ),
        finished_at=now,
    )
