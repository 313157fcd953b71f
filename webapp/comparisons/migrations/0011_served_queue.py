"""Served queues: each bench worker's heartbeat for the target queues it consumes."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("comparisons", "0010_comparison_newest_first_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="ServedQueue",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=80)),
                (
                    "worker",
                    models.CharField(help_text="The worker's Celery hostname.", max_length=255),
                ),
                ("seen_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["queue", "worker"],
                "constraints": [
                    models.UniqueConstraint(fields=("queue", "worker"), name="served_queue_unique")
                ],
            },
        ),
    ]
