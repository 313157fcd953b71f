from django.contrib import admin

from webapp.analysis.models import MetricVerdict


@admin.register(MetricVerdict)
class MetricVerdictAdmin(admin.ModelAdmin):
    list_display = [
        "comparison",
        "benchmark",
        "metric",
        "statistic",
        "is_primary",
        "shift_pct",
        "ci_low_pct",
        "ci_high_pct",
        "p_value",
        "p_adjusted",
        "verdict",
    ]
    list_filter = ["verdict", "benchmark", "is_primary"]
    search_fields = ["benchmark", "metric"]
    raw_id_fields = ["comparison"]
