"""Alert mail tasks (control queue): thin, the decisions are in webapp.alerts.services, the
delivery in webapp.alerts.delivery."""

from typing import Any

from django.conf import settings

from webapp.alerts import delivery, inbound, services
from webapp.alerts import sweep as sweep_alerts
from webapp.bisections import services as bisections
from webapp.regressions import services as regressions
from webapp.routing import (
    NOTIFY_CHANGE_POINT,
    NOTIFY_COMPARISON,
    NOTIFY_SWEEP,
    NOTIFY_TRANSITION,
    PROCESS_INBOUND,
    RESEND_LOST_ALERTS,
    SEND_ALERT,
)
from webapp.sweeps import services as sweeps
from webapp.watch import services as watch
from workers.celery_app import CONTROL_TIME_LIMIT, SOFT_MARGIN, app

# Database work and one SMTP transaction (EMAIL_TIMEOUT per socket operation).
_SOFT = CONTROL_TIME_LIMIT - SOFT_MARGIN


@app.task(name=NOTIFY_COMPARISON, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def notify_comparison_task(comparison_id: int) -> int:
    # Sent once when a comparison ends: its mail, and the next step of any bisection it is
    # a step of (a step's comparison is never mailed itself), whatever the mail did (the
    # periodic kick would advance the bisection later anyway), its Regression to triage, and
    # a watched head's bisection where the tree's policy asks for one.
    try:
        return len(services.notify_comparison(comparison_id))
    finally:
        try:
            regressions.open_for_comparison(comparison_id)
            inbound.answer_ended(comparison_id)  # to a mail command that started it
        finally:
            try:
                bisections.on_comparison_done(comparison_id)
                sweeps.on_comparison_done(comparison_id)  # the sweep's verdict, at its last point
            finally:
                watch.on_comparison_done(comparison_id)  # a tested head's regression bisected


@app.task(name=NOTIFY_CHANGE_POINT, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def notify_change_point_task(change_point_id: int) -> int:
    try:
        return len(services.notify_change_point(change_point_id))
    finally:
        regressions.open_for_change_point(change_point_id)


@app.task(name=NOTIFY_TRANSITION, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def notify_transition_task(transition_id: int) -> int:
    return len(services.notify_transition(transition_id))


@app.task(name=NOTIFY_SWEEP, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def notify_sweep_task(sweep_id: int) -> int:
    return len(sweep_alerts.notify_sweep(sweep_id))


@app.task(name=PROCESS_INBOUND, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def process_inbound_task(inbound_id: int) -> str:
    return inbound.process(inbound_id)


@app.task(name=SEND_ALERT, bind=True, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def send_alert_task(self: Any, alert_id: int) -> str:
    """One alert's mail. A transient failure (4xx, refused or timed-out connection) is
    retried with exponential backoff up to RCUBENCH_MAIL_MAX_RETRIES times, then recorded
    as failed. The row's state, not this task, guarantees at most one mail: a duplicate or
    redelivered message finds it sent, or in `sending` and records it as unknown."""
    try:
        return delivery.deliver(alert_id)
    except delivery.TransientMailError as exc:
        retries = self.request.retries
        if retries >= settings.RCUBENCH_MAIL_MAX_RETRIES:
            delivery.give_up(alert_id, str(exc), retries + 1)
            return delivery.State.FAILED
        raise self.retry(
            exc=exc, countdown=delivery.retry_countdown(retries),
            max_retries=settings.RCUBENCH_MAIL_MAX_RETRIES,
        ) from exc  # fmt: skip


@app.task(name=RESEND_LOST_ALERTS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def resend_lost_alerts_task() -> int:
    return delivery.resend_lost()
