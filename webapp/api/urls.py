"""The REST API, version 1 (/api/v1/...), and its OpenAPI schema (/api/schema/)."""

from django.urls import URLPattern, URLResolver, path, re_path, register_converter
from drf_spectacular.views import SpectacularAPIView

import webapp.converters  # noqa: F401 - registers <tree:...>
from webapp.api import regressions, sweeps, views

app_name = "api"


class SignedIntConverter:
    """An id, signed: a negative one reaches the view and is a JSON 404 like any unknown id
    (the int converter would leave it to Django's HTML 404)."""

    regex = "-?[0-9]+"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(SignedIntConverter, "id")

urlpatterns: list[URLPattern | URLResolver] = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("v1/trees/", views.TreeList.as_view(), name="tree-list"),
    path("v1/trees/<tree:name>/", views.TreeDetail.as_view(), name="tree-detail"),
    path("v1/targets/", views.TargetList.as_view(), name="target-list"),
    path("v1/benchmarks/", views.BenchmarkList.as_view(), name="benchmark-list"),
    path("v1/comparisons/", views.ComparisonList.as_view(), name="comparison-list"),
    path("v1/comparisons/<id:pk>/", views.ComparisonDetail.as_view(), name="comparison-detail"),
    path(
        "v1/comparisons/<id:pk>/cancel/", views.ComparisonCancel.as_view(), name="comparison-cancel"
    ),
    path(
        "v1/comparisons/<id:pk>/diagnose/",
        views.ComparisonDiagnose.as_view(),
        name="comparison-diagnose",
    ),
    path("v1/comparisons/<id:pk>/runs/", views.ComparisonRuns.as_view(), name="comparison-runs"),
    path(
        "v1/comparisons/<id:pk>/verdicts/",
        views.ComparisonVerdicts.as_view(),
        name="comparison-verdicts",
    ),
    path("v1/comparisons/<id:pk>/data.csv", views.ComparisonCSV.as_view(), name="comparison-csv"),
    path(
        "v1/comparisons/<id:pk>/data.json", views.ComparisonJSON.as_view(), name="comparison-json"
    ),
    path(
        "v1/comparisons/<id:pk>/bisect/", views.ComparisonBisect.as_view(), name="comparison-bisect"
    ),
    path("v1/bisections/", views.BisectionList.as_view(), name="bisection-list"),
    path("v1/bisections/<id:pk>/", views.BisectionDetail.as_view(), name="bisection-detail"),
    path("v1/bisections/<id:pk>/cancel/", views.BisectionCancel.as_view(), name="bisection-cancel"),
    path("v1/sweeps/", sweeps.SweepList.as_view(), name="sweep-list"),
    path("v1/sweeps/<id:pk>/", sweeps.SweepDetail.as_view(), name="sweep-detail"),
    path("v1/sweeps/<id:pk>/cancel/", sweeps.SweepCancel.as_view(), name="sweep-cancel"),
    path("v1/regressions/", regressions.RegressionList.as_view(), name="regression-list"),
    path(
        "v1/regressions/<id:pk>/", regressions.RegressionDetail.as_view(), name="regression-detail"
    ),
    path(
        "v1/regressions/<id:pk>/move/", regressions.RegressionMove.as_view(), name="regression-move"
    ),
    path("v1/runs/<id:pk>/", views.RunDetail.as_view(), name="run-detail"),
    path("v1/runs/<id:pk>/measurements/", views.RunMeasurements.as_view(), name="run-measurements"),
    path("v1/tokens/", views.TokenList.as_view(), name="token-list"),
    path("v1/tokens/<slug:token_key>/", views.TokenRevoke.as_view(), name="token-revoke"),
    # Anything else under /api/ is a JSON 404 (not the site's HTML page).
    re_path(r"^.*$", views.not_found, name="not-found"),
]
