from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "webapp.analysis"
    label = "analysis"
    verbose_name = "Analysis"
