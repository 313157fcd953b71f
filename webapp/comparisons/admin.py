from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.comparisons.models import Comparison, Measurement, Run, Target


@admin.register(Target)
class TargetAdmin(admin.ModelAdmin):
    list_display = [
        "name", "kind", "arch", "machine", "topology", "memory_mb", "queue", "enabled", "base"
    ]  # fmt: skip
    # "base": empty for a target of its own, set for one generated for sweeps.
    list_filter = ["kind", "arch", "enabled", ("base", admin.EmptyFieldListFilter)]
    list_select_related = ["base"]
    search_fields = ["name", "description"]

    @admin.display(description="sockets x cores x threads")
    def topology(self, obj: Target) -> str:
        return f"{obj.sockets} x {obj.cores} x {obj.threads} = {obj.cpus}"


class RunInline(admin.TabularInline):
    model = Run
    extra = 0
    fields = readonly_fields = (
        "order",
        "side",
        "index",
        "state",
        "result",
        "error_code",
        "host",
        "wall_seconds",
    )
    can_delete = False
    show_change_link = True


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "revision_a",
        "revision_b",
        "target",
        "state",
        "result",
        "verdict",
        "trigger",
        "created_at",
    ]
    list_filter = ["state", "result", "verdict", "target", "trigger"]
    search_fields = [
        "revision_a__ref",
        "revision_b__ref",
        "revision_a__sha",
        "revision_b__sha",
        "requested_by",
    ]
    list_select_related = ["revision_a__tree", "revision_b__tree", "target"]
    raw_id_fields = ["revision_a", "revision_b", "build_a", "build_b"]
    readonly_fields = ["seed", "created_at", "started_at", "finished_at"]
    inlines = [RunInline]


class MeasurementInline(admin.TabularInline):
    model = Measurement
    extra = 0
    fields = readonly_fields = (
        "benchmark",
        "metric",
        "unit",
        "sample_count",
    )
    can_delete = False

    @admin.display(description="samples")
    def sample_count(self, obj: Measurement) -> int:
        return len(obj.samples or [])


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "comparison",
        "benchmark",
        "side",
        "index",
        "order",
        "state",
        "result",
        "error_code",
        "wall_seconds",
        "host",
        "heartbeat_at",
    ]
    list_filter = ["state", "result", "error_code", "side", "benchmark"]
    search_fields = ["host", "comparison__id", "benchmark", "error_message"]
    raw_id_fields = ["comparison", "retry_of"]
    readonly_fields = ["created_at", "started_at", "finished_at", "heartbeat_at"]
    inlines = [MeasurementInline]
    actions = ["reap_stale"]

    @admin.action(description="End stale running runs now (reaper)")
    def reap_stale(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        # Imported here: admin modules load at django.setup(), and the run service loads the
        # VM runner and libvirt (tests/test_layers.py holds that setup loads neither).
        from webapp.comparisons.runs import reap_stale_runs

        self.message_user(request, f"{reap_stale_runs()} stale run(s) marked incomplete.")


@admin.register(Measurement)
class MeasurementAdmin(admin.ModelAdmin):
    list_display = ["run", "benchmark", "metric", "unit"]
    list_filter = ["benchmark", "metric"]
    raw_id_fields = ["run"]
