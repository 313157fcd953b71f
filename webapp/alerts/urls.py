from django.urls import path

from webapp.alerts import views

app_name = "alerts"

urlpatterns = [
    path("accounts/subscriptions/", views.subscriptions, name="subscriptions"),
    path("accounts/subscriptions/<int:pk>/delete", views.unsubscribe_one, name="delete"),
    path("accounts/subscriptions/mail-again", views.undo_opt_out, name="undo-opt-out"),
    path("alerts/unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
]
