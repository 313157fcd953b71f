"""What an API token may do. knox's AuthToken has no room for it (swapping knox's token
model would drop every issued token), so each token rcubench issues gets one row here."""

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from knox.models import AuthToken


class Scope(models.TextChoices):
    READ = "read", "read what the account may see"
    SUBMIT = "submit", "submit and cancel comparisons"


class TokenGrant(models.Model):
    """The scopes of one knox token; a token without a row may only read (fail closed)."""

    token = models.OneToOneField(
        AuthToken, on_delete=models.CASCADE, primary_key=True, related_name="grant"
    )
    scopes = ArrayField(models.CharField(max_length=16, choices=Scope.choices))

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(scopes__contained_by=list(Scope.values))
                & Q(scopes__contains=[Scope.READ]),
                name="token_grant_known_scopes_with_read",
                violation_error_message="a token's scopes are read and optionally submit",
            )
        ]

    def __str__(self) -> str:
        return f"{self.token.token_key}: {', '.join(self.scopes)}"
