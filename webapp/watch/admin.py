from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.watch.models import ChangePoint, Push, WatchPolicy


@admin.register(WatchPolicy)
class WatchPolicyAdmin(admin.ModelAdmin):
    list_display = ["tree", "enabled", "branches", "benchmarks", "start_ref", "anchor_ref",
                    "coalesce_seconds", "max_active", "poll_seconds"]  # fmt: skip
    list_filter = ["enabled"]
    filter_horizontal = ["targets"]
    readonly_fields = ["polled_at"]


@admin.register(Push)
class PushAdmin(admin.ModelAdmin):
    """Pushes are what the hooks and polling received: read-only here, but a tested head
    can be compared with the anchor on demand."""

    list_display = ["pk", "tree", "branch", "short_after", "source", "anchor", "state",
                    "reason", "received_at"]  # fmt: skip
    list_filter = ["tree", "state", "source", "anchor"]
    search_fields = ["branch", "after", "before"]
    actions = ["compare_with_anchor"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Push | None = None) -> bool:
        return False

    @admin.display(description="head")
    def short_after(self, obj: Push) -> str:
        return obj.after[:12]

    @admin.action(description="Compare the head with the tree's anchor ref now")
    def compare_with_anchor(self, request: HttpRequest, queryset: QuerySet[Push]) -> None:
        # Imported here: the services load the build engine, which admin start-up must not.
        from webapp.watch import baselines, services

        for push in queryset.select_related("tree"):
            try:
                anchor = services.request_anchor(push)
            except baselines.BaselineError as exc:
                self.message_user(request, f"push {push.pk}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"push {push.pk}: anchor comparison push {anchor.pk}")


@admin.register(ChangePoint)
class ChangePointAdmin(admin.ModelAdmin):
    list_display = ["tree", "branch", "benchmark", "metric", "target", "push", "change_pct",
                    "regression", "audience", "found_at"]  # fmt: skip
    list_filter = ["tree", "regression", "audience"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
