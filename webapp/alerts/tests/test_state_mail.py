"""A reported regression's later moves mailed into its report's thread
(webapp.alerts.services.notify_transition): to each address the report was sent to, once,
threaded under that report, delivered through a real SMTP server on loopback (conftest's
smtp)."""

from pathlib import Path

import pytest
from django.utils import timezone

from tests.support.factories import (
    MembershipFactory,
    TargetFactory,
    TreeFactory,
    UserFactory,
    bisectable_comparison,
    watched_head,
)
from webapp.alerts import delivery, inbound, services
from webapp.alerts.models import Alert, OptOut
from webapp.celery import app
from webapp.regressions import rules
from webapp.regressions import services as regressions
from webapp.regressions.rules import RULE
from webapp.routing import NOTIFY_TRANSITION
from webapp.watch.models import Push

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).with_name("fixtures") / "inbound"
ALERT_ID = "<rcubench.c17.5d41402abc4b2a76@bench.example.org>"  # what ack.eml answers
JANE = "jane.dev@dev.example.org"
LIST = "rcu@lists.example.org"
SUBJECT = "[rcubench] rcu: a series: sync-rcu-latency writer_duration +16.7% regression"
COVER = "<20261120093000.4711-1-jane.dev@dev.example.org>"


@pytest.fixture
def reported(smtp):
    """A regression whose report went to Jane and to a list (both sent), and to an address
    whose mail failed: the thread the later moves go into."""
    c = bisectable_comparison(shift=16.7)
    reg = regressions.open_for_comparison(c.pk)
    assert reg is not None
    for address, mid, state in (
        (JANE, ALERT_ID, "sent"),
        (LIST, "<rcubench.c17.list@bench.example.org>", "sent"),
        ("gone@example.org", "<rcubench.c17.gone@x>", "failed"),
    ):
        Alert.objects.create(comparison=c, kind="regression", recipient=address, state=state,
                             subject=SUBJECT, message_id=mid, references=COVER)  # fmt: skip
    return reg


def _deliver(transition_pk: int) -> list[Alert]:
    rows = list(Alert.objects.filter(transition_id=transition_pk).order_by("recipient"))
    for row in rows:
        delivery.deliver(row.pk)
        row.refresh_from_db()
    return rows


def _body(msg) -> str:
    return msg.get_content().replace("\r\n", "\n")


def _words(msg) -> str:
    """The body with its lines joined (a paragraph is wrapped at 72 columns)."""
    return " ".join(_body(msg).split())


def test_a_rules_fixed_goes_to_each_sent_reports_thread_once(reported, smtp):
    reg = regressions.transition(
        reported.pk, "fixed", RULE, fixed_by="0123456789ab (comparison 9)",
        note="the newest 2 tested heads are within 2% of the baseline",
    )  # fmt: skip
    t = reg.transitions.last()
    assert t is not None
    assert len(services.notify_transition(t.pk)) == 2  # not the failed report's address
    services.notify_transition(t.pk)  # the task again: no second row
    assert Alert.objects.filter(transition=t).count() == 2
    rows = _deliver(t.pk)
    assert [(r.recipient, r.kind, r.state) for r in rows] == [
        (JANE, "state", "sent"), (LIST, "state", "sent"),
    ]  # fmt: skip
    [got] = smtp.to(JANE)
    msg = got.message
    assert msg["In-Reply-To"] == ALERT_ID
    assert msg["References"].split() == [COVER, ALERT_ID]
    assert msg["Subject"] == f"Re: {SUBJECT}"
    assert msg["X-rcubench-State"] == "fixed"
    body = _words(msg)
    assert body.startswith(f"Regression {reg.pk} is fixed now (was untriaged), moved by "
                           "rcubench's fixed rule.")  # fmt: skip
    assert "Fixed by: 0123456789ab (comparison 9)" in body
    assert "the newest 2 tested heads are within 2% of the baseline" in body
    assert f"https://rcubench.example.org/regressions/{reg.pk}/" in body
    [to_list] = smtp.to(LIST)
    assert to_list.message["In-Reply-To"] == "<rcubench.c17.list@bench.example.org>"
    assert len(smtp.received) == 2


def test_a_move_is_sent_on_commit_through_the_dispatch_door(
    reported, monkeypatch, django_capture_on_commit_callbacks
):
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        regressions.transition(reported.pk, "inactive", RULE, note="10 heads tested since")
        assert sent == []  # not before the commit
    for callback in callbacks:
        callback()
    t = reported.transitions.last()
    assert t is not None
    assert sent == [(NOTIFY_TRANSITION, (t.pk,))]
    # The opening is the report itself: no mail of its own.
    assert services.notify_transition(reported.transitions.first().pk) == []


