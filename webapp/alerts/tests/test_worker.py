"""The whole path through a real Celery worker process: a finished comparison's notify task,
the send task, a 421 from the server, the retry after its backoff, one mail."""

import time

import pytest

from webapp import dispatch
from webapp.alerts.models import Alert
from webapp.alerts.tests.conftest import make_comparison


@pytest.mark.timeout(240)
def test_a_worker_retries_after_a_421_and_sends_once(celery_processes, smtp):
    smtp.replies.append(("RCPT", "421 4.3.2 Service not available, try again later"))
    c = make_comparison()
    celery_processes.start_worker(
        EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp.port),
        RCUBENCH_MAIL_FROM="rcubench <rcubench@bench.example.org>",
        RCUBENCH_MAIL_RETRY_BACKOFF_SECONDS="1",
    )  # fmt: skip
    dispatch.send_notify(c.pk)  # what the orchestrator's _finish sends (no transaction here)
    deadline = time.monotonic() + 120
    alert = None
    while time.monotonic() < deadline:
        alert = Alert.objects.filter(comparison=c).first()
        if alert is not None and alert.state not in ("queued", "sending"):
            break
        time.sleep(0.5)
    assert alert is not None, celery_processes.logs()
    assert alert.state == "sent", (alert.state, alert.last_error, celery_processes.logs())
    assert alert.attempts == 2  # the 421, then the retry
    assert [r.rcpt_tos for r in smtp.received] == [["dev@example.org"]]
    assert smtp.received[0].message["In-Reply-To"] == alert.in_reply_to
