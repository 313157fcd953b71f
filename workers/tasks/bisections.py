"""Bisection tasks (control queue): thin, the state machine is webapp.bisections.services and
the mail webapp.alerts.bisection."""

from webapp.alerts import bisection as bisection_mail
from webapp.bisections import services
from webapp.routing import ADVANCE_BISECTION, NOTIFY_BISECTION
from workers.celery_app import CONTROL_TIME_LIMIT, SOFT_MARGIN, app

# Database work; a step's submission reads the tree's history (preflight, seconds).
_SOFT = CONTROL_TIME_LIMIT - SOFT_MARGIN


@app.task(name=ADVANCE_BISECTION, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def advance_bisection_task(bisection_id: int) -> None:
    services.advance(bisection_id)


@app.task(name=NOTIFY_BISECTION, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def notify_bisection_task(bisection_id: int) -> int:
    return len(bisection_mail.notify_bisection(bisection_id))
