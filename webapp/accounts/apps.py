from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Log in and out (Django's auth views, django-axes lockout) and API tokens."""

    name = "webapp.accounts"
    label = "accounts"
    verbose_name = "Accounts"
