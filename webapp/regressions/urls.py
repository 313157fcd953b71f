from django.urls import path

import webapp.converters  # noqa: F401 - registers <tree:...>
from webapp.regressions import views

app_name = "regressions"

urlpatterns = [
    path("regressions/<int:pk>/", views.regression, name="regression"),
    path("regressions/<int:pk>/move/", views.move, name="move"),
    path("trees/<tree:name>/regressions/", views.tree_triage, name="triage"),
]
