"""Per-tree webhook secrets and the log of deliveries that passed their signature check."""

from django.db import models
from django.db.models import Q

from webapp.trees.models import Tree, sha256_validator
from webapp.watch.models import Push


class WebhookEndpoint(models.Model):
    """A tree's webhook credentials, made by `./manage.py webhook_secret` and shown once.

    The HMAC secret (GitHub and the generic git hook) is stored as is, because verifying an
    HMAC needs the key. GitLab sends its token itself, so only the token's SHA-256 is stored."""

    tree = models.OneToOneField(Tree, on_delete=models.CASCADE, related_name="webhook")
    hmac_secret = models.CharField(max_length=200, blank=True)
    gitlab_token_hash = models.CharField(
        max_length=64, blank=True, validators=[sha256_validator],
        help_text="SHA-256 (hex) of the GitLab secret token.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"webhook {self.tree}"


class Delivery(models.Model):
    """One webhook request that passed its signature check, and what became of it."""

    class Source(models.TextChoices):
        GITHUB = "github", "GitHub"
        GITLAB = "gitlab", "GitLab"
        GIT = "git", "Generic git hook"

    tree = models.ForeignKey(Tree, on_delete=models.CASCADE, related_name="deliveries")
    source = models.CharField(max_length=16, choices=Source)
    event = models.CharField(max_length=64)
    delivery_id = models.CharField(
        max_length=128, help_text="The sender's delivery id, or a SHA-256 of what it signed."
    )
    content_key = models.CharField(
        max_length=64, blank=True,
        help_text="SHA-256 of what the signature covers that makes the event (a push's "
        "source, ref, before and after; else the body): a replay with a new delivery id "
        "has the same key.",
    )  # fmt: skip
    received_at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveSmallIntegerField()
    outcome = models.TextField(blank=True)
    push = models.ForeignKey(
        Push, on_delete=models.SET_NULL, null=True, blank=True, related_name="deliveries"
    )

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-received_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["tree", "source", "delivery_id"], name="delivery_once"),
            models.UniqueConstraint(
                fields=["tree", "source", "content_key"],
                condition=~Q(content_key=""),
                name="delivery_content_once",
            ),
        ]
        indexes = [models.Index(fields=["tree", "-received_at"], name="delivery_tree_time")]

    def __str__(self) -> str:
        return f"{self.tree} {self.source} {self.event} {self.delivery_id} ({self.status_code})"
