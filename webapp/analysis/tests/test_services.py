"""Verdicts stored from real database rows, and the calibrate command."""

import math

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from stats import methods, verdicts
from stats.tests.test_across_looks import _flip_data, _flip_metric
from tests.support.factories import BuildFactory, ComparisonFactory, MeasurementFactory, RunFactory
from webapp.analysis import services
from webapp.analysis.models import MetricVerdict
from webapp.analysis.services import analyse_comparison, design_for, metric_inputs
from webapp.comparisons.models import Comparison, Run

pytestmark = pytest.mark.django_db

BOOT_METRICS = ("kernel_to_init_ms", "init_to_ready_ms", "host_to_ready_ms", "rcu_expedited",
                "rcu_normal")  # fmt: skip


def _boot_time_runs(comparison, n, shift, rng, *, failed=0):
    """n ok runs per side in ABBA order, plus `failed` failed runs on side B."""
    order = 0
    for i in range(n):
        for side in "AB" if i % 2 == 0 else "BA":
            run = RunFactory.create(comparison=comparison, benchmark="boot-time", side=side,
                                    index=i, order=order, state="done", result="ok")  # fmt: skip
            order += 1
            base = 1360.0 * (1 + shift if side == "B" else 1)
            values = {"kernel_to_init_ms": rng.lognormal(math.log(base), 0.03),
                      "init_to_ready_ms": rng.lognormal(math.log(40), 0.05),
                      "host_to_ready_ms": rng.lognormal(math.log(4500), 0.03),
                      "rcu_expedited": 0.0, "rcu_normal": 0.0}  # fmt: skip
            for metric, v in values.items():
                MeasurementFactory.create(run=run, benchmark="boot-time", metric=metric,
                                          unit="ms", samples=[float(v)])  # fmt: skip
    for k in range(failed):
        RunFactory.create(comparison=comparison, benchmark="boot-time", side="B", index=n + k,
                          order=order + k, state="done", result="failed",
                          error_code="parse-failed")  # fmt: skip


def test_analysis_stores_one_verdict_per_statistic_and_is_idempotent():
    rng = np.random.default_rng(1)
    comparison = ComparisonFactory.create(benchmarks=["boot-time"])
    _boot_time_runs(comparison, 24, 0.10, rng, failed=2)
    analysis = analyse_comparison(comparison.pk)
    assert analysis.need_more_runs == 0
    every = MetricVerdict.objects.filter(comparison=comparison)
    failures = every.get(metric="failure_rate")
    rows = every.exclude(metric="failure_rate")
    assert sorted(rows.values_list("metric", flat=True)) == sorted(BOOT_METRICS)
    # The 2 parse failures count against B's kernel, but 2 of 26 against 0 of 24 is no
    # significant excess: the row carries the counts and does not touch the verdict.
    assert (failures.verdict, failures.n_a, failures.n_b) == ("no-meaningful-change", 24, 26)
    assert failures.details["b"]["by_outcome"] == {"parse-failed": 2}
    # Fisher one-sided: both failures fall on B's 26 of the 50 attempts, C(26,2)/C(50,2);
    # Boschloo, which decides, is below it and far above the first look's .0075.
    assert failures.details["p_fisher"] == pytest.approx(26 * 25 / (50 * 49), rel=1e-12)
    assert failures.p_value is not None
    assert 0.0075 < failures.p_value < failures.details["p_fisher"]
    primary = rows.get(is_primary=True)
    assert (primary.metric, primary.statistic, primary.verdict) == (
        "kernel_to_init_ms",
        "value",
        "regression",
    )
    assert (primary.n_a, primary.n_b) == (24, 24)  # the failed runs are not data
    assert primary.ci_low_pct is not None
    assert primary.ci_high_pct is not None
    assert primary.ci_low_pct < (primary.shift_pct or 0) < primary.ci_high_pct
    assert primary.details["adjustment"] == "holm"
    assert rows.get(metric="rcu_normal").verdict == "no-meaningful-change"  # constant: p 1
    assert Comparison.objects.get(pk=comparison.pk).verdict == "regression"
    analyse_comparison(comparison.pk)
    assert MetricVerdict.objects.filter(comparison=comparison).count() == len(BOOT_METRICS) + 1


def test_too_few_runs_stores_nothing():
    rng = np.random.default_rng(2)
    comparison = ComparisonFactory.create(benchmarks=["boot-time"])
    _boot_time_runs(comparison, 23, 0.0, rng)
    with pytest.raises(verdicts.TooFewRuns, match="23 runs per side"):
        analyse_comparison(comparison.pk)
    assert not MetricVerdict.objects.filter(comparison=comparison).exists()


