from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "webapp.reports"
    label = "reports"
    verbose_name = "Reports"
