"""Tokens issued before scopes existed could do everything a session can: they keep read
and submit (CLIs already set up keep working), and their owners can revoke them; tokens
made from now on get the scopes asked for (read by default)."""

from typing import Any

from django.db import migrations


def grant_issued(apps: Any, schema_editor: Any) -> None:
    auth_token = apps.get_model("knox", "AuthToken")
    grant = apps.get_model("accounts", "TokenGrant")
    grant.objects.bulk_create(
        [grant(token=t, scopes=["read", "submit"]) for t in auth_token.objects.filter(grant=None)]
    )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(grant_issued, migrations.RunPython.noop)]
