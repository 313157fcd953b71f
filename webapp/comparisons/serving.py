"""Which workers serve which targets: the bench workers' heartbeats (ServedQueue rows).

A bench worker (workers/serving.py) reads here which enabled targets match its RCUBENCH_SERVE
patterns and records, at every poll, the queues it consumes. The submission service asks
`unserved_reason` so that a comparison for a target no worker serves is refused at once
instead of waiting in its queue forever. Times are the database's clock, never a worker's,
so hosts whose clocks disagree still agree on what is recent.
"""

from collections.abc import Iterable
from datetime import timedelta
from fnmatch import fnmatchcase

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now

from webapp.comparisons.models import NOT_DERIVED, ServedQueue, Target

# Rows of workers gone this long are deleted (by any worker's poll).
FORGET_AFTER = timedelta(days=1)


def stale_after() -> timedelta:
    """A worker not seen for three polls no longer serves its queues."""
    return timedelta(seconds=3 * float(settings.RCUBENCH_SERVE_POLL_SECONDS))


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether the target `name` matches one of the (fnmatch, case-sensitive) patterns."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def target_queues(patterns: Iterable[str]) -> dict[str, str]:
    """The queue of every enabled target whose name matches `patterns`, to its name. A
    derived target has no queue of its own: it is served with its base's."""
    patterns = [p.strip() for p in patterns if p.strip()]
    names = Target.objects.filter(NOT_DERIVED, enabled=True).values_list("name", flat=True)
    return {Target(name=name).queue: name for name in names if matches(name, patterns)}


def record_served(worker: str, queues: Iterable[str]) -> None:
    """Worker `worker` consumes exactly `queues` now: upsert their rows (seen now) and drop
    its rows of any other queue."""
    queues = sorted(set(queues))
    table = connection.ops.quote_name(ServedQueue._meta.db_table)
    with transaction.atomic():
        ServedQueue.objects.filter(worker=worker).exclude(queue__in=queues).delete()
        if queues:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {table} (queue, worker, seen_at)"  # noqa: S608 (a model's table)
                    " SELECT q, %s, now() FROM unnest(%s::text[]) AS q"
                    " ON CONFLICT (queue, worker) DO UPDATE SET seen_at = EXCLUDED.seen_at",
                    [worker, queues],
                )
        ServedQueue.objects.filter(seen_at__lt=Now() - FORGET_AFTER).delete()


def forget_worker(worker: str) -> None:
    """Worker `worker` stops: it serves nothing any more."""
    ServedQueue.objects.filter(worker=worker).delete()


def served_by(target: Target) -> list[str]:
    """The workers that consume `target`'s queue (seen within three polls)."""
    return list(
        ServedQueue.objects.filter(queue=target.queue, seen_at__gte=Now() - stale_after())
        .order_by("worker")
        .values_list("worker", flat=True)
    )


def unserved_reason(target: Target) -> str | None:
    """Why a comparison on `target` would never run, or None when a worker serves it."""
    if served_by(target):
        return None
    # A derived target is served with its base: the patterns must match the base's name.
    it = "it" if target.base is None else f"its base {target.base.name}"
    return (
        f"no worker serves target {target.name} (its queue {target.queue}): start a worker "
        f"with RCUBENCH_SERVE matching {it}"
    )
