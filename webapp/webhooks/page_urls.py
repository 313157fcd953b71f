"""The delivery log page, under /trees/ (webapp/urls.py)."""

from django.urls import path

from webapp.webhooks import views

app_name = "deliveries"

urlpatterns = [
    path("<slug:tree>/deliveries/", views.deliveries, name="list"),
]
