"""Alert mails through a real SMTP server on loopback: headers, threading, body, one mail per
recipient, retries after 421, a recorded 550, and at most one mail whatever happens."""

import re

import pytest

from tests.support.factories import (
    BuildFactory,
    MembershipFactory,
    MetricVerdictFactory,
    UserFactory,
)
from webapp.alerts import delivery, services
from webapp.alerts.models import Alert, Subscription
from webapp.alerts.tests.conftest import AUTHOR, COVER_ID, PATCH_IDS, make_comparison
from webapp.comparisons.models import Comparison
from webapp.routing import SEND_ALERT
from webapp.webhooks.tests.conftest import HEAD_SUBJECT, pushed_comparison
from workers.celery_app import app

# The task by its stable name, as a worker runs it (webapp never imports workers.tasks:
# the layer contract); the app loads its task modules on demand.
app.loader.import_default_modules()
send_alert_task = app.tasks[SEND_ALERT]

pytestmark = pytest.mark.django_db

LIST = "rcu@vger.example.org"


def _deliver_all(ids: list[int]) -> list[str]:
    return [delivery.deliver(pk) for pk in ids]


def test_a_series_regression_is_a_reply_in_the_series_thread(smtp):
    c = make_comparison()
    ids = services.notify_comparison(c.pk)
    assert _deliver_all(ids) == ["sent"]
    (got,) = smtp.to("dev@example.org")
    msg = got.message
    assert msg["Subject"] == "Re: [PATCH 0/2] rcu: shrink the expedited grace period"
    assert msg["From"] == "rcubench <rcubench@bench.example.org>"
    assert msg["To"] == "dev@example.org"
    assert got.mail_from == "rcubench@bench.example.org"
    # Threading in the headers (the kernel test robot's bug put In-Reply-To in the body).
    assert msg["In-Reply-To"] == COVER_ID
    assert COVER_ID in msg["References"].split()
    alert = Alert.objects.get(pk=ids[0])
    assert msg["Message-ID"] == alert.message_id
    assert re.fullmatch(rf"<rcubench\.c{c.pk}\.[0-9a-f]{{16}}@bench\.example\.org>",
                        msg["Message-ID"])  # fmt: skip
    unsubscribe = re.fullmatch(r"<(https://rcubench\.example\.org/alerts/unsubscribe/\S+/)>",
                               msg["List-Unsubscribe"])  # fmt: skip
    assert unsubscribe
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg["Auto-Submitted"] == "auto-generated"
    body = msg.get_content()
    assert "In-Reply-To" not in body
    assert COVER_ID not in body.split("Kernels:")[0]  # only where the series is named
    assert "rcubench found a regression" in body
    table = body[body.index("metric ") :]
    first, second = (ln for ln in table.splitlines()[2:4])
    assert first.startswith("sync-rcu-latency/writer_duration p50 *")  # primary first, own line
    assert re.match(r"\s+\+9\.90%\s+\[\+8\.10, \+11\.70\]\s+0\.0036\s+24/24\s+regression", second)
    assert "./manage.py compare --tree rcu --base v6.12" in body
    assert f"https://rcubench.example.org/comparisons/{c.pk}/" in body
    assert unsubscribe.group(1) in body
    assert all(len(line) <= 78 or line.strip().startswith("https://")
               for line in body.splitlines()), body  # fmt: skip
    assert alert.state == "sent"
    assert alert.sent_at
    assert alert.smtp_reply.startswith("250")


def test_a_push_regression_has_its_own_subject_and_no_thread(smtp):
    c = make_comparison(series=False)
    Subscription.objects.create(address=LIST)
    _deliver_all(services.notify_comparison(c.pk))
    msg = smtp.to(LIST)[0].message
    sha = c.revision_b.sha[:12]
    assert msg["Subject"] == f"[rcubench] rcu/rcu/next: writer_duration +9.9% regression at {sha}"
    assert msg["In-Reply-To"] is None
    assert msg["References"] is None


