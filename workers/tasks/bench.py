"""Benchmark tasks: sent to the run's target queue (bench.<target>), thin wrappers."""

from typing import Any

from celery.signals import worker_ready

from workers.celery_app import BENCH_TIME_LIMIT, SOFT_MARGIN, app


@app.task(
    name="rcubench.bench.run_benchmark",
    time_limit=BENCH_TIME_LIMIT,
    soft_time_limit=BENCH_TIME_LIMIT - SOFT_MARGIN,
)
def run_benchmark(run_id: int) -> None:
    from webapp.comparisons.models import Run
    from webapp.comparisons.orchestrator import advance
    from webapp.comparisons.services import run_benchmark as run

    run(run_id)
    comparison_id = Run.objects.filter(pk=run_id).values_list("comparison_id", flat=True).first()
    if comparison_id is not None:
        advance(comparison_id)  # replace it if it failed, or start the look if it was the last


@worker_ready.connect
def destroy_leftover_domains(sender: Any = None, **_: Any) -> None:
    """A worker killed mid-run leaves its VM running: destroy those of the targets this
    worker serves when it starts again (the reaper has ended their runs as lost)."""
    from django.conf import settings

    from webapp.comparisons.services import leftover_prefix
    from workers.vm.runner import destroy_leftovers

    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()] if sender else []
    for queue in queues:
        if queue.startswith("bench."):
            destroy_leftovers(settings.LIBVIRT_URI, leftover_prefix(queue.removeprefix("bench.")))
