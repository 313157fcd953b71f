"""The mail of a bisection's confirmed culprit: to its author and to whom the comparison's
alert went, one row each, in reply to that alert, and through a real SMTP server."""

import re

import pytest
from django.db import IntegrityError, transaction

from tests.support.factories import ComparisonFactory, MembershipFactory, UserFactory
from webapp.alerts import bisection, delivery, services
from webapp.alerts.models import Alert, Subscription
from webapp.alerts.tests.conftest import AUTHOR, COVER_ID, PATCH_IDS, make_comparison
from webapp.bisections.models import Bisection, Step
from webapp.comparisons.models import Comparison
from webapp.trees.models import TreeMembership

pytestmark = pytest.mark.django_db

LIST = "rcu@vger.example.org"
CULPRIT_AUTHOR = "Paul E. McKenney <paulmck@example.org>"
SHAS = [f"{n:x}" * 40 for n in range(10, 14)]  # four first-parent commits from A to B
SUMMARY = ('cccccccccccc ("rcu: commit 3"): confirmed: the re-run against its parent (CI '
           "[+7.12, +10.3] past half the effect (+4.95)) and the revert from head (CI "
           "[-9.9, -6.64] past half the effect (-4.95)).")  # fmt: skip


def _bisection(c: Comparison, *, series: bool = False, author: str = CULPRIT_AUTHOR,
               outcome: str = Bisection.Outcome.CULPRIT) -> Bisection:  # fmt: skip
    """A bisection of the comparison's writer_duration p50 that found position 3 of 4."""
    if series:
        ids = [*PATCH_IDS, *(f"<20261120.0001-{i}-dev@example.org>" for i in (3, 4))]
        commits = [{"sha": "", "subject": f"rcu: step {i}", "author": author if i == 3 else
                    AUTHOR, "link": ids[i - 1]} for i in range(1, 5)]  # fmt: skip
    else:
        commits = [{"sha": SHAS[i - 1], "subject": f"rcu: commit {i}", "author": author if i == 3
                    else "Other <other@example.org>", "link": ""} for i in range(1, 5)]  # fmt: skip
    b = Bisection.objects.create(
        comparison=c, kind="series" if series else "range", benchmark="sync-rcu-latency",
        metric="writer_duration", statistic="p50", unit="%", effect=9.9, effect_low=8.1,
        effect_high=11.7, original_verdict="regression", commits=commits, state="done",
        result="ok", outcome=outcome, first=3, last=3, summary=SUMMARY, trigger="cli",
    )  # fmt: skip
    shifts = [("bisect", 2, "like-a", 0.41, -0.62, 1.37),
              ("bisect", 3, "like-b", 9.12, 7.8, 10.51),
              ("fresh", 3, "like-b", 8.75, 7.12, 10.3),
              ("revert", 3, "like-b", -8.31, -9.9, -6.64)]  # fmt: skip
    for kind, position, answer, shift, low, high in shifts:
        step = ComparisonFactory.create(revision_a=c.revision_a, target=c.target,
                                        trigger="bisection", visibility=c.visibility)  # fmt: skip
        Step.objects.create(bisection=b, kind=kind, position=position, comparison=step,
                            answer=answer, shift=shift, ci_low=low, ci_high=high)  # fmt: skip
    return b


def _by_recipient(ids: list[int]) -> dict[str, Alert]:
    return {a.recipient: a for a in Alert.objects.filter(pk__in=ids)}


def test_the_culprit_is_a_reply_to_each_recipients_alert():
    c = make_comparison()  # a series: its alert replies to the cover letter
    Subscription.objects.create(address=LIST)
    original = _by_recipient(services.notify_comparison(c.pk))
    assert sorted(original) == ["dev@example.org", LIST]
    b = _bisection(c, series=True, author=AUTHOR)  # the series' author wrote the culprit
    rows = _by_recipient(bisection.notify_bisection(b.pk))
    assert sorted(rows) == ["dev@example.org", LIST]  # the author once, for their patch
    for address, row in rows.items():
        parent = original[address]
        assert row.in_reply_to == parent.message_id
        assert row.references.split() == [COVER_ID, parent.message_id]
        assert row.subject == "Re: [PATCH 0/2] rcu: shrink the expedited grace period"
        assert row.message_id == services.message_id(f"b{b.pk}", "regression", address)
        assert (row.kind, row.state, row.comparison_id) == ("regression", "queued", None)
    assert rows["dev@example.org"].reason == (
        "as the author of the patch this bisection found to cause the regression"
    )
    assert rows[LIST].reason == original[LIST].reason
    body = services.render(rows[LIST]).get_content()
    assert '  patch 3/4 ("rcu: step 3")\n' in body
    assert "  https://lore.kernel.org/r/20261120.0001-3-dev@example.org\n" in body


def test_an_address_without_the_alert_replies_to_the_id_it_would_have_had():
    c = make_comparison(series=False)  # a push range: its alert starts a thread
    b = _bisection(c)
    (pk,) = bisection.notify_bisection(b.pk)  # the author only: no subscriber, no alert
    row = Alert.objects.get(pk=pk)
    would_be = services.message_id(f"c{c.pk}", "regression", "paulmck@example.org")
    assert (row.recipient, row.in_reply_to, row.references) == (
        "paulmck@example.org", would_be, would_be,
    )  # fmt: skip
    sha = c.revision_b.sha[:12]
    assert row.subject == f"Re: [rcubench] rcu/rcu/next: writer_duration +9.9% regression at {sha}"


