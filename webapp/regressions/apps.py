from django.apps import AppConfig


class RegressionsConfig(AppConfig):
    name = "webapp.regressions"
    label = "regressions"
    verbose_name = "Regressions and their triage"
