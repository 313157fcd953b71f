from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "webapp.sweeps"
    label = "sweeps"
    verbose_name = "Sweeps"
