from django.apps import AppConfig


class WatchConfig(AppConfig):
    name = "webapp.watch"
    label = "watch"
    verbose_name = "Watched trees"
