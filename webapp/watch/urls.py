from django.urls import path

import webapp.converters  # noqa: F401 - registers <tree:...>
from webapp.watch import api, views

app_name = "watch"

urlpatterns = [
    path("trees/<tree:name>/history/", views.tree_history, name="tree-history"),
    path(
        "api/v1/trees/<tree:name>/history/", api.TreeHistoryView.as_view(), name="api-tree-history"
    ),
]
