"""Guard lines (webapp/comparisons/guards.py): per benchmark, the secondaries its spec marks
as guards, in the spec's order, read at their run-level value, with their own verdicts; in
the report beside the primaries, the API's summary, the mail and `compare`'s output."""

import pytest
from django.test import Client

from tests.support.factories import MetricVerdictFactory
from webapp.alerts import messages
from webapp.alerts.tests.conftest import make_comparison
from webapp.comparisons import exports
from webapp.comparisons.guards import guard_lines
from webapp.comparisons.summary import verdict_rows

pytestmark = pytest.mark.django_db


def _guarded():
    """make_comparison's regression (its primary and its `gps` row) with rcuscale's other
    guards and two rows that are none: a non-guard secondary and another benchmark's."""
    c = make_comparison(series=False)
    for metric, shift, low, high, verdict in (
        ("batches", 31.4, 28.0, 35.1, "regression"),
        ("updates_per_gp", -23.9, -26.0, -21.7, "regression"),
        ("test_duration", 9.0, 7.0, 11.0, "regression"),
    ):
        MetricVerdictFactory.create(
            comparison=c, metric=metric, statistic="value", is_primary=False,
            shift_pct=shift, ci_low_pct=low, ci_high_pct=high, verdict=verdict,
            details={"unit": "count", "relative": True},
        )  # fmt: skip
    MetricVerdictFactory.create(comparison=c, benchmark="smt-toggle", metric="smt_off_ms",
                                statistic="value", is_primary=False)  # fmt: skip
    return c


def test_a_benchmarks_guards_are_its_guard_secondaries_in_the_specs_order():
    c = _guarded()
    (line,) = guard_lines(verdict_rows(c))
    assert line.benchmark == "sync-rcu-latency"
    assert [(i.label, i.metric, i.statistic) for i in line.items] == [
        ("calls", "gps", "value"),
        ("grace periods", "batches", "value"),
        ("calls per GP", "updates_per_gp", "value"),
    ]
    assert line.text == (
        "guards: calls +0.00% [-1.00, +1.00]; grace periods +31.40% [+28.00, +35.10] "
        "(regression); calls per GP -23.90% [-26.00, -21.70] (regression)"
    )


def test_no_guard_rows_no_line():
    c = make_comparison(series=False)
    c.verdicts.filter(metric="gps").delete()
    assert guard_lines(verdict_rows(c)) == []


def test_the_summary_the_mail_and_the_report_carry_the_line():
    c = _guarded()
    summary = exports.summary(c)
    assert [g["benchmark"] for g in summary["guards"]] == ["sync-rcu-latency"]
    assert summary["guards"][0]["guards"][1] == {
        "label": "grace periods", "metric": "batches", "statistic": "value",
        "shift": "+31.40%", "ci": "[+28.00, +35.10]", "verdict": "regression",
    }  # fmt: skip
    block = messages.guard_block(verdict_rows(c))
    assert " ".join(block).startswith("sync-rcu-latency guards: calls +0.00% [-1.00, +1.00];")
    assert all(len(line) <= messages.WIDTH for line in block), block
    html = Client().get(f"/comparisons/{c.pk}/").content.decode()
    guards = html[html.index('id="guards"') : html.index("</ul>", html.index('id="guards"'))]
    assert "grace periods" in guards
    assert "+31.40% [+28.00, +35.10]" in guards
    assert "badge v-regression" in guards
