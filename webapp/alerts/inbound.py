"""Mail commands: an answer to an rcubench mail, read and acted on (docs/alerts.md, "Reply
commands"). commands.py reads the mail; this decides and acts.

receive() stores a mail once per Message-ID (a second delivery of it starts nothing) and
sends its processing to the control queue; process() reads it:
- a robot's mail (Auto-Submitted, an empty Return-Path...), a mail that answers no
  rcubench mail (no In-Reply-To or References of ours) and one without a command (people
  talking in the thread; a direct reply to rcubench it could not read is answered, to say
  why) are ignored, never answered: rcubench loops with no robot and spams no thread;
- a sender who is not allowed (an active account with the address holding a role on the
  tree, the series' authors, the pusher; and where the tree's policy says `recipients`,
  every address the answered mail was sent to) gets an answer that names the policy, and
  nothing starts;
- each command is acted on, or refused with the reason, and the answer lists them all,
  threaded under the command's mail (In-Reply-To it, References its chain), with links.
The From address is trusted as the MTA handed it over: checking it (SPF, DKIM, DMARC) is the
MTA's job (SECURITY.md).

A rerun (`#rcubench rerun [runs=N]`) is the original comparison submitted again with every
parameter the original had, its kernels pinned to the commits it measured, and stated in
the answer; `test` runs B' (B plus the mail's patch) against A and against B with those
parameters; `bisect` starts the original's bisection. Their comparisons are reported again,
in the same thread, when they end; a test whose B' is back within the threshold of A gets a
Tested-by line to paste.
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from email.utils import format_datetime

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from webapp import access, dispatch, logs
from webapp.alerts import commands, messages, services
from webapp.alerts.models import EVENTS, Alert, InboundMail, Kind
from webapp.alerts.services import TEST_A, TEST_B, Recipient, normalise
from webapp.bisections import services as bisections
from webapp.bisections.models import Bisection
from webapp.comparisons.models import Comparison
from webapp.comparisons.reproducer import public_url
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.regressions import services as regressions
from webapp.regressions.models import Regression
from webapp.states import log_state
from webapp.text import storable
from webapp.trees.models import Tree

log = logs.get(__name__)
State = InboundMail.State


class InboundRefused(ValueError):
    """The listener's answer to the MTA (a 5xx): the mail was not stored."""


def receive(raw: bytes) -> tuple[InboundMail, bool]:
    """Store the mail (once per Message-ID; one without gets its bytes' hash) and send its
    processing on commit. Returns the row and whether this delivery stored it."""
    if len(raw) > commands.MAX_BYTES:
        raise InboundRefused(f"message larger than {commands.MAX_BYTES} bytes")
    mail = commands.parse(raw)
    key = mail.message_id or f"<sha256.{hashlib.sha256(raw).hexdigest()}@inbound.invalid>"
    try:
        with transaction.atomic():
            row = InboundMail.objects.create(
                message_id=key, sender=mail.sender[:254], subject=storable(mail.subject)[:998],
                raw=raw,
            )  # fmt: skip
            dispatch.send_process_inbound(row.pk)
    except IntegrityError:  # delivered before (the MTA retried, or a list sent it twice)
        log.info("inbound mail duplicate", message_id=key, sender=mail.sender)
        return InboundMail.objects.get(message_id=key), False
    log_state(row, State.RECEIVED, message_id=key, sender=mail.sender, size=len(raw))
    return row, True


# --- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a command acts on: the rcubench mail answered, its comparison and regression."""

    mail: commands.InboundMail
    inbound: InboundMail
    alert: Alert
    comparison: Comparison | None
    regression: Regression | None
    account: User | None  # the sender's active account, if one has the address


def _answered(mail: commands.InboundMail) -> Alert | None:
    """The rcubench mail this one answers: the nearest of its parents that is ours (an
    answer to a command's answer goes back to the mail that command answered, and an answer
    to a regression's later move to the report it was threaded under)."""
    by_id = {a.message_id: a for a in Alert.objects.filter(message_id__in=mail.parents)
             .select_related("inbound__answers")}  # fmt: skip
    for parent in mail.parents:
        alert = by_id.get(parent)
        if alert is not None and alert.inbound is not None:
            alert = alert.inbound.answers
        if alert is not None and alert.transition_id is not None:
            alert = Alert.objects.filter(message_id=alert.in_reply_to).first()
        if alert is not None:
            return alert
    return None


