from django.contrib import admin
from django.http import HttpRequest

from webapp.alerts.models import Alert, OptOut, Subscription


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    """Read-only: a row is the record of a mail that went out (or did not)."""

    list_display = ["pk", "comparison", "change_point", "bisection", "transition", "kind",
                    "recipient", "state", "attempts", "sent_at"]  # fmt: skip
    list_filter = ["kind", "state"]
    search_fields = ["recipient", "subject", "message_id", "in_reply_to"]
    raw_id_fields = ["comparison", "change_point", "bisection", "inbound", "transition"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["pk", "user", "address", "tree", "benchmark", "kinds", "created_at"]
    list_filter = ["tree"]
    search_fields = ["address", "user__username", "user__email"]
    raw_id_fields = ["user"]


@admin.register(OptOut)
class OptOutAdmin(admin.ModelAdmin):
    list_display = ["address", "created_at"]
    search_fields = ["address"]