def test_a_person_on_the_page_is_named_and_opted_out_addresses_are_skipped(reported, smtp):
    OptOut.objects.create(address=LIST)
    boss = UserFactory.create(username="boss")
    MembershipFactory.create(tree=reported.tree, user=boss, role="admin")
    actor = regressions.Actor(via="web", user=boss)
    dup = regressions.open_for_comparison(bisectable_comparison(reported.tree).pk)
    assert dup is not None
    regressions.transition(reported.pk, "duplicate", actor, duplicate_of=dup.pk)
    t = reported.transitions.last()
    assert t is not None
    services.notify_transition(t.pk)
    rows = _deliver(t.pk)
    assert [(r.recipient, r.state) for r in rows] == [(JANE, "sent"), (LIST, "skipped")]
    body = _words(smtp.to(JANE)[0].message)
    assert "is duplicate now (was untriaged), moved by boss on its page." in body
    url = f"https://rcubench.example.org/regressions/{dup.pk}/"
    assert f"Duplicate of regression {dup.pk}: {url}" in body
    assert len(smtp.received) == 1


def test_a_move_by_mail_is_not_told_again_to_its_sender_but_to_the_others(reported, smtp):
    user = UserFactory.create(username="jane", email="Jane.Dev@dev.example.org")
    MembershipFactory.create(tree=reported.tree, user=user)
    row, _ = inbound.receive((FIXTURES / "ack.eml").read_bytes())
    inbound.process(row.pk)
    reported.refresh_from_db()
    assert reported.state == "acknowledged"
    t = reported.transitions.last()
    assert t is not None
    services.notify_transition(t.pk)
    [state] = _deliver(t.pk)
    assert (state.recipient, state.state) == (LIST, "sent")  # Jane has the command's answer
    assert [r.kind for r in Alert.objects.filter(recipient__iexact=JANE).exclude(
        kind="regression")] == ["reply"]  # fmt: skip
    body = _words(smtp.to(LIST)[0].message)
    assert "is acknowledged now (was untriaged), moved by jane by mail." in body


def test_a_command_in_reply_to_a_state_mail_acts_on_the_regression(reported, smtp):
    """A reply to the later move's mail is a reply to the report it is threaded under."""
    regressions.transition(reported.pk, "inactive", RULE, note="10 heads tested since")
    t = reported.transitions.last()
    assert t is not None
    services.notify_transition(t.pk)
    moved = Alert.objects.get(transition=t, recipient=JANE)
    user = UserFactory.create(username="jane", email=JANE)
    MembershipFactory.create(tree=reported.tree, user=user)
    raw = (FIXTURES / "ack.eml").read_bytes().replace(ALERT_ID.encode(), moved.message_id.encode())
    row, _ = inbound.receive(raw)
    inbound.process(row.pk)
    row.refresh_from_db()
    assert row.answers is not None
    assert row.answers.message_id == ALERT_ID
    reported.refresh_from_db()
    assert reported.state == "acknowledged"


def test_auto_fixed_on_a_real_history_of_pushes_is_mailed_under_the_pushs_report(
    smtp, monkeypatch, django_capture_on_commit_callbacks
):
    """Head 8 of a watched branch regressed (+10%) and was reported to its pusher; heads 12
    and 13 are back: the watch tick's rules close it as fixed, and the move goes, once
    committed, through the dispatch door into the report's thread."""
    tree, target = TreeFactory.create(name="rcu"), TargetFactory.create()
    heads = [watched_head(tree, target, n, 6.0 if n < 8 else 6.6,
                          verdict="regression" if n == 8 else "no-meaningful-change")
             for n in range(12)]  # fmt: skip
    reg = regressions.open_for_comparison(heads[8][1].pk)
    assert reg is not None
    report = Alert.objects.create(
        comparison=heads[8][1], kind="regression", recipient=JANE, state="sent",
        subject="[rcubench] rcu/master: writer_duration +10.0% regression at 0123456789ab",
        message_id="<rcubench.c8.pusher@bench.example.org>",
    )  # fmt: skip
    watched_head(tree, target, 12, 6.0, verdict="improvement")
    last, c = watched_head(tree, target, 13, 6.05)
    Push.objects.update(checked_at=timezone.now())
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **kw: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        assert rules.apply_rules() == 1
    [(name, (transition_pk,))] = sent
    assert name == NOTIFY_TRANSITION
    services.notify_transition(transition_pk)
    [row] = _deliver(transition_pk)
    assert (row.recipient, row.state) == (JANE, "sent")
    msg = smtp.to(JANE)[0].message
    assert (msg["In-Reply-To"], msg["Subject"]) == (report.message_id, f"Re: {report.subject}")
    body = _words(msg)
    assert (
        f"Regression {reg.pk} is fixed now (was untriaged), moved by rcubench's fixed rule." in body
    )
    assert f"Fixed by: {last.after[:12]} (comparison {c.pk})" in body
    assert "the newest 2 tested heads are within 2% of the baseline's 6.035" in body
