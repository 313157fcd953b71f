"""Who gets an alert mail, and its delivery at most once (docs/alerts.md).

notify_comparison / notify_change_point (and, for a bisection's confirmed culprit,
bisection.notify_bisection) decide the recipients and create one Alert row per recipient
(the unique key makes a second call a no-op), then send one task per queued row.
delivery.deliver() sends one row's mail: the row goes queued -> sending (committed before the SMTP
transaction starts) -> sent | failed | unknown. A task that finds its row in `sending`
knows an earlier attempt died mid-transaction, after which the server may or may not hold
the mail; it records `unknown` and sends nothing. A lost mail is the price of never sending
one twice: a reader who gets the same regression report twice in a thread learns to
ignore the sender.
"""

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import parseaddr

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from webapp import access, dispatch, logs
from webapp.access import AnyUser
from webapp.alerts import messages
from webapp.alerts.models import Alert, OptOut, Subscription
from webapp.bisections.models import Bisection
from webapp.comparisons.console_diff import ConsoleDifference, console_differences
from webapp.comparisons.models import PART_TRIGGERS, Comparison, ComparisonState
from webapp.comparisons.reproducer import public_url, reproducer
from webapp.comparisons.summary import header, verdict_rows
from webapp.regressions.models import Regression, Transition, Via
from webapp.states import Result
from webapp.sweeps.models import Sweep
from webapp.sweeps.summary import mail_facts
from webapp.text import storable
from webapp.trees.models import PatchSeries, Tree
from webapp.watch.models import ChangePoint

log = logs.get(__name__)

REGRESSION_VERDICTS = ("regression", "reliability-regression")
UNSUBSCRIBE_SALT = "rcubench.alerts.unsubscribe"
State = Alert.State


# --- addresses and the unsubscribe link ---------------------------------------------------


def normalise(address: str) -> str:
    """The bare address of `address` ("Name <a@b>" too), its domain lowercased; "" when it
    is not a valid address."""
    addr = parseaddr(messages.header_text(address, 998))[1]
    local, _, domain = addr.rpartition("@")
    addr = f"{local}@{domain.lower()}"
    try:
        validate_email(addr)
    except ValidationError:
        return ""
    return addr


def unsubscribe_token(address: str) -> str:
    """A signed token naming the address (django.core.signing: a tampered one fails). It
    does not expire: a link in an old mail must still stop the mail."""
    return signing.Signer(salt=UNSUBSCRIBE_SALT).sign_object(normalise(address))


def address_of_token(token: str) -> str:
    """The address a token names; signing.BadSignature for a tampered or foreign one."""
    address = signing.Signer(salt=UNSUBSCRIBE_SALT).unsign_object(token)
    if not isinstance(address, str) or not normalise(address):
        raise signing.BadSignature("no address in the token")
    return address


def unsubscribe_url(address: str) -> str:
    return public_url() + reverse("alerts:unsubscribe", args=[unsubscribe_token(address)])


def opt_out(address: str) -> OptOut:
    """Record that `address` gets no more alert mail (idempotent)."""
    address = normalise(address)
    if not address:
        raise ValueError("not an email address")
    existing = OptOut.objects.filter(address__iexact=address).first()
    if existing is not None:
        return existing
    opted, _ = OptOut.objects.get_or_create(address=address)
    log.info("alert opt-out", address_hash=_hash(address))
    return opted


def opted_out(address: str) -> bool:
    return OptOut.objects.filter(address__iexact=address).exists()


def opt_out_of(user: User) -> OptOut | None:
    """The opt-out of the user's own address, None when it gets mail (or there is none)."""
    if not user.email:
        return None
    return OptOut.objects.filter(address__iexact=user.email).first()


def undo_opt_out(user: User) -> bool:
    """Mail the user's own address again (its owner's choice, from the subscriptions page;
    only an operator sets an account's address). False when it had not opted out."""
    if not user.email:
        return False
    deleted, _ = OptOut.objects.filter(address__iexact=user.email).delete()
    if deleted:
        log.info("alert opt-out undone", user=user.pk, address_hash=_hash(user.email))
    return bool(deleted)


# --- recipients ---------------------------------------------------------------------------


