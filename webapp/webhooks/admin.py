"""Read-only admin: deliveries, and whether a tree's secrets are set (never their values;
they are made and shown once by `./manage.py webhook_secret`)."""

from django.contrib import admin
from django.http import HttpRequest

from webapp.webhooks.models import Delivery, WebhookEndpoint


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(_ReadOnly):
    list_display = ["tree", "hmac_secret_set", "gitlab_token_set", "created_at", "rotated_at"]
    fields = ["tree", "hmac_secret_set", "gitlab_token_set", "created_at", "rotated_at"]
    readonly_fields = ["tree", "hmac_secret_set", "gitlab_token_set", "created_at", "rotated_at"]

    @admin.display(boolean=True, description="HMAC secret set")
    def hmac_secret_set(self, obj: WebhookEndpoint) -> bool:
        return bool(obj.hmac_secret)

    @admin.display(boolean=True, description="GitLab token set")
    def gitlab_token_set(self, obj: WebhookEndpoint) -> bool:
        return bool(obj.gitlab_token_hash)


@admin.register(Delivery)
class DeliveryAdmin(_ReadOnly):
    list_display = ["received_at", "tree", "source", "event", "delivery_id", "status_code",
                    "outcome", "push"]  # fmt: skip
    list_filter = ["tree", "source", "status_code"]
    search_fields = ["delivery_id", "outcome"]
    list_select_related = ["tree", "push"]
    date_hierarchy = "received_at"
