"""One alert's mail sent at most once (docs/alerts.md): the row goes queued -> sending
(committed before the SMTP transaction starts) -> sent | failed | unknown, and a task that
finds it in `sending` records `unknown` and sends nothing. The recipients and the mail
itself are services.py's."""

import contextlib
import random
import smtplib
from datetime import timedelta
from email.utils import parseaddr

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import get_connection
from django.core.mail.backends.smtp import EmailBackend
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from webapp import access, dispatch, logs
from webapp.alerts.models import Alert
from webapp.alerts.services import member_may_see, opted_out, render
from webapp.comparisons.models import Comparison
from webapp.text import storable
from webapp.watch.models import ChangePoint

log = logs.get(__name__)

IN_DOUBT = (
    "an earlier attempt died during the SMTP transaction (worker killed or lost): the "
    "server may have accepted the mail, so it is not sent again (at most once)"
)
State = Alert.State


class TransientMailError(Exception):
    """The server did not take the mail this time (4xx, refused or timed-out connection):
    the row is queued again and the task retries later."""


class _Refused(Exception):
    """The server answered a step of the transaction with an error reply."""

    def __init__(self, code: int, reply: bytes | str, step: str) -> None:
        text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
        self.code, self.reply, self.step = code, f"{code} {text}".strip(), step
        super().__init__(f"{step}: {self.reply}")


def _envelope(smtp: smtplib.SMTP, sender: str, rcpt: str) -> None:
    """MAIL FROM and RCPT TO: a failure here leaves the server without the mail."""
    smtp.ehlo_or_helo_if_needed()
    code, reply = smtp.mail(sender)
    if code != 250:
        raise _Refused(code, reply, "MAIL FROM")
    code, reply = smtp.rcpt(rcpt)
    if code not in (250, 251):
        raise _Refused(code, reply, "RCPT TO")


def _data(smtp: smtplib.SMTP, data: bytes) -> str:
    """DATA: the server's final reply; an error reply raises _Refused, and any other
    failure from here on leaves it unknown whether the server has the mail."""
    try:
        code, reply = smtp.data(data)
    except smtplib.SMTPResponseException as exc:  # refused DATA (no 354)
        raise _Refused(exc.smtp_code, exc.smtp_error, "DATA") from exc
    if code != 250:
        raise _Refused(code, reply, "end of DATA")
    return f"{code} {reply.decode('utf-8', 'replace')}"


def _record(pk: int, state: str, from_states: tuple[str, ...], **fields: object) -> bool:
    done = Alert.objects.filter(pk=pk, state__in=from_states).update(state=state, **fields)
    if done:
        alert = Alert.objects.values("comparison_id", "change_point_id", "bisection_id",
                                     "transition_id", "sweep_id").get(pk=pk)  # fmt: skip
        log.info("alert state", alert=pk, comparison=alert["comparison_id"],
                 change_point=alert["change_point_id"], bisection=alert["bisection_id"],
                 transition=alert["transition_id"], sweep=alert["sweep_id"], state=state,
                 reason=str(fields.get("last_error", ""))[:200])  # fmt: skip
    return bool(done)


def _retry_later(pk: int, error: str) -> TransientMailError:
    _record(pk, State.QUEUED, (State.QUEUED, State.SENDING), last_error=storable(error))
    return TransientMailError(error)


def _checked(alert: Alert) -> str | None:
    """Why the alert may not go out (any more): opted out, or no longer allowed to see a
    restricted comparison; None when it may."""
    if opted_out(alert.recipient):
        return "the address opted out before the mail was sent"
    # A culprit's mail tells of its comparison, and a regression's move of what reported
    # it: each obeys that comparison's visibility (or the change point's audience).
    reg = alert.transition.regression if alert.transition else None
    c = alert.comparison or (alert.bisection.comparison if alert.bisection else None)
    c = c or (reg.comparison if reg else None)
    if alert.sweep_id is not None:  # a sweep's points share their first one's visibility
        c = Comparison.objects.get(sweep_point__sweep_id=alert.sweep_id, sweep_point__position=0)
    if (c is not None and c.visibility == Comparison.Visibility.RESTRICTED
            and not member_may_see(alert.recipient, c)):  # fmt: skip
        return "the comparison is restricted and this address's account may not see it"
    cp = alert.change_point or (reg.change_point if reg else None)
    if cp is not None and cp.audience == ChangePoint.Audience.MEMBERS:
        users = User.objects.filter(email__iexact=alert.recipient, is_active=True)
        if not any(access.sees_all_of(u, cp.tree) for u in users):
            return "the change point is for the tree's members and this address's account is not"
    return None


