from django.urls import URLPattern, URLResolver, path

from webapp.comparisons import views

app_name = "comparisons"

urlpatterns: list[URLPattern | URLResolver] = [
    path("submit/", views.submit, name="submit"),
]
