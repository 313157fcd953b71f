"""State and result vocabulary shared by every step rcubench tracks in the database.

The state says where a step is in its life (queued, running, done); the result says how a
finished step ended, with an error code naming the failure. They are separate fields so that
"done but failed" and "still running" are never confused, and the database enforces that
only a done step has a result.
"""

import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from webapp import logs
from webapp.text import storable

log = logs.get(__name__)


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


def log_state(obj: models.Model, state: str, **fields: Any) -> None:
    """The one log line of a state change: `<kind> state` with the object's id (e.g.
    {"event": "run state", "run": 7, "state": "running", ...})."""
    _state_line(type(obj), obj.pk, state, **fields)


def _state_line(model: type[models.Model], pk: int, state: str, **fields: Any) -> None:
    kind = model._meta.model_name
    log.info(f"{kind} state", **{kind: pk}, state=state, **fields)


def finish_step(
    obj: models.Model,
    *,
    unfinished: Iterable[str],
    result: str,
    error_code: str = "",
    error_message: str = "",
    context: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """End `obj` (a build, run or comparison) as done with `result`, only if its row is
    still in one of the `unfinished` states: one conditional UPDATE, so an ending written
    meanwhile by someone else (the reaper, a cancel) stands and this late one is dropped.
    On success `obj` holds the values written; returns whether it ended it. `context` goes
    into the log line only (e.g. a run's comparison)."""
    values: dict[str, Any] = {
        "state": State.DONE, "result": result, "error_code": error_code,
        "error_message": storable(error_message), "finished_at": timezone.now(), **fields,
    }  # fmt: skip
    ended = (
        type(obj)._default_manager.filter(pk=obj.pk, state__in=list(unfinished)).update(**values)
    )
    if ended:
        for name, value in values.items():
            setattr(obj, name, value)
        log_state(obj, State.DONE, **(context or {}), result=result, error=error_code,
                  reason=values["error_message"][:200])  # fmt: skip
    else:
        kind = obj._meta.model_name
        log.info("late result dropped", **{kind: obj.pk}, result=result, error=error_code)
    return bool(ended)


def end_silent_steps(
    model: type[TrackedStep], *, now: datetime, stale_seconds: int, result: str, error_code: str
) -> list[int]:
    """End running steps of `model` whose worker went silent (no heartbeat for
    `stale_seconds`: worker killed, host gone); return their ids. Conditional on the state,
    so a step that finishes meanwhile is not touched."""
    cutoff = now - timedelta(seconds=stale_seconds)
    silent = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    reason = (
        f"no heartbeat for more than {stale_seconds} s; presumed lost (worker killed or host down)"
    )
    manager = model._default_manager
    with transaction.atomic():
        pks = list(
            manager.filter(silent, state=State.RUNNING)
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)
        )
        manager.filter(pk__in=pks, state=State.RUNNING).update(
            state=State.DONE, result=result, error_code=error_code, error_message=reason,
            finished_at=now,
        )  # fmt: skip
    for pk in pks:
        _state_line(model, pk, State.DONE, result=result, error=error_code,
                    reason="reaped: " + reason)  # fmt: skip
    return pks


def heartbeat(model: type[models.Model], pk: int, every: float = 15.0) -> Callable[..., None]:
    """A callback for long work: each call writes the row's heartbeat_at (a step's, or a
    lab host's while a run holds it), at most every `every` seconds, so the reaper (or the
    next claim of a lab host) knows the worker is alive."""
    last = time.monotonic()

    def beat(*_: object) -> None:
        nonlocal last
        if time.monotonic() - last >= every:
            model._default_manager.filter(pk=pk).update(heartbeat_at=timezone.now())
            last = time.monotonic()

    return beat