OPTED_OUT = "the address opted out of all rcubench mail (the unsubscribe link)"


@dataclass(frozen=True)
class Recipient:
    address: str
    reason: str  # completes "You get this mail ..."
    verified_user: bool = False  # an account that may see the comparison: no more checks
    skipped: str = ""  # why it gets no mail though it is a recipient (its row says so)


def alert_kind_of(c: Comparison, console: Sequence[ConsoleDifference] | None = None) -> str | None:
    """The mail a comparison's end asks for (None: none). `console`: its console
    differences where the caller has them already, else read here when needed."""
    if c.state != ComparisonState.DONE or c.result != Result.OK:
        return None
    if c.trigger in PART_TRIGGERS:  # its bisection or sweep mails what it finds
        return None
    if c.verdict in REGRESSION_VERDICTS:
        return Alert.Kind.REGRESSION
    if c.verdict == "improvement":
        return Alert.Kind.IMPROVEMENT
    diffs = console_differences(c) if console is None else console
    if any(d.finding and d.side == "B" for d in diffs):
        return Alert.Kind.REGRESSION  # B's kernel reliably complains where A's never does
    return None


def _subscriptions(tree_id: int, benchmarks: list[str], kind: str) -> list[Subscription]:
    return list(
        Subscription.objects.filter(
            Q(tree__isnull=True) | Q(tree_id=tree_id),
            Q(benchmark="") | Q(benchmark__in=benchmarks),
            kinds__contains=[kind],
        ).select_related("user", "tree")
    )


def _what(s: Subscription, kind: str) -> str:
    where = s.tree.name if s.tree else "every tree"
    return f"{kind} alerts of {where}" + (f", benchmark {s.benchmark}" if s.benchmark else "")


def member_may_see(address: str, c: Comparison) -> bool:
    """Whether an active account with this address may see the comparison."""
    users = User.objects.filter(email__iexact=address, is_active=True)
    return any(access.can_view(u, c) for u in users)


def series_authors(series: PatchSeries) -> list[str]:
    """The series' author and its patches' authors, as their From lines give them."""
    return [series.author, *series.patches.values_list("author", flat=True)]


def comparison_recipients(c: Comparison, kind: str) -> list[Recipient]:
    """Subscribers (users and free addresses), and for a regression the series' authors
    and the pusher; a restricted comparison only to accounts that may see it. Once per
    address, with the first reason found; an opted-out address is marked `skipped` (it
    gets a row that says so, and no mail)."""
    found: list[Recipient] = []
    for s in _subscriptions(c.revision_a.tree_id, list(c.benchmarks), kind):
        if s.user is not None:
            if s.user.is_active and s.user.email and access.can_view(s.user, c):
                found.append(Recipient(s.user.email, f"because you subscribed to "
                                       f"{_what(s, kind)}", verified_user=True))  # fmt: skip
        else:
            found.append(Recipient(s.address, f"because this address is subscribed to "
                                   f"{_what(s, kind)}"))  # fmt: skip
    if kind == Alert.Kind.REGRESSION:
        series = c.revision_b.series
        if series is not None:
            authors = series_authors(series)
            found += [Recipient(a, "as an author of the patch series") for a in authors if a]
        for push in c.pushes.all():
            pusher = getattr(push, "pusher_email", "")
            if pusher:
                found.append(Recipient(pusher, f"as the pusher of {push.after[:12]}"))
    restricted = c.visibility == Comparison.Visibility.RESTRICTED
    out: dict[str, Recipient] = {}
    for r in found:
        address = normalise(r.address)
        if not address or address.lower() in out:
            continue
        if restricted and not r.verified_user and not member_may_see(address, c):
            continue  # lists, authors and pushers without an account that may see it
        skipped = OPTED_OUT if opted_out(address) else ""
        out[address.lower()] = Recipient(address, r.reason, r.verified_user, skipped)
    return list(out.values())


# --- deciding and queueing ----------------------------------------------------------------


def _domain() -> str:
    domain = re.sub(r"[^A-Za-z0-9.-]", "", str(settings.RCUBENCH_MAIL_DOMAIN))
    return domain or "localhost"


def _hash(address: str) -> str:
    return hashlib.sha256(address.lower().encode()).hexdigest()[:16]


