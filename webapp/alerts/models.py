"""Outgoing alert mails, who asked for them and who asked not to get them.

One Alert row per message and recipient, about one event: a comparison, a change point, a
bisection's confirmed culprit, a mail command it answers (InboundMail), or a reported
regression's later move (a regressions Transition, mailed into the report's thread). Its unique key
(the event, kind, recipient) is the idempotency key that keeps a task run twice from
sending a second mail (docs/alerts.md, delivery guarantees).
"""

import functools
import operator

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from webapp.bisections.models import Bisection
from webapp.comparisons.models import Comparison
from webapp.trees.models import Tree
from webapp.watch.models import ChangePoint


class Kind(models.TextChoices):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    CHANGE_POINT = "change-point", "Change point"
    # Never subscribed to: the answer to a mail command (InboundMail), and the verdict of a
    # comparison a mail command started, to its sender, in the command's thread.
    REPLY = "reply"
    RESULT = "result"
    # A regression's later move (a rule's fixed or inactive, a person's), to the recipients
    # of the mail that reported it, in that mail's thread.
    STATE = "state"


SUBSCRIBABLE = [
    (v, label) for v, label in Kind.choices if v not in (Kind.REPLY, Kind.RESULT, Kind.STATE)
]
# What an Alert is about: exactly one of these foreign keys is set.
EVENTS = ("comparison", "change_point", "bisection", "inbound", "transition", "sweep")


def _about_one_thing() -> Q:
    """One event's key set and every other one null (an XOR of them would also pass three
    set)."""
    return functools.reduce(
        operator.or_, (Q(**{f"{e}__isnull": e != one for e in EVENTS}) for one in EVENTS)
    )


def _default_kinds() -> list[str]:
    return [Kind.REGRESSION]


class Alert(models.Model):
    Kind = Kind

    class State(models.TextChoices):
        QUEUED = "queued"  # to send (again, after a transient failure)
        SENDING = "sending"  # committed before the SMTP transaction starts
        SENT = "sent"  # the server accepted it
        FAILED = "failed"  # refused for good (5xx), or retries used up
        UNKNOWN = "unknown"  # an attempt died mid-transaction: never sent again
        SKIPPED = "skipped"  # never sent: opted out (when queued or later), may not see it

    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    change_point = models.ForeignKey(
        ChangePoint, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    # A confirmed culprit's mail: a reply to the comparison's own alert. Its kind is that
    # alert's (regression or improvement), so subscriptions need no kind of their own.
    bisection = models.ForeignKey(
        Bisection, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    inbound = models.ForeignKey(
        "InboundMail", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    transition = models.ForeignKey(
        "regressions.Transition", null=True, blank=True, on_delete=models.CASCADE,
        related_name="alerts",
    )  # fmt: skip
    # A sweep whose B scales worse than A (webapp/alerts/sweep.py), mailed as a regression.
    sweep = models.ForeignKey(
        "sweeps.Sweep", null=True, blank=True, on_delete=models.CASCADE, related_name="alerts"
    )
    kind = models.CharField(max_length=16, choices=Kind)
    recipient = models.EmailField(max_length=254)
    reason = models.CharField(
        max_length=200, blank=True, help_text="Why this address gets it (subscription, author)."
    )
    subject = models.CharField(max_length=998)
    message_id = models.CharField(max_length=998, unique=True)
    in_reply_to = models.CharField(
        max_length=998, blank=True, help_text="Message-Id of the mail it replies to."
    )
    references = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=State, default=State.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True, help_text="The server's reply or what failed.")
    smtp_reply = models.TextField(blank=True, help_text="The server's reply to the message.")
    created_at = models.DateTimeField(auto_now_add=True)
    sending_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=_about_one_thing(), name="alert_about_one_thing"),
            models.UniqueConstraint(
                fields=["comparison", "kind", "recipient"],
                condition=Q(comparison__isnull=False),
                name="alert_once_per_comparison",
            ),
            models.UniqueConstraint(
                fields=["change_point", "kind", "recipient"],
                condition=Q(change_point__isnull=False),
                name="alert_once_per_change_point",
            ),
            models.UniqueConstraint(
                fields=["bisection", "kind", "recipient"],
                condition=Q(bisection__isnull=False),
                name="alert_once_per_bisection",
            ),
            models.UniqueConstraint(
                fields=["inbound", "kind", "recipient"],
                condition=Q(inbound__isnull=False),
                name="alert_once_per_inbound",
            ),
            models.UniqueConstraint(
                fields=["transition", "kind", "recipient"],
                condition=Q(transition__isnull=False),
                name="alert_once_per_transition",
            ),
            models.UniqueConstraint(
                fields=["sweep", "kind", "recipient"],
                condition=Q(sweep__isnull=False),
                name="alert_once_per_sweep",
            ),
        ]

    def __str__(self) -> str:
        if self.comparison_id:
            about = f"comparison {self.comparison_id}"
        elif self.change_point_id:
            about = f"change point {self.change_point_id}"
        elif self.inbound_id:
            about = f"inbound mail {self.inbound_id}"
        elif self.transition_id:
            about = f"regression transition {self.transition_id}"
        else:
            about = f"bisection {self.bisection_id}"
        return f"{self.kind} alert for {about} to {self.recipient}"


