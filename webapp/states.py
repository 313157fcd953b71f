"""State and result vocabulary shared by every step rcubench tracks in the database.

The state says where a step is in its life (queued, running, done); the result says how a
finished step ended, with an error code naming the failure. They are separate fields so that
"done but failed" and "still running" are never confused, and the database enforces that
only a done step has a result.
"""

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import models
from django.db.models import Q
from django.utils import timezone


class State(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class Result(models.TextChoices):
    NONE = "", "(not finished)"
    OK = "ok"
    FAILED = "failed"
    INCOMPLETE = "incomplete"


class Arch(models.TextChoices):
    X86_64 = "x86_64"
    PPC64LE = "ppc64le"


def result_only_when_done(name: str, done: str = State.DONE) -> models.CheckConstraint:
    """A result is set exactly when the state is `done`."""
    return models.CheckConstraint(
        condition=(Q(state=done) & ~Q(result=Result.NONE))
        | (~Q(state=done) & Q(result=Result.NONE)),
        name=name,
    )


def error_code_iff_unsuccessful(name: str) -> models.CheckConstraint:
    """Failed and incomplete steps name their error; ok and unfinished ones have none."""
    unsuccessful = Q(result__in=[Result.FAILED, Result.INCOMPLETE])
    return models.CheckConstraint(
        condition=(unsuccessful & ~Q(error_code="")) | (~unsuccessful & Q(error_code="")),
        name=name,
    )


class TrackedStep(models.Model):
    """Fields every step the workers carry out has: its state machine, where it ran, when.

    Subclasses add `error_code` with their own choices and the two constraints above.
    """

    state = models.CharField(max_length=16, choices=State, default=State.QUEUED)
    result = models.CharField(max_length=16, choices=Result, default=Result.NONE, blank=True)
    error_message = models.TextField(blank=True)
    host = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When its task was last sent (re-sent if lost)."
    )

    class Meta:
        abstract = True


def end_silent_steps(
    model: type[TrackedStep], *, now: datetime, stale_seconds: int, result: str, error_code: str
) -> int:
    """End running steps of `model` whose worker went silent (no heartbeat for
    `stale_seconds`: worker killed, host gone); return how many. One conditional UPDATE, so
    a step that finishes meanwhile is not touched."""
    cutoff = now - timedelta(seconds=stale_seconds)
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    return model._default_manager.filter(silent, state=State.RUNNING).update(
        state=State.DONE,
        result=result,
        error_code=error_code,
        error_message=(
            f"no heartbeat for more than {stale_seconds} s; "
            "presumed lost (worker killed or host down)"
        ),
        finished_at=now,
    )


def heartbeat(model: type[TrackedStep], pk: int, every: float = 15.0) -> Callable[..., None]:
    """A callback for long work: each call writes the step's heartbeat, at most every
    `every` seconds, so the reaper knows the worker is alive."""
    last = time.monotonic()

    def beat(*_: object) -> None:
        nonlocal last
        if time.monotonic() - last >= every:
            model._default_manager.filter(pk=pk).update(heartbeat_at=timezone.now())
            last = time.monotonic()

    return beat
