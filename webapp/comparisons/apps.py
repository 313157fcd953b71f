from django.apps import AppConfig


class ComparisonsConfig(AppConfig):
    name = "webapp.comparisons"
    label = "comparisons"
    verbose_name = "Comparisons and runs"
