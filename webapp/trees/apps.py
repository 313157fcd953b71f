from django.apps import AppConfig


class TreesConfig(AppConfig):
    name = "webapp.trees"
    label = "trees"
    verbose_name = "Trees, series and builds"
