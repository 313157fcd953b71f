import pytest

from workers.celery_app import app
from workers.routing import all_queues, bench_queue


def _queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("rcubench.control.reap_stale_runs", "control"),
        ("rcubench.build.build_kernel", "build"),
        ("rcubench.analysis.analyse", "analysis"),
    ],
)
def test_routing_table(task, queue):
    assert _queue_of(task) == queue


def test_app_declares_control_build_analysis_and_bench_queues():
    declared = {q.name for q in app.conf.task_queues}
    assert {"control", "build", "analysis", "bench.qemu-x86_64", "bench.qemu-ppc64le"} <= declared


def test_bench_queue_names_follow_targets():
    assert all_queues(["lab-power9"])[-1] == "bench.lab-power9"
    with pytest.raises(ValueError, match="bad target name"):
        bench_queue("two words")


def test_messages_are_json_only():
    assert app.conf.task_serializer == "json"
    assert app.conf.accept_content == ["json"]
    assert app.conf.task_acks_late
    assert app.conf.task_reject_on_worker_lost
