from django.apps import AppConfig


class LabConfig(AppConfig):
    name = "webapp.lab"
    label = "lab"
    verbose_name = "Lab hosts"
