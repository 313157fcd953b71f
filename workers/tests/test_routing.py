import pytest

from webapp import routing
from webapp.routing import UnroutedTask, all_queues, bench_queue
from workers.celery_app import app


def _queue_of(task_name: str, **options: str) -> str:
    return app.amqp.router.route(options, task_name)["queue"].name  # type: ignore[attr-defined]


def _task_names() -> list[str]:
    app.loader.import_default_modules()  # the task modules, as a worker imports them
    return sorted(name for name in app.tasks if name.startswith("rcubench."))


def test_every_task_has_a_stable_name_and_a_route():
    names = _task_names()
    declared = {
        value for key, value in vars(routing).items()
        if key.isupper() and str(value).startswith("rcubench.")
    }  # fmt: skip
    assert set(names) == declared - {routing.BENCH_PREFIX}
    for name in names:
        options = {"queue": "bench.qemu-x86_64"} if name.startswith(routing.BENCH_PREFIX) else {}
        assert _queue_of(name, **options) in all_queues(["qemu-x86_64"]), name


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        (routing.REAP_STALE_RUNS, "control"),
        (routing.ADVANCE_COMPARISON, "control"),
        (routing.BUILD_KERNEL, "build"),
        (routing.CONCLUDE_LOOK, "analysis"),
    ],
)
def test_fixed_queues(task, queue):
    assert _queue_of(task) == queue


def test_a_benchmark_run_goes_to_its_targets_queue_and_never_falls_to_control():
    assert _queue_of(routing.RUN_BENCHMARK, queue="bench.qemu-ppc64le") == "bench.qemu-ppc64le"
    with pytest.raises(UnroutedTask, match="needs its target's queue"):
        _queue_of(routing.RUN_BENCHMARK)


def test_a_task_name_of_no_known_kind_is_refused():
    with pytest.raises(UnroutedTask, match=r"no route for task 'rcubench\.nope\.x'"):
        _queue_of("rcubench.nope.x")


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
