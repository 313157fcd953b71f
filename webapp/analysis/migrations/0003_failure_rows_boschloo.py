"""Failure-rate rows: the gate is Boschloo's one-sided exact test, Fisher's p is shown beside it.

Rows stored before held Fisher's p as p_value (statistic "fisher") and a Boschloo p computed
on the transposed table (SciPy's Boschloo takes each column as one side's binomial sample;
the rows were the sides). Each row is recomputed from its stored counts; its verdict is
left as it was decided then."""

from django.db import migrations
from scipy import stats as st


def _p(details: dict) -> tuple[float, float]:
    a, b = details["a"], details["b"]
    fail_a, fail_b = a["kernel_failures"], b["kernel_failures"]
    if fail_b == 0 or a["attempts"] == 0:
        return 1.0, 1.0
    table = [[fail_b, fail_a], [b["attempts"] - fail_b, a["attempts"] - fail_a]]
    fisher = float(st.fisher_exact(table, alternative="greater").pvalue)
    boschloo = float(st.boschloo_exact(table, alternative="greater").pvalue)
    return min(boschloo if boschloo == boschloo else fisher, 1.0), min(fisher, 1.0)


def forwards(apps, schema_editor):
    verdicts = apps.get_model("analysis", "MetricVerdict")
    for row in verdicts.objects.filter(statistic="fisher"):
        details = dict(row.details)
        details.pop("p_boschloo", None)
        boschloo, fisher = _p(details)
        details.update(p_fisher=fisher, test="boschloo-exact, one-sided (B fails more often)")
        row.statistic, row.p_value, row.p_adjusted, row.details = (
            "boschloo", boschloo, boschloo, details
        )  # fmt: skip
        row.save(update_fields=["statistic", "p_value", "p_adjusted", "details"])


def backwards(apps, schema_editor):
    verdicts = apps.get_model("analysis", "MetricVerdict")
    for row in verdicts.objects.filter(statistic="boschloo"):
        details = dict(row.details)
        row.p_value = row.p_adjusted = details.pop("p_fisher", row.p_value)
        row.statistic, row.details = "fisher", details
        row.save(update_fields=["statistic", "p_value", "p_adjusted", "details"])


class Migration(migrations.Migration):
    dependencies = [("analysis", "0002_reliability_regression_verdict")]
    operations = [migrations.RunPython(forwards, backwards)]