def test_a_webhook_regression_names_the_branch_short_sha_and_subject(smtp, client, tmp_path):
    """A comparison made by a real push (/hooks/github/), ended with a regression: the
    subject names the branch, the head's 12-digit sha and its subject line (docs/alerts.md),
    the body both kernels so, each with its full sha once."""
    c = pushed_comparison(client, tmp_path)
    Comparison.objects.filter(pk=c.pk).update(
        state="done", result="ok", verdict="regression",
        build_a=BuildFactory.create(revision=c.revision_a, state="done", result="ok"),
        build_b=BuildFactory.create(revision=c.revision_b, state="done", result="ok"),
    )  # fmt: skip
    MetricVerdictFactory.create(
        comparison=c, metric="writer_duration", statistic="p50", is_primary=True,
        verdict="regression", median_a=6.05, median_b=9.07, shift_pct=49.9, ci_low_pct=41.2,
        ci_high_pct=58.3, p_value=0.0004, p_adjusted=0.0012,
    )  # fmt: skip
    Subscription.objects.create(address=LIST)
    _deliver_all(services.notify_comparison(c.pk))
    msg = smtp.to(LIST)[0].message
    head, base = c.revision_b.ref, c.revision_a.ref
    assert msg["Subject"] == (f"[rcubench] linux-watch/rcu/dev: writer_duration +49.9% "
                              f'regression at {head[:12]} ("{HEAD_SUBJECT}")')  # fmt: skip
    body = msg.get_content()
    (tmp_path / "mail.txt").write_bytes(smtp.to(LIST)[0].data)  # kept by pytest for a look
    kernels = body[body.index("Kernels:") : body.index("  Target:")]
    assert kernels.splitlines() == [
        "Kernels:",
        f'  A: linux-watch {base[:12]} ("v6.12")',
        f"     commit {base}",
        f'  B: linux-watch/rcu/dev {head[:12]} ("rcu: Make synchronize_rcu()',  # 72 columns
        '     faster")',
        f"     commit {head}",
    ]
    words = " ".join(body.split())
    assert f'to kernel B (linux-watch/rcu/dev {head[:12]} ("{HEAD_SUBJECT}"))' in words


def test_one_mail_per_recipient_however_often_the_tasks_run(smtp):
    c = make_comparison()
    user = UserFactory.create(email="maintainer@example.org")
    Subscription.objects.create(user=user, tree=c.revision_a.tree)
    Subscription.objects.create(address=LIST, benchmark="sync-rcu-latency")
    Subscription.objects.create(address=LIST)  # twice subscribed: still one mail
    Subscription.objects.create(address="other-bench@example.org", benchmark="boot-time")
    ids = services.notify_comparison(c.pk)
    assert sorted(services.notify_comparison(c.pk)) == sorted(ids)  # no new rows
    assert len(ids) == 3
    for pk in ids:  # the Celery task's body, each twice
        assert send_alert_task.apply(args=(pk,)).get() == "sent"
        assert send_alert_task.apply(args=(pk,)).get() == "sent"
    assert services.notify_comparison(c.pk) == []  # nothing queued any more
    assert sorted(r.rcpt_tos[0] for r in smtp.received) == sorted(
        ["dev@example.org", "maintainer@example.org", LIST]
    )
    assert all(len(r.rcpt_tos) == 1 for r in smtp.received)
    assert len({r.message["Message-ID"] for r in smtp.received}) == 3


def test_a_421_is_retried_and_the_mail_sent_once(smtp):
    c = make_comparison()
    smtp.replies.append(("RCPT", "421 4.3.2 Service not available, try again later"))
    (pk,) = services.notify_comparison(c.pk)
    with pytest.raises(delivery.TransientMailError, match="421"):
        delivery.deliver(pk)
    alert = Alert.objects.get(pk=pk)
    assert (alert.state, alert.attempts) == ("queued", 1)
    assert "421 4.3.2" in alert.last_error
    assert smtp.received == []
    assert delivery.deliver(pk) == "sent"
    alert.refresh_from_db()
    assert (alert.state, alert.attempts, alert.last_error) == ("sent", 2, "")
    assert len(smtp.received) == 1


def test_a_refused_connection_is_transient(smtp, settings, closed_port):
    c = make_comparison()
    settings.EMAIL_PORT = closed_port
    (pk,) = services.notify_comparison(c.pk)
    with pytest.raises(delivery.TransientMailError, match="connecting to"):
        delivery.deliver(pk)
    assert Alert.objects.get(pk=pk).state == "queued"


def test_retries_end_in_a_recorded_failure(smtp, settings):
    c = make_comparison()
    settings.RCUBENCH_MAIL_MAX_RETRIES = 2
    settings.RCUBENCH_MAIL_RETRY_BACKOFF_SECONDS = 0
    smtp.always = ("RCPT", "451 4.7.1 greylisted")
    (pk,) = services.notify_comparison(c.pk)
    assert send_alert_task.apply(args=(pk,)).get() == "failed"  # eager: retries run inline
    alert = Alert.objects.get(pk=pk)
    assert alert.state == "failed"
    assert alert.attempts == 3
    assert "gave up after 3 attempts" in alert.last_error
    assert "451 4.7.1" in alert.last_error