def test_opted_out_addresses_are_skipped_and_a_second_call_queues_nothing():
    c = make_comparison(series=False)
    Subscription.objects.create(address=LIST)
    Subscription.objects.create(address="gone@example.org")
    services.opt_out("gone@example.org")
    b = _bisection(c)
    ids = bisection.notify_bisection(b.pk)
    assert sorted(_by_recipient(ids)) == ["paulmck@example.org", LIST]
    skipped = Alert.objects.get(bisection=b, recipient="gone@example.org")
    assert (skipped.state, skipped.last_error) == ("skipped", services.OPTED_OUT)
    assert sorted(bisection.notify_bisection(b.pk)) == sorted(ids)  # the same rows, no new one
    assert Alert.objects.filter(bisection=b).count() == 3
    Alert.objects.filter(pk__in=ids).update(state="sent")
    assert bisection.notify_bisection(b.pk) == []  # nothing queued any more
    assert Alert.objects.filter(bisection=b).count() == 3


def test_a_culprit_not_confirmed_is_not_mailed():
    c = make_comparison(series=False)
    Subscription.objects.create(address=LIST)
    b = _bisection(c, outcome=Bisection.Outcome.UNCONFIRMED)
    assert bisection.notify_bisection(b.pk) == []
    assert not Alert.objects.filter(bisection=b).exists()


def test_a_restricted_comparison_mails_no_outside_author(smtp):
    c = make_comparison(series=False, visibility="restricted")
    member = UserFactory.create(username="member", email="member@example.org")
    MembershipFactory.create(tree=c.revision_a.tree, user=member)
    Subscription.objects.create(user=member)
    Subscription.objects.create(address=LIST)  # a list never gets a restricted comparison
    b = _bisection(c)  # its author has no account here
    assert list(_by_recipient(bisection.notify_bisection(b.pk))) == ["member@example.org"]
    assert not Alert.objects.filter(bisection=b, recipient="paulmck@example.org").exists()
    # An author whose address is a member's account gets it; checked again at sending.
    insider = UserFactory.create(username="paul", email="paulmck@example.org")
    MembershipFactory.create(tree=c.revision_a.tree, user=insider)
    again = _by_recipient(bisection.notify_bisection(b.pk))
    assert sorted(again) == ["member@example.org", "paulmck@example.org"]
    TreeMembership.objects.filter(user=insider).delete()
    assert delivery.deliver(again["paulmck@example.org"].pk) == "skipped"
    assert delivery.deliver(again["member@example.org"].pk) == "sent"
    assert [r.rcpt_tos for r in smtp.received] == [["member@example.org"]]


def test_the_culprit_mail_arrives_in_the_thread_of_the_alert(smtp):
    """Through a real SMTP server: the regression mail, then the culprit's as its reply."""
    c = make_comparison(series=False)
    Subscription.objects.create(address=LIST)
    assert [delivery.deliver(pk) for pk in services.notify_comparison(c.pk)] == ["sent"]
    (alert_mail,) = smtp.to(LIST)
    b = _bisection(c)
    ids = bisection.notify_bisection(b.pk)
    assert sorted(delivery.deliver(pk) for pk in ids) == ["sent", "sent"]
    culprit = smtp.to(LIST)[1].message
    parent = alert_mail.message["Message-ID"]
    assert culprit["In-Reply-To"] == parent
    assert culprit["References"] == parent
    assert culprit["Subject"] == f"Re: {alert_mail.message['Subject']}"
    assert re.fullmatch(rf"<rcubench\.b{b.pk}\.[0-9a-f]{{16}}@bench\.example\.org>",
                        culprit["Message-ID"])  # fmt: skip
    assert (culprit["X-rcubench-Bisection"], culprit["X-rcubench-Culprit"]) == (str(b.pk), SHAS[2])
    assert culprit["List-Unsubscribe"].startswith("<https://rcubench.example.org/alerts/unsub")
    body = culprit.get_content().replace("\r\n", "\n")  # as sent: SMTP's line endings
    assert f'  {SHAS[2][:12]} ("rcu: commit 3")\n  Author: {CULPRIT_AUTHOR}\n' in body
    assert f"  commit {SHAS[2]}\n" in body
    assert SUMMARY[:40] in body
    for step in b.steps.all():
        assert f"          https://rcubench.example.org/comparisons/{step.comparison_id}/\n" in body
    assert f"  https://rcubench.example.org/bisections/{b.pk}/\n" in body
    assert f"  https://rcubench.example.org/comparisons/{c.pk}/\n" in body
    assert "because this address is subscribed to regression alerts of every tree" in " ".join(
        body.split()
    )
    # The author, who got no alert, is threaded under the id that alert would have had.
    author_mail = smtp.to("paulmck@example.org")[0].message
    assert author_mail["In-Reply-To"] == services.message_id(
        f"c{c.pk}", "regression", "paulmck@example.org"
    )
    assert all(len(line) <= 78 or line.strip().startswith("https://")
               for line in body.splitlines()), body  # fmt: skip


def test_a_row_is_about_exactly_one_event():
    c = make_comparison(series=False)
    b = _bisection(c)
    fields = {"kind": "regression", "recipient": LIST, "subject": "s"}
    for n, about in enumerate(({}, {"comparison": c, "bisection": b})):
        with pytest.raises(IntegrityError, match="alert_about_one_thing"), transaction.atomic():
            Alert.objects.create(message_id=f"<m{n}@x>", **about, **fields)
    Alert.objects.create(message_id="<ok@x>", bisection=b, **fields)
