"""Every Celery task rcubench sends, sent from here: by its stable name, to its queue, once
the caller's transaction has committed.

The web app and the services call these, never the task functions, so they need not import
workers.tasks (which import them back: an import-linter contract keeps it so). A message
carries only "do step X for id N"; the step's state is in the database, so a message lost
or sent twice does no harm (the orchestrator re-sends what the broker lost, and each step's
claim is a conditional UPDATE).

Sending after the commit matters: a worker fast enough to take the message before the row
is committed would find nothing to do and drop it.
"""

from django.db import transaction

from webapp.celery import app
from webapp.routing import (
    ADVANCE_BISECTION,
    ADVANCE_COMPARISON,
    BUILD_KERNEL,
    CONCLUDE_LOOK,
    NOTIFY_BISECTION,
    NOTIFY_CHANGE_POINT,
    NOTIFY_COMPARISON,
    NOTIFY_SWEEP,
    NOTIFY_TRANSITION,
    PROCESS_INBOUND,
    PROCESS_PUSH,
    RUN_BENCHMARK,
    RUN_LAB_BENCHMARK,
    SEND_ALERT,
)


def _send(name: str, object_id: int, queue: str | None = None) -> None:
    transaction.on_commit(lambda: app.send_task(name, args=(object_id,), queue=queue))


def send_build(build_id: int) -> None:
    """Build this Build (build queue)."""
    _send(BUILD_KERNEL, build_id)


def send_run(run_id: int, queue: str, *, lab: bool = False) -> None:
    """Carry out this Run on its target's queue (Target.queue); a lab target's run by the
    task with the lab's time limit."""
    _send(RUN_LAB_BENCHMARK if lab else RUN_BENCHMARK, run_id, queue)


def send_analysis(comparison_id: int) -> None:
    """The comparison's look: the statistics, then more runs or the end (analysis queue)."""
    _send(CONCLUDE_LOOK, comparison_id)


def send_advance(comparison_id: int) -> None:
    """Do the comparison's next step (control queue)."""
    _send(ADVANCE_COMPARISON, comparison_id)


def send_process_push(push_id: int, delay: float = 0) -> None:
    """Test this watched push once its coalescing window (`delay` seconds) is over (control
    queue). A lost or early message is harmless: the beat's watch tick takes up every
    pending push that is due."""
    transaction.on_commit(
        lambda: app.send_task(PROCESS_PUSH, args=(push_id,), countdown=max(0.0, delay))
    )


def send_notify(comparison_id: int) -> None:
    """Decide who gets mail about this finished comparison and queue it (control queue)."""
    _send(NOTIFY_COMPARISON, comparison_id)


def send_notify_change_point(change_point_id: int) -> None:
    """Mail the tree's subscribers about this change point (control queue)."""
    _send(NOTIFY_CHANGE_POINT, change_point_id)


def send_process_inbound(inbound_id: int) -> None:
    """Read a stored inbound mail and act on its commands (control queue)."""
    _send(PROCESS_INBOUND, inbound_id)


def send_notify_transition(transition_id: int) -> None:
    """Mail a regression's move into its report's thread (control queue)."""
    _send(NOTIFY_TRANSITION, transition_id)


def send_notify_sweep(sweep_id: int) -> None:
    """Mail a sweep whose B scales worse than A (control queue)."""
    _send(NOTIFY_SWEEP, sweep_id)


def send_alert(alert_id: int) -> None:
    """Send one Alert row's mail, at most once (control queue)."""
    _send(SEND_ALERT, alert_id)


def send_advance_bisection(bisection_id: int) -> None:
    """Do the bisection's next step (control queue)."""
    _send(ADVANCE_BISECTION, bisection_id)


def send_notify_bisection(bisection_id: int) -> None:
    """Mail the confirmed culprit of this bisection (control queue)."""
    _send(NOTIFY_BISECTION, bisection_id)
