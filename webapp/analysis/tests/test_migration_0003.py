"""Migration 0003: a failure-rate row stored under Fisher becomes a Boschloo row, its p
recomputed from the counts it stored, nothing else changed; and back."""

import math

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.factories import ComparisonFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("analysis", "0002_reliability_regression_verdict")]
AFTER = [("analysis", "0003_failure_rows_boschloo")]


def _migrate(target: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _side(attempts: int, failures: int) -> dict[str, object]:
    return {"attempts": attempts, "ok": attempts - failures, "kernel_failures": failures,
            "host_failures": 0, "by_outcome": {"panic": failures} if failures else {}}  # fmt: skip


def test_a_fisher_row_is_recomputed_as_boschloo_and_back():
    comparison = ComparisonFactory.create()
    apps = _migrate(BEFORE)
    fisher = math.comb(24, 6) / math.comb(48, 6)  # 0/24 vs 6/24, as stored before
    verdicts = apps.get_model("analysis", "MetricVerdict")
    verdicts.objects.create(
        comparison_id=comparison.pk, benchmark="boot-time", metric="failure_rate",
        statistic="fisher", is_primary=True, look=1, n_a=24, n_b=24, median_a=0.0,
        median_b=25.0, p_value=fisher, p_adjusted=fisher, verdict="no-meaningful-change",
        details={"a": _side(24, 0), "b": _side(24, 6), "p_boschloo": 0.0041},
    )  # fmt: skip
    try:
        row = _migrate(AFTER).get_model("analysis", "MetricVerdict").objects.get()
        assert row.statistic == "boschloo"
        assert row.p_value == row.p_adjusted == pytest.approx(0.0066457, abs=1e-6)
        assert row.details["p_fisher"] == pytest.approx(fisher)
        assert "p_boschloo" not in row.details  # the transposed table's p is gone
        assert row.verdict == "no-meaningful-change"  # as decided then
        back = _migrate(BEFORE).get_model("analysis", "MetricVerdict").objects.get()
        assert (back.statistic, back.p_value) == ("fisher", pytest.approx(fisher))
    finally:  # the tests after this one need the latest schema
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
