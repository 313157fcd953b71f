"""Per-metric verdicts of a comparison, with the estimates and tests behind them."""

from django.contrib.postgres.fields import ArrayField
from django.db import models

from webapp.comparisons.models import Comparison


class Verdict(models.TextChoices):
    RELIABILITY = "reliability-regression"  # B's kernel fails more often (Boschloo, per benchmark)
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    SMALL = "significant-but-small"
    # A tail that crossed its boundary with no CI (STATS.md v3): never sized.
    SIGNIFICANT = "significant-size-not-estimated"
    NO_CHANGE = "no-meaningful-change"
    INCONCLUSIVE = "inconclusive"


class MetricVerdict(models.Model):
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="verdicts")
    benchmark = models.CharField(max_length=64)
    metric = models.CharField(max_length=64)
    statistic = models.CharField(
        max_length=16, help_text="Per-run summary tested: value, p50, mean, p90; or tail p99, max."
    )
    is_primary = models.BooleanField(default=False)
    look = models.PositiveSmallIntegerField(help_text="Sequential look (1 = first, at min runs).")
    n_a = models.PositiveIntegerField()
    n_b = models.PositiveIntegerField()
    median_a = models.FloatField()
    median_b = models.FloatField()
    shift_pct = models.FloatField(null=True, blank=True, help_text="Hodges-Lehmann shift, %.")
    ci_low_pct = models.FloatField(null=True, blank=True)
    ci_high_pct = models.FloatField(null=True, blank=True)
    p_value = models.FloatField(null=True, blank=True, help_text="Primary test, raw.")
    p_adjusted = models.FloatField(null=True, blank=True, help_text="Holm or BH adjusted.")
    p_mannwhitney = models.FloatField(null=True, blank=True)
    p_median = models.FloatField(null=True, blank=True, help_text="Mood's median test.")
    prob_b_gt_a = models.FloatField(null=True, blank=True)
    cliffs_delta = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=32, choices=Verdict)
    warnings = ArrayField(models.TextField(), default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["comparison", "benchmark", "-is_primary", "metric", "statistic"]
        constraints = [
            models.UniqueConstraint(
                fields=["comparison", "benchmark", "metric", "statistic"],
                name="metricverdict_unique",
            ),
            models.CheckConstraint(
                condition=models.Q(ci_low_pct__isnull=True)
                | models.Q(ci_low_pct__lte=models.F("ci_high_pct")),
                name="metricverdict_ci_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark}/{self.metric}[{self.statistic}]: {self.verdict}"


class JiffyDispersion(models.Model):
    """The dispersion index D of a jiffy-quantised metric from A/A boots of one build
    (stats/jiffies.py, STATS.md v3 "Measure the boot effect first"): D ~ 1 is binomial
    sampling, D >> 1 a boot-level effect. Written by `calibrate`, shown in the reports of
    comparisons that use the build."""

    build = models.ForeignKey(
        "trees.Build", on_delete=models.CASCADE, related_name="jiffy_dispersions"
    )
    benchmark = models.CharField(max_length=64)
    metric = models.CharField(max_length=64)
    source = models.CharField(
        max_length=64, help_text="Whose boots: the build's runs, or an A/A comparison's."
    )
    hz = models.PositiveIntegerField()
    boots = models.PositiveIntegerField()
    samples = models.PositiveIntegerField()
    mode = models.IntegerField(help_text="Modal jiffy count of every sample.")
    share_above = models.FloatField(help_text="Share of samples above the mode (p).")
    index = models.FloatField(null=True, blank=True, help_text="D = var(X_i) / (n p (1 - p)).")
    p_value = models.FloatField(null=True, blank=True, help_text="Chi-square test of D = 1.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.benchmark}/{self.metric} of build {self.build_id}: D {self.index}"