def _comparison_of(alert: Alert) -> Comparison | None:
    if alert.comparison_id is not None:
        return alert.comparison
    if alert.bisection is not None:
        return alert.bisection.comparison
    return None


def _regression_of(alert: Alert, c: Comparison | None) -> Regression | None:
    if c is not None:
        return Regression.objects.filter(comparison=c).first()
    return Regression.objects.filter(change_point_id=alert.change_point_id).first()


def _recipients(alert: Alert) -> set[str]:
    """The addresses the answered mail was sent to: its rows for the same event and kind
    that the server took."""
    event = next(e for e in EVENTS if getattr(alert, f"{e}_id") is not None)
    rows = Alert.objects.filter(kind=alert.kind, state=Alert.State.SENT,
                                **{f"{event}_id": getattr(alert, f"{event}_id")})  # fmt: skip
    return {normalise(r).lower() for r in rows.values_list("recipient", flat=True)} - {""}


def _why_not_allowed(ctx: Context) -> str | None:
    """None when the sender may command under the tree's policy (Tree.mail_commands_from):
    an account with the address holding a role on the tree (or staff), an author of the
    series, or the pusher of the pushed head; under `recipients`, also an address the
    answered mail was sent to."""
    address = normalise(ctx.mail.sender).lower()
    c = ctx.comparison
    if c is not None:
        tree = c.revision_a.tree
    else:
        assert ctx.alert.change_point is not None  # noqa: S101 - an alert is about one thing
        tree = ctx.alert.change_point.tree
    if ctx.account is not None and access.can_submit(ctx.account, tree):
        return None
    if c is not None:
        series = c.revision_b.series
        authors = services.series_authors(series) if series else []
        pushers = [p.pusher_email for p in c.pushes.all()]
        if address in {normalise(a).lower() for a in [*authors, *pushers] if a}:
            return None
    policy = Tree.MailCommandsFrom(tree.mail_commands_from)
    if policy == Tree.MailCommandsFrom.RECIPIENTS and address in _recipients(ctx.alert):
        return None
    taken = ("the tree's members (by their account's address), the series' authors and the "
             "pusher")  # fmt: skip
    if policy == Tree.MailCommandsFrom.RECIPIENTS:
        taken += ", and every address the answered mail was sent to"
    return (f"{ctx.mail.sender or 'this sender'} may not command rcubench on tree {tree.name}: "
            f"its policy ({policy.value}) takes mail commands from {taken}")  # fmt: skip


def process(inbound_id: int) -> str:
    """Read a stored mail and act on its commands, once; returns its state."""
    with transaction.atomic():
        row = InboundMail.objects.select_for_update().get(pk=inbound_id)
        if row.state != State.RECEIVED:
            return row.state
        mail = commands.parse(bytes(row.raw))
        alert = None if mail.automatic else _answered(mail)
        if alert is None:
            why = ("a robot's mail (" + "; ".join(mail.notes) + ")" if mail.automatic
                   else "it answers no rcubench mail")  # fmt: skip
            return _end(row, State.IGNORED, why, alert=None)
        direct = any(mid in mail.in_reply_to for mid in (alert.message_id,))
        if not mail.commands and not (mail.problems and direct):
            # A thread's conversation among people: rcubench answers commands only (and a
            # direct reply it could not read, to say why).
            return _end(row, State.IGNORED, "no command in it", alert=alert)
        c = _comparison_of(alert)
        accounts = User.objects.filter(email__iexact=mail.sender, is_active=True)
        ctx = Context(mail, row, alert, c, _regression_of(alert, c), accounts.first())
        lines = _act(ctx)
        _end(row, State.DONE, "\n".join(lines), alert=alert)
        _answer(ctx, lines)
    return State.DONE


def _act(ctx: Context) -> list[str]:
    """What the answer says, a paragraph per command (and the mail's problems)."""
    out = [f"not read: {p}" for p in ctx.mail.problems]
    if not ctx.mail.commands:
        return [*out, "No command found: a command is an unquoted line starting with "
                      "#rcubench (see the commands below)."]  # fmt: skip
    why_not = _why_not_allowed(ctx)
    if why_not is not None:
        log.info("inbound mail refused", inboundmail=ctx.inbound.pk, sender=ctx.mail.sender)
        return [*out, f"Nothing was done: {why_not}."]
    for cmd in ctx.mail.commands:
        handler = HANDLERS[cmd.name]
        try:
            with transaction.atomic():  # a refused command leaves nothing of itself
                said = handler(ctx, cmd)
        except SubmissionError as exc:
            said = f"refused: {exc.message}" + _quoted_detail(exc.detail)
        except (regressions.TransitionRefused, bisections.BisectionRefused,
                PermissionDenied) as exc:  # fmt: skip
            said = f"refused: {exc}"
        out.append(f"> {cmd.text}\n{said}")
        log.info("mail command", inboundmail=ctx.inbound.pk, command=cmd.name,
                 sender=ctx.mail.sender, answer=said[:200])  # fmt: skip
    return out