class Subscription(models.Model):
    """Mail for a user account or a free address (a mailing list) about a tree (or every
    tree), a benchmark (or every benchmark) and the verdict kinds asked for."""

    user = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.CASCADE,
        related_name="alert_subscriptions",
    )  # fmt: skip
    address = models.EmailField(blank=True, help_text="A free address (e.g. a mailing list).")
    tree = models.ForeignKey(
        Tree, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions",
        help_text="Empty: every tree.",
    )  # fmt: skip
    benchmark = models.CharField(max_length=64, blank=True, help_text="Empty: every benchmark.")
    kinds = ArrayField(models.CharField(max_length=16, choices=Kind), default=_default_kinds)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True) ^ Q(address=""), name="subscription_user_xor_address"
            ),
            models.CheckConstraint(condition=~Q(kinds=[]), name="subscription_has_kinds"),
        ]

    def __str__(self) -> str:
        who = self.user or self.address
        return f"{who}: {self.tree or 'every tree'}/{self.benchmark or '*'} {','.join(self.kinds)}"


class OptOut(models.Model):
    """An address that gets no alert mail at all (from the unsubscribe link)."""

    address = models.EmailField(unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["address"]

    def __str__(self) -> str:
        return self.address


class InboundMail(models.Model):
    """A mail handed to rcubench's listener (LMTP, or a maildir), once per Message-ID: the
    raw bytes as received, what rcubench made of it, and its reply (an Alert of kind
    reply). A second delivery of the same Message-ID is not stored again: nothing starts
    twice."""

    class State(models.TextChoices):
        RECEIVED = "received"  # stored; its commands not read yet
        DONE = "done"  # read: its commands acted on (each, or refused with why), answered
        IGNORED = "ignored"  # a robot's, or no answer to an rcubench mail: never answered

    message_id = models.CharField(max_length=998, unique=True)
    sender = models.CharField(max_length=254, blank=True, help_text="From:'s address.")
    subject = models.CharField(max_length=998, blank=True)
    raw = models.BinaryField(help_text="The message as the MTA handed it over (<= 2 MiB).")
    state = models.CharField(max_length=16, choices=State, default=State.RECEIVED)
    answers = models.ForeignKey(
        Alert, null=True, blank=True, on_delete=models.SET_NULL, related_name="answered_by",
        help_text="The rcubench mail it replies to (In-Reply-To, References).",
    )  # fmt: skip
    outcome = models.TextField(blank=True, help_text="What was done, as the reply says it.")
    started = models.ManyToManyField(
        Comparison, blank=True, related_name="started_by_mail",
        help_text="Comparisons its commands started (their verdicts answer it again).",
    )  # fmt: skip
    bisections = models.ManyToManyField(Bisection, blank=True, related_name="started_by_mail")
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at", "-pk"]

    def __str__(self) -> str:
        return f"inbound {self.message_id} from {self.sender} ({self.state})"
