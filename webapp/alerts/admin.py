from django.contrib import admin

from webapp.alerts.models import Alert


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["comparison", "kind", "subject", "state", "result", "sent_at"]
    list_filter = ["kind", "state", "result"]
    search_fields = ["subject", "message_id", "in_reply_to"]
    raw_id_fields = ["comparison"]
    readonly_fields = ["created_at", "sent_at"]
