"""A reported regression's life after its mail: who looked at it, what it turned out to be.

One Regression per report: a comparison that ended with a regression verdict (a series, a
push, two refs), or a change point in a watched branch's history. Its state moves by hand
(the page's buttons, the API, later mail commands) and by rules (webapp.regressions.rules:
fixed when the branch comes back, inactive when it stops being tested against it); every
move is a Transition row, with who or what made it, and one log line.

  untriaged -> acknowledged | investigating | invalid | fixed | duplicate | inactive
  acknowledged, investigating -> any other state but untriaged
  invalid, fixed, duplicate, inactive -> acknowledged | investigating (reopened by a person)

The states are Perfherder's, CKI's and regzbot's (KernelCI's users asked for regressions
that are updated after they are created): open ones are untriaged, acknowledged or
investigating; closed ones say why they closed.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from webapp.comparisons.models import Comparison, Target
from webapp.trees.models import Tree
from webapp.watch.models import ChangePoint


class RegressionState(models.TextChoices):
    UNTRIAGED = "untriaged"
    ACKNOWLEDGED = "acknowledged"  # someone saw it and agrees it is real
    INVESTIGATING = "investigating"  # someone is working on it
    INVALID = "invalid"  # not a regression (noise, a wrong baseline, an intended cost)
    FIXED = "fixed"
    DUPLICATE = "duplicate"  # of another regression (duplicate_of)
    INACTIVE = "inactive"  # its branch went on without testing it again


OPEN = (RegressionState.UNTRIAGED, RegressionState.ACKNOWLEDGED, RegressionState.INVESTIGATING)
CLOSED = (
    RegressionState.INVALID,
    RegressionState.FIXED,
    RegressionState.DUPLICATE,
    RegressionState.INACTIVE,
)


class Via(models.TextChoices):
    REPORT = "report"  # opened by the comparison or change point that reported it
    WEB = "web"  # a button on its page
    API = "api"
    MAIL = "mail"  # a reply command
    CLI = "cli"  # an operator's manage.py
    RULE = "rule"  # fixed or inactive by webapp.regressions.rules


class Regression(models.Model):
    State = RegressionState

    tree = models.ForeignKey(Tree, on_delete=models.CASCADE, related_name="regressions")
    # (ChangePoint.regression is its direction: the reverse accessors say "reported".)
    comparison = models.OneToOneField(
        Comparison, null=True, blank=True, on_delete=models.CASCADE,
        related_name="reported_regression",
    )  # fmt: skip
    change_point = models.OneToOneField(
        ChangePoint, null=True, blank=True, on_delete=models.CASCADE,
        related_name="reported_regression",
    )  # fmt: skip
    branch = models.CharField(
        max_length=255, blank=True, help_text="The watched branch it was found on, if any."
    )
    target = models.ForeignKey(Target, on_delete=models.PROTECT, related_name="+")
    benchmark = models.CharField(max_length=64)
    metric = models.CharField(max_length=64)
    statistic = models.CharField(max_length=32)
    # What the report said (the verdict row's shift, or the change point's change), kept so
    # that the triage page lists many regressions without reading every comparison.
    shift_pct = models.FloatField(null=True, blank=True)
    ci_low_pct = models.FloatField(null=True, blank=True)
    ci_high_pct = models.FloatField(null=True, blank=True)
    threshold_pct = models.FloatField(help_text="The comparison's (or benchmark's) threshold.")
    baseline = models.CharField(
        max_length=40, blank=True, help_text="The commit before the regression (A's, or the "
        "last tested head before the change point).",
    )  # fmt: skip
    culprit = models.CharField(
        max_length=40, blank=True, help_text="The first commit measured with it (B's, or the "
        "change point's head).",
    )  # fmt: skip
    state = models.CharField(max_length=16, choices=RegressionState, default="untriaged")
    duplicate_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="duplicates"
    )
    fixed_by = models.CharField(
        max_length=200, blank=True, help_text="The fixing commit (sha or subject), or the "
        "comparison that showed the branch back.",
    )  # fmt: skip
    reason = models.TextField(blank=True, help_text="Why it is invalid, as its closer said.")
    opened_at = models.DateTimeField(auto_now_add=True)
    triaged_at = models.DateTimeField(
        null=True, blank=True, help_text="When a person first moved it out of untriaged."
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    clean_pushes = models.PositiveIntegerField(
        default=0, help_text="Tested heads of its branch since, none of which regressed it."
    )
    ruled_at = models.DateTimeField(
        null=True, blank=True, help_text="When the rules (fixed, inactive) last read its branch."
    )

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(comparison__isnull=False, change_point__isnull=True)
                | Q(comparison__isnull=True, change_point__isnull=False),
                name="regression_reported_by_one_thing",
            ),
            models.CheckConstraint(
                condition=Q(state="duplicate") | Q(duplicate_of__isnull=True),
                name="regression_duplicate_of_iff_duplicate",
            ),
            models.CheckConstraint(
                condition=Q(state__in=CLOSED, closed_at__isnull=False)
                | Q(state__in=OPEN, closed_at__isnull=True),
                name="regression_closed_at_iff_closed",
            ),
        ]
        indexes = [models.Index(fields=["tree", "state", "-opened_at"], name="regression_triage")]

    def __str__(self) -> str:
        return f"regression {self.pk} ({self.state}) {self.benchmark}/{self.metric}"

    @property
    def is_open(self) -> bool:
        return self.state in OPEN


class Transition(models.Model):
    """One move of a regression's state: who or what made it, and from where."""

    regression = models.ForeignKey(Regression, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=16, blank=True, help_text="Empty: opened.")
    to_state = models.CharField(max_length=16, choices=RegressionState)
    via = models.CharField(max_length=16, choices=Via)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    by_address = models.EmailField(blank=True, help_text="The sender of a mail command.")
    message_id = models.CharField(
        max_length=998, blank=True, help_text="The mail (or the report) that made it."
    )
    note = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.regression_id}: {self.from_state or 'opened'} -> {self.to_state}"
