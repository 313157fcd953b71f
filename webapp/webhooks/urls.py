"""The webhook endpoints, under /hooks/ (webapp/urls.py)."""

from django.urls import path

import webapp.converters  # noqa: F401 - registers <tree:...>
from webapp.webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("github/<tree:tree>/", views.github, name="github"),
    path("gitlab/<tree:tree>/", views.gitlab, name="gitlab"),
    path("git/<tree:tree>/", views.git, name="git"),
]
