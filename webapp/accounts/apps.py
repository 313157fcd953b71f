from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Log in and out (Django's auth views, django-axes lockout), the password change, and
    API tokens with their scopes."""

    name = "webapp.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        # The signals import the models (tokens.py): only once the app registry is ready.
        from webapp.accounts import signals

        signals.connect()
