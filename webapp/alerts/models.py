"""Outgoing alert mails; one row per message so a retry never sends a duplicate."""

from django.contrib.postgres.fields import ArrayField
from django.db import models

from webapp.comparisons.models import Comparison
from webapp.states import Result, State, result_only_when_done


class Alert(models.Model):
    class Kind(models.TextChoices):
        REGRESSION = "regression"
        REPORT = "report", "Report ready"

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=16, choices=Kind)
    recipients = ArrayField(models.EmailField())
    subject = models.CharField(max_length=998)
    message_id = models.CharField(max_length=998, unique=True)
    in_reply_to = models.CharField(
        max_length=998, blank=True, help_text="Message-Id of the patch mail it replies to."
    )
    state = models.CharField(max_length=16, choices=State, default=State.QUEUED)
    result = models.CharField(max_length=16, choices=Result, default=Result.NONE, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [result_only_when_done("alert_result_only_when_done")]

    def __str__(self) -> str:
        return f"{self.kind} alert for comparison {self.comparison_id}"