def message_id(prefix: str, kind: str, address: str) -> str:
    """rcubench's own Message-ID: stable per comparison (or change point), kind and
    recipient, so a resent mail could never start a second thread either."""
    return f"<rcubench.{prefix}.{_hash(f'{kind}:{address}')}@{_domain()}>"


def notify_comparison(comparison_id: int) -> list[int]:
    """For a comparison that ended ok with a verdict someone asked mail for: create its
    Alert rows (once per recipient, however often this runs) and send one task per queued
    row. Returns the queued rows' ids."""
    c = Comparison.objects.select_related(
        "revision_a__tree", "revision_b__tree", "revision_b__series", "target"
    ).get(pk=comparison_id)
    console = console_differences(c)  # read once: the kind and the subject need it
    kind = alert_kind_of(c, console)
    if kind is None:
        return []
    recipients = comparison_recipients(c, kind)
    series = c.revision_b.series
    parent = messages.message_ids(series.message_id)[:1] if series else []
    subject = messages.comparison_subject(
        header(c),
        verdict_rows(c),
        kind,
        series.subject if series else None,
        console,
    )
    rows = [
        Alert(comparison=c, kind=kind, recipient=r.address, reason=r.reason[:200],
              subject=storable(subject), message_id=message_id(f"c{c.pk}", kind, r.address),
              in_reply_to=parent[0] if parent else "", references=" ".join(parent),
              **skipped_fields(r))
        for r in recipients
    ]  # fmt: skip
    return queue_alerts(rows, Alert.objects.filter(comparison=c, kind=kind), comparison=c.pk)


def notify_change_point(change_point_id: int) -> list[int]:
    """A change point in a watched branch: mail the tree's subscribers who asked for change
    points (improvements only to those who also asked for improvements) and are of its
    audience (ChangePoint.Audience): one found over all the tree's comparisons goes only
    to accounts that see them all (its members and staff), one found over its public
    comparisons to everyone else who sees the tree. Each subscriber gets one of the two."""
    cp = ChangePoint.objects.select_related("tree", "push", "target").get(pk=change_point_id)
    kind = Alert.Kind.CHANGE_POINT
    for_members = cp.audience == ChangePoint.Audience.MEMBERS
    out: dict[str, Recipient] = {}
    for s in _subscriptions(cp.tree_id, [cp.benchmark], kind):
        if not cp.regression and Alert.Kind.IMPROVEMENT not in s.kinds:
            continue
        if s.user is not None:
            if not (s.user.is_active and s.user.email and _sees_tree(s.user, cp)):
                continue
            if access.sees_all_of(s.user, cp.tree) != for_members:
                continue
            r = Recipient(s.user.email, f"because you subscribed to {_what(s, kind)}", True)
        else:
            r = Recipient(s.address, f"because this address is subscribed to {_what(s, kind)}")
        address = normalise(r.address)
        if not address or address.lower() in out:
            continue
        if not r.verified_user and not _may_get(address, cp):
            continue
        skipped = OPTED_OUT if opted_out(address) else ""
        out[address.lower()] = Recipient(address, r.reason, r.verified_user, skipped)
    subject = messages.change_point_subject(_change_point_facts(cp))
    rows = [
        Alert(change_point=cp, kind=kind, recipient=r.address, reason=r.reason[:200],
              subject=storable(subject), message_id=message_id(f"cp{cp.pk}", kind, r.address),
              **skipped_fields(r))
        for r in out.values()
    ]  # fmt: skip
    return queue_alerts(rows, Alert.objects.filter(change_point=cp, kind=kind), change_point=cp.pk)


def report_alerts(reg: Regression) -> QuerySet[Alert]:
    """The mails that reported the regression and were sent: its comparison's regression
    alerts, or its change point's."""
    if reg.comparison_id is not None:
        rows = Alert.objects.filter(comparison_id=reg.comparison_id, kind=Alert.Kind.REGRESSION)
    else:
        rows = Alert.objects.filter(change_point_id=reg.change_point_id,
                                    kind=Alert.Kind.CHANGE_POINT)  # fmt: skip
    return rows.filter(state=State.SENT).order_by("pk")


