"""The raw-data downloads: CSV and JSON of every sample, with the header and verdicts."""

import csv
import io
import json
import math

import pytest

from tests.support.factories import MeasurementFactory, MetricVerdictFactory, RunFactory
from webapp.comparisons import exports
from webapp.comparisons.reproducer import reproducer
from webapp.reports.tests.conftest import (
    RUNS_PER_SIDE,
    VERDICTS_IN_REPORT_ORDER,
    WRITER_SAMPLES,
    writer_samples,
)

pytestmark = pytest.mark.django_db


def _csv_rows(c):
    return list(csv.reader(io.StringIO("".join(exports.csv_chunks(c)))))


def test_csv_has_one_row_per_run_metric_and_sample(done_comparison):
    rows = _csv_rows(done_comparison)
    assert rows[0] == ["comparison_id", "benchmark", "metric", "unit", "side", "run_index",
                       "run_order", "run_result", "run_traced", "sample_index",
                       "value"]  # fmt: skip
    # 2 sides x 3 runs, each with WRITER_SAMPLES writer durations and one gps value.
    assert len(rows) - 1 == 2 * RUNS_PER_SIDE * (WRITER_SAMPLES + 1)
    # Run order 1 is B's slot 0 (ABBA): its writer durations, in sample order.
    b0 = [r for r in rows[1:] if r[6] == "1" and r[2] == "writer_duration"]
    assert [r[:10] for r in b0[:2]] == [
        [str(done_comparison.pk), "sync-rcu-latency", "writer_duration", "ms", "B", "0", "1",
         "ok", "False", str(i)] for i in range(2)
    ]  # fmt: skip
    assert [float(r[10]) for r in b0] == writer_samples("B", 0)  # exact round trip
    orders = [int(r[6]) for r in rows[1:]]
    assert orders == sorted(orders)


def test_csv_includes_runs_that_are_not_data_with_their_result():
    run = RunFactory.create(state="done", result="failed", error_code="parse-failed")
    MeasurementFactory.create(run=run, samples=[1.5])
    rows = _csv_rows(run.comparison)
    assert len(rows) == 2
    assert rows[1][7] == "failed"


def _json(c):
    return json.loads("".join(exports.json_chunks(c)))


def test_json_holds_header_verdicts_and_every_sample(done_comparison):
    c = done_comparison
    data = _json(c)
    head = data["comparison"]
    assert head["id"] == c.pk
    assert (head["state"], head["result"], head["verdict"]) == ("done", "ok", "regression")
    a, b = head["kernels"]
    assert (a["side"], a["ref"], a["tree"], a["sha"]) == ("A", "v6.12", c.revision_a.tree.name,
                                                          c.revision_a.sha)  # fmt: skip
    assert (b["ref"], b["build"]["result"], b["series"]) == ("rcu/next", "ok", None)
    assert head["target"]["name"] == "qemu-x86_64"
    runs_a, runs_b = head["runs"]
    assert (runs_a["ok"], runs_a["failed"]) == (RUNS_PER_SIDE, 0)
    assert (runs_b["ok"], runs_b["failed"], runs_b["errors"]) == (RUNS_PER_SIDE, 1, {"panic": 1})
    assert head["created_at"] == c.created_at.isoformat()
    assert data["report_url"].endswith(f"/comparisons/{c.pk}/")
    assert data["reproducer"] == reproducer(c)

    verdicts = data["verdicts"]
    assert [(v["metric"], v["statistic"], v["is_primary"], v["verdict"]) for v in verdicts] == (
        VERDICTS_IN_REPORT_ORDER
    )
    assert verdicts[0]["unit"] == "ms"
    assert (verdicts[0]["shift_pct"], verdicts[0]["p_adjusted"]) == (9.9, 0.0036)

    samples = data["samples"]
    assert samples["columns"] == list(exports.SAMPLE_COLUMNS)
    assert len(samples["rows"]) == 2 * RUNS_PER_SIDE * (WRITER_SAMPLES + 1)
    col = {name: i for i, name in enumerate(samples["columns"])}
    b0 = [r for r in samples["rows"] if r[col["run_order"]] == 1 and r[col["metric"]] ==
          "writer_duration"]  # fmt: skip
    assert [r[col["value"]] for r in b0] == writer_samples("B", 0)
    assert {r[col["side"]] for r in b0} == {"B"}


def test_json_writes_non_finite_numbers_as_null():
    run = RunFactory.create(state="done", result="ok")
    MeasurementFactory.create(run=run, samples=[1.0, math.nan, math.inf])
    MetricVerdictFactory.create(comparison=run.comparison, p_adjusted=math.nan)
    data = _json(run.comparison)
    assert [r[-1] for r in data["samples"]["rows"]] == [1.0, None, None]
    assert data["verdicts"][0]["p_adjusted"] is None


def test_json_of_a_comparison_without_samples_is_valid(running_comparison):
    assert _json(running_comparison)["samples"]["rows"] == []


def test_json_says_how_each_p_was_obtained_and_holds_the_sign_test():
    sign = {"k": 20, "n": 24, "below": 4, "ties": 0, "median_a": 6.0, "p": 0.0015,
            "above_is": "worse"}  # fmt: skip
    v = MetricVerdictFactory.create(details={"p_method": "t-approximation", "p_permutations": 9999,
                                             "sign_test": sign})  # fmt: skip
    MetricVerdictFactory.create(comparison=v.comparison, statistic="p99", is_primary=False)
    by = {d["statistic"]: d for d in _json(v.comparison)["verdicts"]}
    assert (by["p50"]["p_method"], by["p50"]["p_permutations"]) == ("t-approximation", 9999)
    assert by["p50"]["details"]["sign_test"] == sign
    assert (by["p99"]["p_method"], by["p99"]["p_permutations"]) == (None, None)  # stored before
