from django.contrib import admin
from django.urls import include, path

from webapp.views import healthz

admin.site.site_header = "rcubench administration"
admin.site.site_title = "rcubench"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("webapp.accounts.urls")),
    path("", include("webapp.alerts.urls")),  # /accounts/subscriptions/, /alerts/unsubscribe/
    path("", include("webapp.watch.urls")),  # before api/: its catch-all 404s the rest
    path("", include("webapp.regressions.urls")),  # /regressions/<pk>/, /trees/<name>/regressions/
    path("api/", include("webapp.api.urls")),
    path("hooks/", include("webapp.webhooks.urls")),
    path("trees/", include("webapp.webhooks.page_urls")),
    path("", include("webapp.comparisons.urls")),
    path("", include("webapp.sweeps.urls")),
    path("", include("webapp.reports.urls")),
]
