"""Bisections and attributions of a comparison's statistic, and the steps they run.

A bisection finds which commit of A..B moved one statistic of a finished comparison (its
"original"); an attribution measures every patch of a series. Each step is an ordinary
comparison (trigger "bisection") run by the same queues, decided by the same engine; the
step's answer (stats/bisection.py) is stored beside it.
"""

from django.db import models
from django.db.models import Q

from webapp.comparisons.models import Comparison
from webapp.states import Result, error_code_iff_unsuccessful, result_only_when_done


class BisectionState(models.TextChoices):
    QUEUED = "queued"
    BISECTING = "bisecting"  # step comparisons of midpoints against A
    CONFIRMING = "confirming"  # the culprit re-run against its parent, and reverted from head
    ATTRIBUTING = "attributing"  # every patch against its parent, at once
    DONE = "done"


ACTIVE = (
    BisectionState.QUEUED,
    BisectionState.BISECTING,
    BisectionState.CONFIRMING,
    BisectionState.ATTRIBUTING,
)


class Bisection(models.Model):
    class Mode(models.TextChoices):
        BISECT = "bisect", "Bisection"
        ATTRIBUTE = "attribute", "Per-patch attribution"

    class Kind(models.TextChoices):
        SERIES = "series", "Patches of a series"
        RANGE = "range", "First-parent commits of a push range"

    class Outcome(models.TextChoices):
        NONE = "", "(not finished)"
        CULPRIT = "culprit", "Culprit confirmed"
        UNCONFIRMED = "unconfirmed", "Culprit not confirmed"
        RANGE = "range", "A range of commits"
        ATTRIBUTED = "attributed", "Every patch measured"

    class Error(models.TextChoices):
        NONE = "", "(none)"
        STEP_FAILED = "step-failed"  # a step of A itself failed: nothing to compare against
        CANCELLED = "cancelled"

    class Trigger(models.TextChoices):
        WEB = "web"
        API = "api"
        CLI = "cli"
        WATCH = "watch"
        MAIL = "mail"  # a mail command (webapp/alerts/inbound.py)

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE,
                                   related_name="bisections")  # fmt: skip
    mode = models.CharField(max_length=16, choices=Mode, default=Mode.BISECT)
    kind = models.CharField(max_length=16, choices=Kind)
    benchmark = models.CharField(max_length=64)
    metric = models.CharField(max_length=64)
    statistic = models.CharField(max_length=16)
    unit = models.CharField(
        max_length=16, blank=True, help_text="The effect's unit: % or the metric's."
    )
    effect = models.FloatField(help_text="The original's shift of the statistic (its unit).")
    effect_low = models.FloatField()
    effect_high = models.FloatField()
    original_verdict = models.CharField(max_length=32)
    # The positions 1..n: a push range's first-parent commits (oldest first) or a series'
    # patches; each {"sha", "subject", "author", "link"} (a series' sha is "").
    commits = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=BisectionState, default=BisectionState.QUEUED)
    result = models.CharField(max_length=16, choices=Result, default=Result.NONE, blank=True)
    error_code = models.CharField(max_length=32, choices=Error, default=Error.NONE, blank=True)
    error_message = models.TextField(blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome, default=Outcome.NONE, blank=True)
    first = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="The culprit, or the range's first."
    )
    last = models.PositiveSmallIntegerField(null=True, blank=True)
    summary = models.TextField(blank=True, help_text="The outcome in words, with its reasons.")
    trigger = models.CharField(max_length=16, choices=Trigger)
    requested_by = models.ForeignKey("auth.User", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            result_only_when_done("bisection_result_only_when_done", done=BisectionState.DONE),
            error_code_iff_unsuccessful("bisection_error_code_iff_unsuccessful"),
            # One at a time per comparison, statistic and mode: a second request joins it.
            models.UniqueConstraint(
                fields=["comparison", "benchmark", "metric", "statistic", "mode"],
                condition=~Q(state=BisectionState.DONE),
                name="bisection_one_active",
            ),
        ]

    def __str__(self) -> str:
        what = f"{self.benchmark}/{self.metric}[{self.statistic}]"
        return f"{self.get_mode_display()} #{self.pk} of comparison {self.comparison_id} {what}"

    @property
    def n(self) -> int:
        return len(self.commits)


class Step(models.Model):
    class Kind(models.TextChoices):
        BISECT = "bisect", "Midpoint against A"
        FRESH = "fresh", "Culprit against its parent, re-run"
        REVERT = "revert", "Head with the culprit reverted, against head"
        PATCH = "patch", "Patch against its parent"

    class Answer(models.TextChoices):
        NONE = "", "(pending)"
        LIKE_A = "like-a", "like A"
        LIKE_B = "like-b", "like B"
        UNKNOWN = "unknown"
        SKIPPED = "skipped", "skipped (did not build or boot)"
        MEASURED = "measured"  # an attribution step: its effect, no side to be like

    bisection = models.ForeignKey(Bisection, on_delete=models.CASCADE, related_name="steps")
    kind = models.CharField(max_length=16, choices=Kind)
    position = models.PositiveSmallIntegerField(help_text="The commit under test (1..n).")
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="bisection_steps")  # fmt: skip
    answer = models.CharField(max_length=16, choices=Answer, default=Answer.NONE, blank=True)
    reason = models.TextField(blank=True)
    shift = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    extended = models.BooleanField(default=False, help_text="Extended to its maximum runs.")
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["bisection", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["bisection", "kind", "position"], name="step_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.bisection} step {self.kind} @{self.position}: {self.answer or 'pending'}"