def _quoted_detail(detail: str, limit: int = 40) -> str:
    """The tool's own words under a refusal (git's "error: patch failed: <file>:<line>"
    for a patch that does not apply), indented, at most `limit` lines."""
    lines = detail.strip().splitlines()
    if not lines:
        return ""
    more = [f"    ({len(lines) - limit} more lines)"] if len(lines) > limit else []
    return "\n  git said:\n" + "\n".join([*(f"    {ln}" for ln in lines[:limit]), *more])


# --- the commands -------------------------------------------------------------------------


def _move(state: str, **kw: str) -> Callable[[Context, commands.Command], str]:
    def handler(ctx: Context, cmd: commands.Command) -> str:
        reg = _needs_regression(ctx)
        extra: dict[str, object] = {}
        if state == "invalid":
            extra["note"] = cmd.argument
        if state == "fixed":
            extra["fixed_by"] = cmd.argument
        if state == "duplicate":
            original = _regression_by_message_id(cmd.argument)
            if original is None:
                return f"refused: no rcubench regression has a mail with Message-ID {cmd.argument}"
            extra["duplicate_of"] = original.pk
        was = reg.state
        actor = regressions.Actor(via="mail", user=ctx.account, address=ctx.mail.sender,
                                  message_id=ctx.mail.message_id)  # fmt: skip
        moved = regressions.transition(reg.pk, state, actor, **extra)  # type: ignore[arg-type]
        return f"regression {moved.pk} is {moved.state} now (was {was}): {_url(moved)}"

    return handler


def _needs_regression(ctx: Context) -> Regression:
    if ctx.regression is None:
        raise regressions.TransitionRefused("the mail it answers reported no regression")
    return ctx.regression


def _regression_by_message_id(mid: str) -> Regression | None:
    alert = Alert.objects.filter(message_id=mid).first()
    if alert is None:
        return None
    return _regression_of(alert, _comparison_of(alert))


def _url(reg: Regression) -> str:
    return public_url() + reverse("regressions:regression", args=[reg.pk])


def _rerun(ctx: Context, cmd: commands.Command) -> str:
    c = ctx.comparison
    if c is None:
        return "refused: a change point has no comparison to run again"
    runs = cmd.runs
    req = rerun_request(c, runs, requested_by=f"mail {ctx.mail.message_id} from {ctx.mail.sender}")
    new = submit_comparison(req)
    ctx.inbound.started.add(new)
    return (f"comparison {new.pk} queued: {_report(new.pk)}\n"
            f"  the same kernels and parameters as comparison {c.pk}: {_parameters(req)}\n"
            "  its verdict comes in this thread when it ends")  # fmt: skip


def rerun_request(c: Comparison, runs: int | None, *, requested_by: str) -> ComparisonRequest:
    """Comparison `c` again: the commits it measured (not the refs, which may have moved),
    its series, target, benchmarks, command lines, runs, alpha, threshold and visibility."""
    a, b = c.revision_a, c.revision_b
    base = a.base_sha or a.sha
    return ComparisonRequest(
        tree=a.tree.name, base_ref=base,
        head_ref="" if b.series_id else (b.sha or b.base_sha),
        series_mbox=bytes(b.series.mbox) if b.series else None,
        base_series_mbox=bytes(a.series.mbox) if a.series else None,
        patch_fallback=b.patch_fallback, benchmarks=tuple(c.benchmarks), target=c.target.name,
        cmdline_a=c.cmdline_a, cmdline_b=c.cmdline_b,
        min_runs=runs if runs is not None else c.min_runs,
        max_runs=max(runs, c.max_runs) if runs is not None else c.max_runs,
        alpha=c.alpha, threshold_pct=c.threshold_pct, trigger=Comparison.Trigger.MAIL,
        requested_by=requested_by[:254], visibility=c.visibility,
    )  # fmt: skip