def deliver(alert_id: int) -> str:
    """Send one alert's mail, at most once; returns the row's state. Raises
    TransientMailError when the server did not take it this time (the row is queued
    again: retry later)."""
    with transaction.atomic():
        alert = (
            Alert.objects.select_for_update(of=("self",))
            .select_related(
                "comparison",
                "change_point__tree",
                "bisection__comparison",
                "transition__regression__comparison",
                "transition__regression__change_point__tree",
            )
            .get(pk=alert_id)
        )
        if alert.state == State.SENDING:
            # A previous attempt marked it and never recorded the outcome: it died between
            # the SMTP transaction's start and its record. Do not send it again.
            _record(alert.pk, State.UNKNOWN, (State.SENDING,), last_error=IN_DOUBT)
            return State.UNKNOWN
        if alert.state != State.QUEUED:
            return alert.state  # a duplicate task: done already
        why_not = _checked(alert)
        if why_not:
            _record(alert.pk, State.SKIPPED, (State.QUEUED,), last_error=why_not)
            return State.SKIPPED
    msg = render(alert)
    data = msg.as_bytes()  # CRLF line endings (the message's SMTP policy)
    sender = parseaddr(settings.RCUBENCH_MAIL_FROM)[1]
    backend = get_connection(fail_silently=False)
    assert isinstance(backend, EmailBackend)  # noqa: S101 - alerts need the SMTP backend
    try:
        backend.open()
    except (OSError, smtplib.SMTPException) as exc:  # refused, timed out, 421 greeting
        Alert.objects.filter(pk=alert.pk).update(attempts=F("attempts") + 1)
        raise _retry_later(alert.pk, f"connecting to {backend.host}:{backend.port}: "
                                     f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
    try:
        # Committed before the transaction starts: a worker that dies from here on leaves
        # the row in `sending`, which the next attempt reads as "may have been sent".
        if not _record(alert.pk, State.SENDING, (State.QUEUED,), sending_at=timezone.now(),
                       attempts=F("attempts") + 1):  # fmt: skip
            return Alert.objects.get(pk=alert.pk).state  # another task took it meanwhile
        smtp = backend.connection
        assert smtp is not None  # noqa: S101 - open() succeeded
        in_data = False
        try:
            _envelope(smtp, sender, alert.recipient)
            in_data = True
            reply = _data(smtp, data)
        except _Refused as exc:
            if 400 <= exc.code < 500:
                raise _retry_later(alert.pk, exc.reply) from exc
            _record(alert.pk, State.FAILED, (State.SENDING, State.UNKNOWN),
                    last_error=storable(str(exc)), smtp_reply=storable(exc.reply))  # fmt: skip
            return State.FAILED
        except (OSError, smtplib.SMTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
            if not in_data:
                raise _retry_later(alert.pk, error) from exc
            _record(alert.pk, State.UNKNOWN, (State.SENDING,),
                    last_error=storable(f"{error}; {IN_DOUBT}"))  # fmt: skip
            return State.UNKNOWN
        # From `unknown` too: a duplicate task may have judged this attempt dead meanwhile;
        # this one knows better.
        _record(alert.pk, State.SENT, (State.SENDING, State.UNKNOWN), sent_at=timezone.now(),
                smtp_reply=storable(reply), last_error="")  # fmt: skip
        return State.SENT
    finally:
        # The outcome is recorded; a failed QUIT changes nothing.
        with contextlib.suppress(OSError, smtplib.SMTPException):
            backend.close()


# A queued alert whose task message the broker lost is sent again from its row (the
# database is the state machine, not the broker): one never tried after LOST_AFTER, or
# one waiting for a retry past the longest backoff (an hour) by as much again.
LOST_AFTER = timedelta(minutes=10)
RETRY_LOST_AFTER = timedelta(hours=2)


def resend_lost() -> int:
    """Periodic (beat): send the task again for queued alerts whose message was lost.
    Harmless when it was not: the row's state makes a second task a no-op."""
    now = timezone.now()
    lost = Alert.objects.filter(state=State.QUEUED).filter(
        Q(attempts=0, created_at__lt=now - LOST_AFTER)
        | Q(attempts__gt=0, sending_at__lt=now - RETRY_LOST_AFTER)
    )
    pks = list(lost.values_list("pk", flat=True))
    for pk in pks:
        log.info("alert resent", alert=pk, reason="its task message was lost")
        dispatch.send_alert(pk)
    return len(pks)


def give_up(alert_id: int, error: str, attempts: int) -> None:
    """The retries are used up: the mail failed for good."""
    _record(alert_id, State.FAILED, (State.QUEUED,),
            last_error=storable(f"gave up after {attempts} attempts; last: {error}"))  # fmt: skip


def retry_countdown(retries: int) -> float:
    """Seconds before the next attempt: exponential from the settings' backoff, at most an
    hour, with jitter so that a server back from an outage is not hit all at once."""
    base = float(settings.RCUBENCH_MAIL_RETRY_BACKOFF_SECONDS)
    return min(3600.0, base * 2**retries) * random.uniform(0.5, 1.0)  # noqa: S311
