"""An index for the comparison list and the API list: newest first, a page at a time."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("comparisons", "0009_comparison_visibility_submitter"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="comparison",
            index=models.Index(fields=["-created_at", "-id"], name="comparison_newest_first"),
        ),
    ]
