from django.urls import path

from webapp.watch import api, views

app_name = "watch"

urlpatterns = [
    path("trees/<slug:name>/history/", views.tree_history, name="tree-history"),
    path(
        "api/v1/trees/<slug:name>/history/", api.TreeHistoryView.as_view(), name="api-tree-history"
    ),
]
