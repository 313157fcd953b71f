from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("watch", "0002_push_pusher_email"),
    ]

    operations = [
        # The rows found so far were found over every comparison, restricted ones included:
        # they are for the tree's members and staff. The public version of each is found
        # when the branch's next tested head ends.
        migrations.AddField(
            model_name="changepoint",
            name="audience",
            field=models.CharField(
                choices=[
                    ("public", "everyone who sees the tree (public comparisons only)"),
                    ("members", "the tree's members and staff (all its comparisons)"),
                ],
                default="members",
                help_text="Whose comparisons it was found over, and so who may see it.",
                max_length=16,
            ),
            preserve_default=False,
        ),
        migrations.RemoveConstraint(model_name="changepoint", name="change_point_once"),
        migrations.AddConstraint(
            model_name="changepoint",
            constraint=models.UniqueConstraint(
                fields=("tree", "branch", "benchmark", "metric", "target", "push", "audience"),
                name="change_point_once",
            ),
        ),
    ]
