from django.apps import AppConfig


class ComparisonsConfig(AppConfig):
    name = "webapp.comparisons"
    label = "comparisons"
    verbose_name = "Comparisons and runs"

    def ready(self) -> None:
        # Connects the handler that deletes a run's console files with its row, in every
        # process (the web app deletes runs through the admin, not only the workers).
        from webapp.comparisons import consoles  # noqa: F401