def test_calibrate_command_reports_rates_and_noise_floor(capsys):
    rng = np.random.default_rng(3)
    build = BuildFactory.create()
    comparison = ComparisonFactory.create(benchmarks=["boot-time"], build_a=build, build_b=build)
    _boot_time_runs(comparison, 24, 0.0, rng)
    call_command("calibrate", build=build.pk, benchmark="boot-time", splits=200)
    out = capsys.readouterr().out
    assert "boot-time/kernel_to_init_ms [value]" in out
    assert "48 runs, blocks of 4, 200 A/A splits of 24 runs per side" in out
    assert "false alarms at alpha 0.05" in out
    assert "run-to-run CV 3." in out  # the 3% the runs were drawn with
    # Detectable shifts at the level the last of 4 looks holds the test to, not .05.
    assert "(80% power, alpha 0.0381, the last look's)" in out


def test_calibrate_command_names_bad_input():
    build = BuildFactory.create()
    with pytest.raises(CommandError, match="no build with id 999999"):
        call_command("calibrate", build=999999, benchmark="boot-time")
    with pytest.raises(CommandError, match="0 values, at least 16 needed"):
        call_command("calibrate", build=build.pk, benchmark="boot-time")


def test_a_zero_p99_side_is_stored_as_none_with_the_reason_not_rejected():
    # Side A's writer durations are all 0: its pooled p99 and max are 0. The ratio used to
    # be inf and its CI NaN, which the JSON field rejected: the comparison never finished.
    rng = np.random.default_rng(4)
    comparison = ComparisonFactory.create(benchmarks=["sync-rcu-latency"])
    order = 0
    for i in range(24):
        for side in "AB" if i % 2 == 0 else "BA":
            run = RunFactory.create(comparison=comparison, side=side, index=i, order=order,
                                    state="done", result="ok")  # fmt: skip
            order += 1
            samples = [0.0] * 50 if side == "A" else rng.lognormal(math.log(6), 0.1, 50)
            MeasurementFactory.create(run=run, samples=[float(v) for v in samples])
    analyse_comparison(comparison.pk)
    rows = {
        v.statistic: v
        for v in MetricVerdict.objects.filter(comparison=comparison)
        if v.statistic != "boschloo"
    }
    assert set(rows) == {"p50", "mean", "p90", "p99", "max"}
    for name in ("p99", "max"):
        v = rows[name]
        assert (v.shift_pct, v.ci_low_pct, v.ci_high_pct) == (None, None, None)
        assert v.details["ratio"] is None
        assert v.details["ci"] == [None, None]
        assert f"{name} ratio undefined: side A's pooled {name} is 0" in v.warnings
        # No relabelling as extreme: the count was raised to 10 expected beyond the look's
        # boundary for one of 4 secondaries (linear spending: .005/4 at the first of four
        # looks, /4), 32,000; p is its floor.
        b = v.details["p_permutations"]
        assert v.details["p_method"] == "permutation"
        boundary = design_for(comparison).secondary_boundary(1) / 4
        assert boundary == pytest.approx(0.005 / 4 / 4)
        assert b == methods.permutations_to_resolve(boundary)
        assert abs(b - 32_000) <= 1
        assert v.p_value == pytest.approx(1 / (b + 1))
    # Per-run medians of 0: an absolute shift, and no % of A's median of 0.
    assert rows["p50"].shift_pct is None
    assert rows["p50"].details["shift"] > 5


def test_stored_rows_carry_the_sign_test_moods_p_and_how_p_was_obtained():
    rng = np.random.default_rng(5)
    comparison = ComparisonFactory.create(benchmarks=["boot-time"])
    _boot_time_runs(comparison, 24, 0.10, rng)
    analyse_comparison(comparison.pk)
    rows = MetricVerdict.objects.filter(comparison=comparison).exclude(statistic="boschloo")
    primary = rows.get(is_primary=True)
    sign = primary.details["sign_test"]
    assert (sign["k"], sign["n"], sign["ties"], sign["above_is"]) == (24, 24, 0, "worse")
    assert sign["p"] == pytest.approx(2 / 2**24)
    assert primary.p_median is not None
    assert primary.p_median < 1e-6
    # Beyond 9,999 relabellings: raised to resolve the first look's .045/64.
    assert primary.details["p_method"] == "permutation"
    assert primary.details["p_permutations"] == 14_223
    # rcu_normal is 0 in every run: Mood and the sign test do not exist, and say so (Mood
    # used to read p = 1); the shift is absolute, with no % of a median of 0.
    constant = rows.get(metric="rcu_normal")
    assert constant.p_median is None
    assert constant.details["sign_test"]["p"] is None
    assert ("constant data (every run 0): Mood's median test and the sign test are "
            "undefined") in constant.warnings  # fmt: skip
    assert (constant.shift_pct, constant.details["shift"]) == (None, 0.0)
    assert (constant.details["p_method"], constant.p_value) == ("exact", 1.0)