def _parameters(req: ComparisonRequest) -> str:
    b = f"the series on {req.base_ref[:12]}" if req.series_mbox else req.head_ref[:40]
    return (f"A {req.base_ref[:12]}, B {b}, target {req.target}, "
            f"benchmarks {' '.join(req.benchmarks)}, runs {req.min_runs}-{req.max_runs} a side, "
            f"alpha {req.alpha:g}, threshold {req.threshold_pct:g}%, "
            f"command lines A {req.cmdline_a or '(none)'!r} "
            f"B {req.cmdline_b or '(none)'!r}")  # fmt: skip


def _bisect(ctx: Context, cmd: commands.Command) -> str:
    c = ctx.comparison
    if c is None:
        return "refused: a change point has no comparison to bisect"
    b, created = bisections.start(c.pk, trigger=Bisection.Trigger.MAIL)
    ctx.inbound.bisections.add(b)
    url = public_url() + reverse("reports:bisection", args=[b.pk])
    joined = "started" if created else "joined the one already running"
    return (f"bisection {b.pk} {joined}: {url}\n"
            "  a confirmed culprit is mailed under the regression's mail")  # fmt: skip


def patch_mbox(mail: commands.InboundMail) -> bytes:
    """The mail's patch as one message of an mbox (what the builder's `git am` takes): a
    `git format-patch` file as it is; pseudo-headers (From:, Subject:) or a bare diff get
    the envelope line, and a bare diff the sender as author and a subject naming the mail."""
    text = (mail.patch or "").replace("\r\n", "\n")
    if text.startswith("From "):
        return text.encode()
    envelope = "From rcubench-mail-test Mon Sep 17 00:00:00 2001\n"
    if re.match(r"(From|Subject|Date): ", text):
        return (envelope + text).encode()
    subject = messages.header_text(f"[PATCH] rcubench test {mail.message_id}", 200)
    head = f"From: {mail.sender}\nDate: {format_datetime(timezone.now())}\nSubject: {subject}\n\n"
    return (envelope + head + text).encode()


def _test(ctx: Context, cmd: commands.Command) -> str:
    """B' = the reported kernel B plus the mail's patch, against A (a Tested-by when it is
    back within the threshold) and against B (what the patch itself changes)."""
    c = ctx.comparison
    if c is None:
        return "refused: a change point has no comparison to test a patch against"
    patch = patch_mbox(ctx.mail)
    asked = f"by mail {ctx.mail.message_id} from {ctx.mail.sender}"
    b = c.revision_b
    series = bytes(b.series.mbox).rstrip(b"\n") + b"\n\n" if b.series else b""
    # From the commits measured, every parameter the original's (rerun_request); the tag
    # leads requested_by (it is cut at 254 characters).
    against_b = replace(
        rerun_request(c, None, requested_by=f"{TEST_B} {asked}"),
        base_ref=b.base_sha or b.sha,
        head_ref="",
        base_series_mbox=series or None,
        series_mbox=series + patch,
    )
    out = []
    if b.series_id is not None:
        against_a = replace(against_b, base_series_mbox=(
            bytes(c.revision_a.series.mbox) if c.revision_a.series else None
        ), requested_by=f"{TEST_A} {asked}"[:254])  # fmt: skip
        new_a = submit_comparison(against_a)
        ctx.inbound.started.add(new_a)
        out.append(f"comparison {new_a.pk} queued, A against B' (B + your patch): "
                   f"{_report(new_a.pk)}")  # fmt: skip
    else:
        out.append("A against B' is not run: B is another commit than A's base, and a "
                   "comparison applies a patch on one base for both sides; B against B' says "
                   "what the patch changes")  # fmt: skip
    new_b = submit_comparison(against_b)
    ctx.inbound.started.add(new_b)
    out.append(f"comparison {new_b.pk} queued, B against B': {_report(new_b.pk)}")
    out.append(f"  patch: {ctx.mail.patch_source}; every other parameter comparison {c.pk}'s: "
               f"{_parameters(against_b)}")  # fmt: skip
    out.append("  their verdicts come in this thread when they end, with a Tested-by line "
               "if B' is back within the threshold of A")  # fmt: skip
    return "\n".join(out)


