from django.urls import URLPattern, URLResolver

app_name = "api"

urlpatterns: list[URLPattern | URLResolver] = []
