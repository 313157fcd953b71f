from django.apps import AppConfig


class BisectionsConfig(AppConfig):
    name = "webapp.bisections"
    label = "bisections"
    verbose_name = "Bisections and attributions"