def notify_transition(transition_id: int) -> list[int]:
    """A reported regression moved (not its opening): one short mail to each address its
    report was sent to, in that mail's thread (In-Reply-To it, References its chain, its
    subject with Re:). The sender of the mail command that moved it is not told again (its
    answer said so). Once per transition and address, however often this runs."""
    t = Transition.objects.select_related("regression").get(pk=transition_id)
    if not t.from_state:  # the opening: its report is the mail
        return []
    commander = normalise(t.by_address).lower() if t.via == Via.MAIL else ""
    kind = Alert.Kind.STATE
    rows: dict[str, Alert] = {}
    for report in report_alerts(t.regression):
        address = normalise(report.recipient)
        if not address or address.lower() in rows or address.lower() == commander:
            continue
        refs = messages.message_ids(*report.references.split(), report.message_id)
        skipped = OPTED_OUT if opted_out(address) else ""
        rows[address.lower()] = Alert(
            transition=t, kind=kind, recipient=address,
            reason="because rcubench sent you the report of this regression",
            subject=storable(messages.reply_subject(report.subject)),
            message_id=message_id(f"t{t.pk}", kind, address),
            in_reply_to=report.message_id, references=" ".join(refs[-20:]),
            **skipped_fields(Recipient(address, "", skipped=skipped)),
        )  # fmt: skip
    existing = Alert.objects.filter(transition=t, kind=kind)
    return queue_alerts(list(rows.values()), existing, transition=t.pk)


def _sees_tree(user: AnyUser, cp: ChangePoint) -> bool:
    return access.visible_trees(user).filter(pk=cp.tree_id).exists()


def _may_get(address: str, cp: ChangePoint) -> bool:
    """Whether a free address (a list, or an account's address) is of the change point's
    audience: for the members' version, an active account with this address that sees all
    the tree's comparisons; for the public one, no such account (it gets the members'
    version) and a public tree."""
    users = User.objects.filter(email__iexact=address, is_active=True)
    insider = any(access.sees_all_of(u, cp.tree) for u in users)
    if cp.audience == ChangePoint.Audience.MEMBERS:
        return insider
    return cp.tree.public and not insider


def skipped_fields(r: Recipient) -> dict[str, str]:
    """A skipped recipient's row fields: recorded, never sent (the comparison's mail table
    shows whom and why)."""
    return {"state": State.SKIPPED, "last_error": r.skipped} if r.skipped else {}


def queue_alerts(rows: list[Alert], existing: QuerySet[Alert], **ids: int) -> list[int]:
    with transaction.atomic():
        # The unique key (the comparison, change point or bisection, kind, recipient) drops
        # rows made by an earlier call: each recipient has one row, whatever the number of
        # calls.
        Alert.objects.bulk_create(rows, ignore_conflicts=True)
        skipped = [r.recipient for r in rows if r.state == State.SKIPPED]
        recorded = existing.filter(state=State.SKIPPED, recipient__in=skipped)
        for pk, reason in recorded.values_list("pk", "last_error"):
            log.info("alert state", alert=pk, **ids, state=State.SKIPPED, reason=reason)
        queued = list(existing.filter(state=State.QUEUED).values_list("pk", flat=True))
        for pk in queued:
            log.info("alert state", alert=pk, **ids, state=State.QUEUED)
            dispatch.send_alert(pk)
    return queued


# --- the mail -----------------------------------------------------------------------------


def _links(address: str) -> messages.Links:
    return messages.Links(
        report="",
        unsubscribe=unsubscribe_url(address),
        subscriptions=public_url() + reverse("alerts:subscriptions"),
    )


def report_url(comparison_id: int) -> str:
    return public_url() + reverse("reports:comparison", args=[comparison_id])


def bisection_url(bisection_id: int) -> str:
    # No page route to reverse yet: the path the bisection's page is to have.
    return public_url() + f"/bisections/{bisection_id}/"


def sweep_url(sweep_id: int) -> str:
    return public_url() + reverse("reports:sweep", args=[sweep_id])


