import pytest
from django.db import IntegrityError

from tests.support.factories import ComparisonFactory, MeasurementFactory, RunFactory
from webapp.comparisons.models import Target

pytestmark = pytest.mark.django_db


def test_default_targets_are_migrated():
    x86 = Target.objects.get(name="qemu-x86_64")
    ppc = Target.objects.get(name="qemu-ppc64le")
    assert (x86.arch, x86.threads, x86.cpus, x86.queue) == ("x86_64", 2, 4, "bench.qemu-x86_64")
    assert (ppc.arch, ppc.machine, ppc.cpus, ppc.threads) == ("ppc64le", "pseries", 8, 8)


def test_run_is_unique_on_comparison_side_index():
    run = RunFactory.create(side="A", index=0, order=0)
    with pytest.raises(IntegrityError, match="run_unique_slot"):
        RunFactory.create(comparison=run.comparison, side="A", index=0, order=1)


def test_same_index_on_the_other_side_is_allowed():
    run = RunFactory.create(side="A", index=0, order=0)
    RunFactory.create(comparison=run.comparison, side="B", index=0, order=1)


def test_run_order_is_unique_within_a_comparison():
    run = RunFactory.create(side="A", index=0, order=0)
    with pytest.raises(IntegrityError, match="run_unique_order"):
        RunFactory.create(comparison=run.comparison, side="B", index=0, order=0)


def test_incomplete_run_names_its_error():
    with pytest.raises(IntegrityError, match="run_error_code_iff_unsuccessful"):
        RunFactory.create(state="done", result="incomplete")


def test_max_runs_below_min_runs_is_refused():
    with pytest.raises(IntegrityError, match="comparison_runs_bounds"):
        ComparisonFactory.create(min_runs=24, max_runs=12)


def test_comparison_needs_a_benchmark():
    with pytest.raises(IntegrityError, match="comparison_has_benchmarks"):
        ComparisonFactory.create(benchmarks=[])


def test_comparison_is_only_done_with_a_result():
    with pytest.raises(IntegrityError, match="comparison_result_only_when_done"):
        ComparisonFactory.create(state="analysing", result="ok")


def test_comparisons_get_distinct_order_seeds():
    assert ComparisonFactory.create().seed != ComparisonFactory.create().seed


def test_measurement_needs_samples_and_is_unique_per_metric():
    m = MeasurementFactory.create()
    with pytest.raises(IntegrityError, match="measurement_unique_metric"):
        MeasurementFactory.create(run=m.run)


def test_empty_measurement_is_refused():
    with pytest.raises(IntegrityError, match="measurement_has_samples"):
        MeasurementFactory.create(samples=[])
