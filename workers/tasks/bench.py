"""Benchmark tasks: sent to the run's target queue (bench.<target>), thin wrappers. A lab
run has a task of its own only for its longer time limit (waiting for a host, recovery)."""

from webapp.comparisons import orchestrator, runs
from webapp.comparisons.models import Run
from webapp.routing import RUN_BENCHMARK, RUN_LAB_BENCHMARK
from workers.celery_app import BENCH_TIME_LIMIT, LAB_TIME_LIMIT, SOFT_MARGIN, app


@app.task(name=RUN_BENCHMARK, time_limit=BENCH_TIME_LIMIT,
          soft_time_limit=BENCH_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def run_benchmark_task(run_id: int) -> None:
    _run(run_id)


@app.task(name=RUN_LAB_BENCHMARK, time_limit=LAB_TIME_LIMIT,
          soft_time_limit=LAB_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def run_lab_benchmark_task(run_id: int) -> None:
    _run(run_id)


def _run(run_id: int) -> None:
    runs.execute_run(run_id)
    comparison_id = Run.objects.filter(pk=run_id).values_list("comparison_id", flat=True).first()
    if comparison_id is not None:
        orchestrator.advance(
            comparison_id
        )  # replace it if it failed, or start the look if it was the last
