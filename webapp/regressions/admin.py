from django.contrib import admin
from django.http import HttpRequest

from webapp.regressions.models import Regression, Transition


class TransitionInline(admin.TabularInline):
    model = Transition
    extra = 0
    can_delete = False
    readonly_fields = ["from_state", "to_state", "via", "by", "by_address", "message_id", "note",
                       "at"]  # fmt: skip

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Regression)
class RegressionAdmin(admin.ModelAdmin):
    """Read-only: a state moves through its page's buttons (or the API, or mail), which
    check the move and log it; an edit here would skip both."""

    list_display = ["pk", "tree", "branch", "benchmark", "metric", "state", "opened_at",
                    "closed_at"]  # fmt: skip
    list_filter = ["state", "tree"]
    search_fields = ["benchmark", "metric", "branch", "culprit", "fixed_by"]
    raw_id_fields = ["comparison", "change_point", "duplicate_of"]
    inlines = [TransitionInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
