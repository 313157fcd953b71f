"""Sweeps: one A/B pair run across the points of one axis (a target's topology, a boot
parameter's values or a benchmark's variant parameter), and the verdict on how B scales
against A.

Each point is an ordinary comparison, submitted through the one way in, with the sweep's
cohort (`sweep-<id>`): the orchestrator runs every point's look in one interleaved schedule
(orchestrator.release_cohort), so no point runs after another. The scaling and interaction
verdicts (stats/sweeps.py) are stored when the last point ends.
"""

from django.contrib.postgres.fields import ArrayField
from django.db import models

from webapp.comparisons.models import Comparison, Target


class Sweep(models.Model):
    class Axis(models.TextChoices):
        TOPOLOGY = "topology", "Target topology (vCPUs)"
        CMDLINE = "cmdline", "A boot parameter's values"
        VARIANT = "variant", "A benchmark's variant parameter (e.g. rcuscale.nwriters)"

    class Trigger(models.TextChoices):
        WEB = "web"
        API = "api"
        CLI = "cli"
        WEBHOOK = "webhook"  # a watched tree's push (WatchPolicy.sweep_axis)

    axis = models.CharField(max_length=16, choices=Axis)
    parameter = models.CharField(
        max_length=128,
        blank=True,
        help_text="The boot parameter (cmdline axis) or the benchmark's parameter (variant).",
    )
    values = ArrayField(models.CharField(max_length=64), help_text="The axis' values, in order.")
    log_axis = models.BooleanField(
        help_text="Slopes on log-log scales (the growth exponent): a count on the axis."
    )
    base_target = models.ForeignKey(Target, on_delete=models.PROTECT, related_name="+")
    benchmark = models.CharField(max_length=64, help_text="The benchmark whose primary is judged.")
    # The run-level primary judged ("writer_duration", "p50"): stored with the verdict.
    metric = models.CharField(max_length=64, blank=True)
    statistic = models.CharField(max_length=16, blank=True)
    # Set when every point has ended (services.conclude); blank while it runs.
    verdict = models.CharField(max_length=32, blank=True, help_text="The scaling verdict.")
    interaction_verdict = models.CharField(max_length=32, blank=True)
    # With the point rows judged ("points": summary.stored_rows reads them back).
    result = models.JSONField(
        default=dict, blank=True, help_text="The slopes, ratio, interaction and their CIs."
    )
    error_message = models.TextField(blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger)
    requested_by = models.CharField(max_length=254, blank=True)
    submitted_by = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="sweeps"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        what = "vCPUs" if self.axis == self.Axis.TOPOLOGY else self.parameter
        return f"sweep #{self.pk}: {what} = {', '.join(self.values)}"

    @property
    def cohort(self) -> str:
        return f"sweep-{self.pk}"

    @property
    def done(self) -> bool:
        return self.finished_at is not None


class SweepPoint(models.Model):
    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="points")
    position = models.PositiveSmallIntegerField()
    value = models.CharField(max_length=64)
    x = models.FloatField(
        null=True, blank=True, help_text="The value on the axis (vCPUs; a number); none: a label."
    )
    comparison = models.OneToOneField(
        Comparison, on_delete=models.PROTECT, related_name="sweep_point"
    )

    class Meta:
        ordering = ["sweep", "position"]
        constraints = [
            models.UniqueConstraint(fields=["sweep", "position"], name="sweep_point_position"),
        ]

    def __str__(self) -> str:
        return f"{self.sweep} point {self.position}: {self.value}"