def _test_git(ctx: Context, cmd: commands.Command) -> str:
    """B' = the head of a branch of the same registered tree (resolved now, no other URL
    fetched): against A, and against B where B is a commit of its own (not a series)."""
    c = ctx.comparison
    if c is None:
        return "refused: a change point has no comparison to test a branch against"
    asked = f"by mail {ctx.mail.message_id} from {ctx.mail.sender}"
    a, b = c.revision_a, c.revision_b
    if a.series_id is not None:
        return "refused: A carries a series; a branch is compared with plain commits only"
    base = rerun_request(c, None, requested_by=f"{TEST_A} {asked}")
    against_a = replace(base, head_ref=cmd.argument, series_mbox=None, base_series_mbox=None)
    new_a = submit_comparison(against_a)
    ctx.inbound.started.add(new_a)
    head = new_a.revision_b.sha[:12] or "resolved by its build"
    out = [f"comparison {new_a.pk} queued, A against {cmd.argument} ({head}): "
           f"{_report(new_a.pk)}"]  # fmt: skip
    if b.series_id is None:
        against_b = replace(against_a, base_ref=b.sha or b.base_sha,
                            requested_by=f"{TEST_B} {asked}"[:254])  # fmt: skip
        new_b = submit_comparison(against_b)
        ctx.inbound.started.add(new_b)
        out.append(f"comparison {new_b.pk} queued, B against {cmd.argument}: "
                   f"{_report(new_b.pk)}")  # fmt: skip
    else:
        out.append("B against the branch is not run: B is a series on A's base")
    out.append(f"  every other parameter comparison {c.pk}'s: {_parameters(against_a)}")
    out.append("  their verdicts come in this thread when they end, with a Tested-by line "
               "if the branch is back within the threshold of A")  # fmt: skip
    return "\n".join(out)


def _report(pk: int) -> str:
    return public_url() + reverse("reports:comparison", args=[pk])


HANDLERS: dict[str, Callable[[Context, commands.Command], str]] = {
    "ack": _move("acknowledged"),
    "invalid": _move("invalid"),
    "fix": _move("fixed"),
    "dup": _move("duplicate"),
    "rerun": _rerun,
    "bisect": _bisect,
    "test": _test,
    "test-git": _test_git,
}


# --- answering ----------------------------------------------------------------------------


def _end(row: InboundMail, state: str, outcome: str, *, alert: Alert | None) -> str:
    row.state, row.outcome, row.answers = state, storable(outcome), alert
    row.processed_at = timezone.now()
    row.save(update_fields=["state", "outcome", "answers", "processed_at"])
    log_state(row, state, answers=alert.pk if alert else None,
              reason=outcome[:200] if state == State.IGNORED else "")  # fmt: skip
    return state


def _answer(ctx: Context, lines: list[str]) -> None:
    """The answer, as an Alert of kind reply: delivered like every rcubench mail."""
    mail = ctx.mail
    to = normalise(mail.reply_to)
    if not to:
        return
    refs = messages.message_ids(*mail.references, mail.message_id)
    row = Alert(
        inbound=ctx.inbound, kind=Kind.REPLY, recipient=to,
        reason="because you sent rcubench a mail command",
        subject=storable(messages.reply_subject(mail.subject or ctx.alert.subject)),
        message_id=services.message_id(f"i{ctx.inbound.pk}", Kind.REPLY, to),
        in_reply_to=mail.message_id, references=" ".join(refs[-20:]),
        **_skipped(to),
    )  # fmt: skip
    existing = Alert.objects.filter(inbound=ctx.inbound, kind=Kind.REPLY)
    services.queue_alerts([row], existing, inboundmail=ctx.inbound.pk)


def _skipped(address: str) -> dict[str, str]:
    """The row's fields for an address that opted out (recorded, never sent)."""
    skipped = services.OPTED_OUT if services.opted_out(address) else ""
    return services.skipped_fields(Recipient(address, "", skipped=skipped))


def answer_ended(comparison_id: int) -> list[int]:
    """A comparison a mail command started has ended: its verdict, to the command's sender,
    under the command's answer (an Alert of kind result: the comparison's mail)."""
    c = Comparison.objects.get(pk=comparison_id)
    if c.state != "done":
        return []
    queued: list[int] = []
    for row in InboundMail.objects.filter(started=c):
        answer = row.replies.filter(kind=Kind.REPLY).first()
        if answer is None:
            continue
        refs = messages.message_ids(*answer.references.split(), answer.message_id)
        to = answer.recipient
        result = Alert(
            comparison=c, kind=Kind.RESULT, recipient=to, subject=answer.subject,
            reason="because your mail command started this comparison",
            message_id=services.message_id(f"c{c.pk}", Kind.RESULT, to),
            in_reply_to=answer.message_id, references=" ".join(refs[-20:]), **_skipped(to),
        )  # fmt: skip
        existing = Alert.objects.filter(comparison=c, kind=Kind.RESULT)
        queued += services.queue_alerts([result], existing, comparison=c.pk)
    return queued