def test_contended_runs_reach_the_engine_and_hold_back_a_regression(settings):
    # A clear 10% regression of kernel_to_init_ms, but half of B's runs were contended and
    # none of A's: inconclusive, and the comparison asks for the next look's runs.
    settings.RCUBENCH_CONTENTION_IMBALANCE = 0.3
    rng = np.random.default_rng(6)
    comparison = ComparisonFactory.create(benchmarks=["boot-time"])
    _boot_time_runs(comparison, 24, 0.10, rng)
    runs = Run.objects.filter(comparison=comparison)
    runs.filter(side="A").update(contended=False)
    b_runs = runs.filter(side="B").order_by("order")
    runs.filter(pk__in=[r.pk for r in b_runs[:12]]).update(contended=True)
    runs.filter(side="B", contended__isnull=True).update(contended=False)
    assert design_for(comparison).contention_imbalance == 0.3
    primary = next(m for m in metric_inputs(comparison) if m.primary)
    assert [r.contended for r in primary.runs_a] == [False] * 24
    assert sum(bool(r.contended) for r in primary.runs_b) == 12
    analysis = analyse_comparison(comparison.pk)
    assert (analysis.verdict, analysis.need_more_runs) == ("inconclusive", 24)
    row = MetricVerdict.objects.get(comparison=comparison, is_primary=True,
                                    metric="kernel_to_init_ms")  # fmt: skip
    assert row.verdict == "inconclusive"
    assert row.details["contended"] == {"a": [0, 24], "b": [12, 24]}
    assert row.details["held_back"] == "regression"
    assert any("0% of A's runs (0 of 24) and 50% of B's (12 of 24)" in w for w in row.warnings)
    # Within the configured imbalance, the same runs give the regression.
    settings.RCUBENCH_CONTENTION_IMBALANCE = 0.6
    assert analyse_comparison(comparison.pk).verdict == "regression"


def test_a_verdict_reported_at_look_1_is_kept_at_look_2(monkeypatch):
    # The review's constructed example (stats/tests/test_across_looks.py, from flip.py):
    # X a regression at look 1 while Y asks for more runs; re-decided from scratch at
    # look 2, X would be inconclusive. The store passes look 1's crossed primaries in and
    # keeps X's row from the look that decided it.
    xa, xb, ya, yb = _flip_data()
    looks = {
        24: [_flip_metric("X", xa[:24], xb[:24]), _flip_metric("Y", ya[:24], yb[:24])],
        48: [_flip_metric("X", xa, xb), _flip_metric("Y", ya, yb)],
    }
    comparison = ComparisonFactory.create(benchmarks=["boot-time"], seed=3)
    now = {"n": 24}
    monkeypatch.setattr(services, "metric_inputs", lambda c: looks[now["n"]])
    monkeypatch.setattr(services, "failure_counts", lambda c: [])
    first = analyse_comparison(comparison.pk)
    assert (first.look, first.need_more_runs) == (1, 24)
    x = MetricVerdict.objects.get(comparison=comparison, benchmark="X")
    assert (x.verdict, x.look, x.details["crossed"]) == ("regression", 1, True)
    assert services.crossed_before(comparison) == {("X", "t", "value"): verdicts.Crossed(
        "regression", 1)}  # fmt: skip
    now["n"] = 48
    second = analyse_comparison(comparison.pk)
    assert second.look == 2
    x = MetricVerdict.objects.get(comparison=comparison, benchmark="X")
    assert (x.verdict, x.look, x.n_a) == ("regression", 1, 24)  # look 1's row, kept
    assert Comparison.objects.get(pk=comparison.pk).verdict == "regression"
    y = MetricVerdict.objects.get(comparison=comparison, benchmark="Y")
    assert (y.look, y.details["holm_level"]) == (2, pytest.approx(0.045))  # X's level released
    # Without the stored rows (from scratch, as before v3) look 2 loses the regression.
    MetricVerdict.objects.filter(comparison=comparison).delete()
    analyse_comparison(comparison.pk)
    x = MetricVerdict.objects.get(comparison=comparison, benchmark="X")
    assert (x.verdict, x.look) == ("inconclusive", 2)
