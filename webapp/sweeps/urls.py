from django.urls import URLPattern, URLResolver, path

from webapp.sweeps import views

app_name = "sweeps"

urlpatterns: list[URLPattern | URLResolver] = [
    path("sweeps/new/", views.submit, name="submit"),
]