def test_a_550_is_a_permanent_failure_with_the_servers_reply(smtp):
    c = make_comparison()
    smtp.always = ("DATA", "550 5.7.1 Relaying denied: no such list here")
    (pk,) = services.notify_comparison(c.pk)
    assert send_alert_task.apply(args=(pk,)).get() == "failed"
    alert = Alert.objects.get(pk=pk)
    assert alert.state == "failed"
    assert alert.attempts == 1
    assert alert.smtp_reply == "550 5.7.1 Relaying denied: no such list here"
    assert "550 5.7.1 Relaying denied" in alert.last_error
    assert smtp.received == []


class WorkerKilled(BaseException):
    """What the process's death looks like from inside: nothing after it runs."""


def test_a_worker_killed_after_the_server_took_the_mail_does_not_send_it_again(smtp, monkeypatch):
    c = make_comparison()
    (pk,) = services.notify_comparison(c.pk)
    record = delivery._record

    def die_before_recording_sent(pk: int, state: str, *args: object, **kw: object) -> bool:
        if state == "sent":
            raise WorkerKilled
        return record(pk, state, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(delivery, "_record", die_before_recording_sent)
    with pytest.raises(WorkerKilled):
        delivery.deliver(pk)
    monkeypatch.undo()
    alert = Alert.objects.get(pk=pk)
    assert alert.state == "sending"
    assert len(smtp.received) == 1
    # The broker redelivers the task (acks late): it finds the row in `sending`.
    assert send_alert_task.apply(args=(pk,)).get() == "unknown"
    assert send_alert_task.apply(args=(pk,)).get() == "unknown"
    alert.refresh_from_db()
    assert alert.state == "unknown"
    assert alert.attempts == 1
    assert "may have accepted the mail, so it is not sent again" in alert.last_error
    assert len(smtp.received) == 1


def test_cr_lf_in_the_series_subject_never_reaches_a_header(smtp):
    c = make_comparison(subject="[PATCH 0/2] rcu: fix\r\nBcc: victim@example.org\r\n\r\nbody")
    c.revision_b.series.message_id = f"{COVER_ID}\r\nX-Injected: yes"
    c.revision_b.series.save()
    (pk,) = services.notify_comparison(c.pk)
    assert delivery.deliver(pk) == "sent"
    (got,) = smtp.received
    assert got.rcpt_tos == ["dev@example.org"]
    msg = got.message
    assert msg["Subject"] == "Re: [PATCH 0/2] rcu: fix Bcc: victim@example.org body"
    assert msg["Bcc"] is None
    assert msg["X-Injected"] is None
    assert msg["In-Reply-To"] == COVER_ID
    head = got.data.split(b"\r\n\r\n", 1)[0]
    assert b"\nBcc:" not in head
    assert b"X-Injected" not in head


def test_a_restricted_comparison_mails_only_accounts_that_may_see_it(smtp):
    c = make_comparison(visibility="restricted")
    member = UserFactory.create(email="member@example.org")
    MembershipFactory.create(tree=c.revision_a.tree, user=member)
    outsider = UserFactory.create(email="outsider@example.org")
    for user in (member, outsider):
        Subscription.objects.create(user=user)
    Subscription.objects.create(address=LIST)
    _deliver_all(services.notify_comparison(c.pk))
    # The author has no account here: no mail either.
    assert [r.rcpt_tos for r in smtp.received] == [["member@example.org"]]
    # An author whose address is a member's account does get it.
    author = UserFactory.create(email="dev@example.org")
    MembershipFactory.create(tree=c.revision_a.tree, user=author)
    _deliver_all(services.notify_comparison(c.pk))
    assert sorted(r.rcpt_tos[0] for r in smtp.received) == ["dev@example.org",
                                                            "member@example.org"]  # fmt: skip


def test_an_opted_out_address_gets_nothing_and_its_row_says_so(smtp, client):
    c = make_comparison()
    Subscription.objects.create(address=LIST)
    services.opt_out(AUTHOR)
    ids = services.notify_comparison(c.pk)
    assert [a.recipient for a in Alert.objects.filter(pk__in=ids)] == [LIST]
    # The author is recorded, not dropped: a row in `skipped` with why, never sent.
    skipped = Alert.objects.get(comparison=c, recipient="dev@example.org")
    assert (skipped.state, skipped.attempts) == ("skipped", 0)
    assert skipped.reason == "as an author of the patch series"
    assert skipped.last_error == "the address opted out of all rcubench mail (the unsubscribe link)"
    assert services.notify_comparison(c.pk) == ids  # again: no second row, nothing sent
    assert Alert.objects.filter(comparison=c).count() == 2
    services.opt_out(LIST.upper())  # after it was queued: checked again at sending
    assert _deliver_all(ids) == ["skipped"]
    assert smtp.received == []
    # Both on the comparison's mail table, as its tree's admins see it.
    admin = UserFactory.create()
    MembershipFactory.create(tree=c.revision_a.tree, user=admin, role="admin")
    client.force_login(admin)
    html = client.get(f"/comparisons/{c.pk}/").content.decode()
    rows = re.findall(r'<tr data-state="(\w+)"><td class="mono">([^<]+)</td>', html)
    assert sorted(rows) == [("skipped", "dev@example.org"), ("skipped", LIST)]
    assert "opted out of all rcubench mail (the unsubscribe link)" in html
    assert "opted out before the mail was sent" in html


def test_an_undone_opt_out_gets_mail_again(smtp):
    user = UserFactory.create(email="Maintainer@Example.org")
    services.opt_out("maintainer@example.org")
    assert services.undo_opt_out(user)
    assert not services.undo_opt_out(user)  # nothing left to undo
    c = make_comparison()
    Subscription.objects.create(user=user)
    assert sorted(_deliver_all(services.notify_comparison(c.pk))) == ["sent", "sent"]
    assert sorted(r.rcpt_tos[0] for r in smtp.received) == ["Maintainer@example.org",
                                                            "dev@example.org"]  # fmt: skip


def test_improvements_and_other_verdicts_only_on_request(smtp):
    c = make_comparison(verdict="improvement")
    Subscription.objects.create(address=LIST)  # regressions only (the default)
    assert services.notify_comparison(c.pk) == []
    Subscription.objects.create(address="fans@example.org", kinds=["improvement"])
    (pk,) = services.notify_comparison(c.pk)  # authors are mailed regressions only
    assert Alert.objects.get(pk=pk).recipient == "fans@example.org"
    small = make_comparison(verdict="significant-but-small", series=False, tree_name="other")
    assert services.notify_comparison(small.pk) == []


def test_references_name_the_cover_letter_and_the_reply_is_stable(smtp):
    c = make_comparison()
    (pk,) = services.notify_comparison(c.pk)
    alert = Alert.objects.get(pk=pk)
    assert alert.in_reply_to == COVER_ID
    assert PATCH_IDS[0] not in alert.message_id
    assert alert.message_id == services.message_id(f"c{c.pk}", "regression", "dev@example.org")


def test_alerts_are_listed_for_the_trees_admins_and_staff_only(smtp):
    c = make_comparison()
    services.notify_comparison(c.pk)
    admin = UserFactory.create()
    MembershipFactory.create(tree=c.revision_a.tree, user=admin, role="admin")
    submitter = UserFactory.create()
    MembershipFactory.create(tree=c.revision_a.tree, user=submitter)
    staff = UserFactory.create(is_staff=True)
    listed = services.alerts_for_page(admin, c)
    assert listed is not None
    assert [a.recipient for a in listed] == ["dev@example.org"]
    assert services.alerts_for_page(staff, c) is not None
    assert services.alerts_for_page(submitter, c) is None


def test_a_queued_alert_whose_message_was_lost_is_sent_again(
    smtp, django_capture_on_commit_callbacks
):
    """The broker lost the task (never tried, or a retry past the longest backoff): the
    beat's resend_lost sends it again; a fresh one and one in its backoff are left alone."""
    from datetime import timedelta

    from django.utils import timezone

    c = make_comparison()
    now = timezone.now()

    def alert(n: int, **kw):
        return Alert.objects.create(
            comparison=c, kind="regression", recipient=f"r{n}@example.org", subject="s",
            message_id=f"<m{n}@x>", **kw,
        )  # fmt: skip

    never_tried = alert(1)
    fresh = alert(2)
    backing_off = alert(3, attempts=1, sending_at=now - timedelta(minutes=30))
    lost_retry = alert(4, attempts=2, sending_at=now - timedelta(hours=3))
    sent = alert(5, state="sent")
    Alert.objects.filter(pk__in=[never_tried.pk, backing_off.pk, lost_retry.pk, sent.pk]).update(
        created_at=now - timedelta(hours=4)
    )
    assert fresh.pk  # created now: its task is on its way
    with django_capture_on_commit_callbacks() as sent_tasks:
        assert delivery.resend_lost() == 2
    assert len(sent_tasks) == 2
    assert delivery.deliver(never_tried.pk) == "sent"
    assert delivery.deliver(lost_retry.pk) == "sent"
    assert len(smtp.received) == 2