def _culprit_facts(b: Bisection) -> messages.CulpritFacts:
    position = b.first or 0
    commit = b.commits[position - 1]
    steps = [
        messages.StepFacts(
            position=s.position, kind=s.kind, answer=s.answer, shift=s.shift,
            ci_low=s.ci_low, ci_high=s.ci_high,
            comparison_url=report_url(s.comparison_id) if s.comparison_id else "",
        )
        for s in b.steps.order_by("created_at", "pk")
    ]  # fmt: skip
    return messages.CulpritFacts(
        bisection_id=b.pk, comparison_id=b.comparison_id, benchmark=b.benchmark,
        metric=b.metric, statistic=b.statistic, unit=b.unit, verdict=b.original_verdict,
        effect=b.effect, effect_low=b.effect_low, effect_high=b.effect_high,
        position=position, n=b.n, sha=commit.get("sha", ""), subject=commit.get("subject", ""),
        author=commit.get("author", ""),
        message_id=commit.get("link", "") if b.kind == Bisection.Kind.SERIES else "",
        summary=b.summary, steps=steps, comparison_url=report_url(b.comparison_id),
    )  # fmt: skip


def _change_point_facts(cp: ChangePoint) -> messages.ChangePointFacts:
    return messages.ChangePointFacts(
        tree=cp.tree.name, branch=cp.branch, benchmark=cp.benchmark, metric=cp.metric,
        target=cp.target.name, sha=cp.push.after, before_median=cp.before_median,
        after_median=cp.after_median, change_pct=cp.change_pct, regression=cp.regression,
        history_url=public_url() + reverse("watch:tree-history", args=[cp.tree.name]),
    )  # fmt: skip


def regression_url(regression_id: int) -> str:
    return public_url() + reverse("regressions:regression", args=[regression_id])


DOORS: dict[str, str] = {Via.WEB: "on its page", Via.API: "through the API", Via.MAIL: "by mail",
         Via.CLI: "by an operator's command"}  # fmt: skip


def _state_facts(t: Transition) -> messages.StateFacts:
    reg = t.regression
    if t.via == Via.RULE:
        by = f"rcubench's {t.to_state} rule"  # its note says what it read
    else:
        who = t.by.get_username() if t.by is not None else t.by_address or "someone"
        by = f"{who} {DOORS.get(t.via, t.via)}"
    dup = reg.duplicate_of_id if t.to_state == Regression.State.DUPLICATE else None
    return messages.StateFacts(
        regression_id=reg.pk, was=t.from_state, now=t.to_state, by=by,
        note=t.note,
        fixed_by=reg.fixed_by if t.to_state == Regression.State.FIXED else "",
        duplicate_of=f"regression {dup}: {regression_url(dup)}" if dup else "",
        regression_url=regression_url(reg.pk),
    )  # fmt: skip


# The requested_by tags of a mail test's two comparisons (webapp/alerts/inbound.py); the
# first is the one a Tested-by rides on.
TEST_A = "test: A against B'"
TEST_B = "test: B against B'"
BACK = ("no-meaningful-change", "significant-but-small", "improvement")


def tested_by(c: Comparison) -> str | None:
    """The Tested-by line a test's A-against-B' comparison earns: it ended ok and every
    primary statistic is within the threshold of A (no meaningful change, significant but
    smaller than the threshold, or better)."""
    if c.trigger != Comparison.Trigger.MAIL or not c.requested_by.startswith(TEST_A):
        return None
    if c.state != "done" or c.result != "ok":
        return None
    primaries = list(c.verdicts.filter(is_primary=True).values_list("verdict", flat=True))
    if not primaries or any(v not in BACK for v in primaries):
        return None
    return f"Tested-by: {messages.header_text(str(settings.RCUBENCH_MAIL_FROM))}"


BACK = ("no-meaningful-change", "significant-but-small", "improvement")


