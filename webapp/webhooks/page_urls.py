"""The delivery log page, under /trees/ (webapp/urls.py)."""

from django.urls import path

import webapp.converters  # noqa: F401 - registers <tree:...>
from webapp.webhooks import views

app_name = "deliveries"

urlpatterns = [
    path("<tree:tree>/deliveries/", views.deliveries, name="list"),
]
