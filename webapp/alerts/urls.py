from django.urls import path

from webapp.alerts import views

app_name = "alerts"

urlpatterns = [
    path("accounts/subscriptions/", views.subscriptions, name="subscriptions"),
    path("accounts/subscriptions/<int:pk>/delete", views.unsubscribe_one, name="delete"),
    path("alerts/unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
]
