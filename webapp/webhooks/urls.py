"""The webhook endpoints, under /hooks/ (webapp/urls.py)."""

from django.urls import path

from webapp.webhooks import views

app_name = "webhooks"

urlpatterns = [
    path("github/<slug:tree>/", views.github, name="github"),
    path("gitlab/<slug:tree>/", views.gitlab, name="gitlab"),
    path("git/<slug:tree>/", views.git, name="git"),
]