def render(alert: Alert) -> EmailMessage:
    """The alert's mail, built from the database as it is now."""
    links = _links(alert.recipient)
    if alert.comparison_id is not None:
        c = Comparison.objects.select_related(
            "revision_a__tree", "revision_b__tree", "revision_b__series", "target",
            "build_a", "build_b", "submitted_by",
        ).get(pk=alert.comparison_id)  # fmt: skip
        links = messages.Links(report_url(c.pk), links.unsubscribe, links.subscriptions)
        # A mail command's comparison tells its own verdict, whatever it is, and a test
        # whose patch brought B back gets the Tested-by line first.
        kind = "" if alert.kind == Alert.Kind.RESULT else alert.kind
        if kind == Alert.Kind.REGRESSION and c.verdict not in REGRESSION_VERDICTS:
            kind = ""  # mailed for a console finding: the metrics' verdict is told as it is
        body = messages.comparison_body(header(c), verdict_rows(c), kind, reproducer(c),
                                        links, alert.reason, diagnosis=c.diagnosis_per_side,
                                        console=console_differences(c))  # fmt: skip
        if alert.kind == Alert.Kind.RESULT and (line := tested_by(c)):
            body = f"{line}\n\n{body}"
        extra = {"X-rcubench-Comparison": str(c.pk), "X-rcubench-Verdict": c.verdict}
    elif alert.bisection_id is not None:
        b = Bisection.objects.get(pk=alert.bisection_id)
        facts = _culprit_facts(b)
        links = messages.Links(bisection_url(b.pk), links.unsubscribe, links.subscriptions)
        body = messages.culprit_body(facts, links, alert.reason)
        extra = {"X-rcubench-Comparison": str(b.comparison_id),
                 "X-rcubench-Bisection": str(b.pk),
                 "X-rcubench-Culprit": facts.sha or facts.label}  # fmt: skip
    elif alert.sweep_id is not None:
        # A function-local import: alerts/sweep.py imports this module for its helpers.

        sweep = Sweep.objects.get(pk=alert.sweep_id)
        links = messages.Links(sweep_url(sweep.pk), links.unsubscribe, links.subscriptions)
        body = messages.sweep_body(mail_facts(sweep), links, alert.reason)
        extra = {"X-rcubench-Sweep": str(sweep.pk), "X-rcubench-Verdict": sweep.verdict}
    elif alert.inbound is not None:
        body = messages.command_answer_body(alert.inbound.outcome, links, alert.reason)
        extra = {"X-rcubench-Command": str(alert.inbound_id)}
    elif alert.transition is not None:
        moved = _state_facts(alert.transition)
        links = messages.Links(moved.regression_url, links.unsubscribe, links.subscriptions)
        body = messages.state_body(moved, links, alert.reason)
        extra = {"X-rcubench-Regression": str(moved.regression_id),
                 "X-rcubench-State": moved.now}  # fmt: skip
    else:
        assert alert.change_point is not None  # noqa: S101 - the check constraint
        body = messages.change_point_body(_change_point_facts(alert.change_point), links,
                                          alert.reason)  # fmt: skip
        extra = {"X-rcubench-Change-Point": str(alert.change_point_id)}
    env = messages.Envelope(
        from_addr=settings.RCUBENCH_MAIL_FROM, to_addr=alert.recipient, subject=alert.subject,
        message_id=alert.message_id, unsubscribe_url=links.unsubscribe, date=timezone.now(),
        in_reply_to=alert.in_reply_to, references=alert.references.split(), extra=extra,
    )  # fmt: skip
    return messages.email_message(env, body)


# --- subscriptions ------------------------------------------------------------------------


def subscriptions_of(user: User) -> list[Subscription]:
    return list(Subscription.objects.filter(user=user).select_related("tree"))


def subscribe(user: User, tree: Tree | None, benchmark: str, kinds: list[str]) -> Subscription:
    """A subscription of the user's account (the form limits `tree` to those they see)."""
    return Subscription.objects.create(user=user, tree=tree, benchmark=benchmark, kinds=kinds)


def unsubscribe_one(user: User, pk: int) -> bool:
    """Delete one of the user's own subscriptions; False when it is not theirs."""
    deleted, _ = Subscription.objects.filter(user=user, pk=pk).delete()
    return bool(deleted)


# --- the comparison page ------------------------------------------------------------------


def alerts_for_page(user: AnyUser, comparison: Comparison) -> list[Alert] | None:
    """The comparison's alerts (to whom, when, outcome) for its tree's admins and staff;
    None for anyone else (recipients' addresses are not for every reader)."""
    if not user.is_authenticated or not access.is_tree_admin(user, comparison.revision_a.tree):
        return None
    return list(Alert.objects.filter(comparison=comparison).order_by("created_at", "pk"))
