from django.urls import path

import webapp.converters  # noqa: F401 - registers <tree:...>
from webapp.reports import views

app_name = "reports"

urlpatterns = [
    path("comparisons/", views.comparison_list, name="comparison-list"),
    path("comparisons/<int:pk>/", views.comparison, name="comparison"),
    path("comparisons/<int:pk>/live", views.comparison_live, name="comparison-live"),
    path("comparisons/<int:pk>/row", views.comparison_row, name="comparison-row"),
    path("comparisons/<int:pk>/cancel", views.comparison_cancel, name="comparison-cancel"),
    path("comparisons/<int:pk>/bisect", views.comparison_bisect, name="comparison-bisect"),
    path("comparisons/<int:pk>/diagnose", views.comparison_diagnose, name="comparison-diagnose"),
    path(
        "comparisons/<int:pk>/diagnosis/live",
        views.comparison_diagnosis_live,
        name="comparison-diagnosis-live",
    ),
    path("bisections/", views.bisection_list, name="bisection-list"),
    path("bisections/<int:pk>/", views.bisection, name="bisection"),
    path("bisections/<int:pk>/live", views.bisection_live, name="bisection-live"),
    path("bisections/<int:pk>/cancel", views.bisection_cancel, name="bisection-cancel"),
    path("sweeps/<int:pk>/", views.sweep, name="sweep"),
    path("sweeps/<int:pk>/cancel", views.sweep_cancel, name="sweep-cancel"),
    path("runs/<int:pk>/", views.run, name="run"),
    path("comparisons/<int:pk>/data.csv", views.comparison_csv, name="comparison-csv"),
    path("comparisons/<int:pk>/data.json", views.comparison_json, name="comparison-json"),
    path("runs/<int:pk>/console", views.run_console, name="run-console"),
    path("runs/<int:pk>/trace.txt", views.run_trace, name="run-trace"),
    path("series/<int:pk>/mbox", views.series_mbox, name="series-mbox"),
    path("series/<int:pk>/", views.series, name="series"),
    path("trees/<tree:name>/", views.tree, name="tree"),
    path("assets/plotly-<str:version>.min.js", views.plotly_js, name="plotly-js"),
]
