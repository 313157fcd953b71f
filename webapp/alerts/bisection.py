"""The mail of a bisection's confirmed culprit: a reply to the comparison's own alert.

notify_bisection is what the notify_bisection task runs once webapp.bisections.services
confirmed a culprit (Bisection.outcome "culprit"). Its recipients are the culprit's author,
where they may see the comparison (a restricted one is never mailed to an address without
an account that may see it), and everyone the comparison's alert goes to
(services.comparison_recipients with that alert's kind: the tree's subscribers, and for a
regression the series' authors and the pusher); an opted-out address gets a `skipped` row,
as in the other mails. One Alert row per recipient, unique on (bisection, kind,
recipient): a second call queues nothing new. Rendering and delivery are the other
alerts' (services.render, delivery.deliver).

Threading: each mail's In-Reply-To is the Message-ID of the comparison's alert to that same
address, read from its Alert row, and its References that alert's References followed by
its id, so the culprit lands under the regression mail in the patch's thread. An address
that got no alert for the comparison (the culprit's author, say) is threaded under the id
that alert would have had (services.message_id): clients that thread by References (mutt,
Thunderbird, lore) place it in the series' thread, under the cover letter that leads its
References, with the alert it never got as an empty link.
"""

from webapp import logs
from webapp.alerts import messages
from webapp.alerts.models import Alert
from webapp.alerts.services import (
    OPTED_OUT,
    Recipient,
    alert_kind_of,
    comparison_recipients,
    member_may_see,
    message_id,
    normalise,
    opted_out,
    queue_alerts,
    skipped_fields,
)
from webapp.bisections.models import Bisection, BisectionState
from webapp.comparisons.models import Comparison
from webapp.comparisons.summary import header, verdict_rows
from webapp.text import storable

log = logs.get(__name__)


def notify_bisection(bisection_id: int) -> list[int]:
    """For a bisection whose culprit was confirmed: create its Alert rows (once per
    recipient, however often this runs) and send one task per queued row. Returns the
    queued rows' ids; [] for any other bisection."""
    b = Bisection.objects.select_related(
        "comparison__revision_a__tree", "comparison__revision_b__tree",
        "comparison__revision_b__series", "comparison__target",
    ).get(pk=bisection_id)  # fmt: skip
    if (
        b.state != BisectionState.DONE
        or b.outcome != Bisection.Outcome.CULPRIT
        or b.first is None
        or not 1 <= b.first <= b.n
    ):
        return []
    c = b.comparison
    # The kind of the comparison's alert, which this mail follows; a comparison mailed to
    # nobody (its worst verdict not one that is mailed) takes the statistic's own verdict.
    kind = alert_kind_of(c) or b.original_verdict
    if kind not in (Alert.Kind.REGRESSION, Alert.Kind.IMPROVEMENT):
        return []
    originals = {a.recipient.lower(): a for a in Alert.objects.filter(comparison=c, kind=kind)}
    series = c.revision_b.series
    root = messages.message_ids(series.message_id)[:1] if series else []
    would_be_subject = ""  # the comparison's alert subject, computed once if needed
    rows = []
    for r in recipients(b, kind):
        original = originals.get(r.address.lower())
        if original is not None:
            parent = original.message_id
            references = [*original.references.split(), parent]
            subject = original.subject
        else:
            parent = message_id(f"c{c.pk}", kind, r.address)
            references = [*root, parent]
            if not would_be_subject:
                would_be_subject = messages.comparison_subject(
                    header(c), verdict_rows(c), kind, series.subject if series else None
                )
            subject = would_be_subject
        # "Re: <the regression mail's subject>", not a subject naming the culprit: Gmail
        # joins a reply to a conversation only when its subject, less "Re:", is the
        # parent's, and mutt shows a changed subject in the thread index as a new topic
        # (mutt, Thunderbird and lore thread by References either way). A reply keeps the
        # subject, as on the kernel's lists; the culprit is the body's first lines.
        rows.append(
            Alert(bisection=b, kind=kind, recipient=r.address, reason=r.reason[:200],
                  subject=storable(messages.reply_subject(subject)),
                  message_id=message_id(f"b{b.pk}", kind, r.address), in_reply_to=parent,
                  references=" ".join(messages.message_ids(*references)), **skipped_fields(r))
        )  # fmt: skip
    log.info("culprit mail", bisection=b.pk, comparison=c.pk, kind=kind, recipients=len(rows))
    return queue_alerts(rows, Alert.objects.filter(bisection=b, kind=kind), bisection=b.pk)


def recipients(b: Bisection, kind: str) -> list[Recipient]:
    """The culprit's author first (their reason wins when they are also a subscriber),
    then whoever the comparison's alert of `kind` goes to; once per address."""
    c = b.comparison
    out: dict[str, Recipient] = {}
    author = normalise(b.commits[(b.first or 0) - 1].get("author", ""))
    restricted = c.visibility == Comparison.Visibility.RESTRICTED
    if author and (not restricted or member_may_see(author, c)):
        what = "patch" if b.kind == Bisection.Kind.SERIES else "commit"
        reason = f"as the author of the {what} this bisection found to cause the {kind}"
        out[author.lower()] = Recipient(author, reason, skipped=OPTED_OUT if opted_out(author)
                                        else "")  # fmt: skip
    for r in comparison_recipients(c, kind):
        out.setdefault(r.address.lower(), r)
    return list(out.values())
