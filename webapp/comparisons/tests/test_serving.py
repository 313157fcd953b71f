"""Targets are data: a bench worker serves the enabled targets matching RCUBENCH_SERVE, picks
up one added while it runs, and records so (ServedQueue); a submission to a target no
worker serves is refused at once when RCUBENCH_REQUIRE_SERVED_TARGETS is on."""

import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.factories import TreeFactory
from webapp.celery import app
from webapp.comparisons.models import Comparison, ServedQueue, Target
from webapp.comparisons.serving import (
    forget_worker,
    record_served,
    served_by,
    target_queues,
    unserved_reason,
)
from webapp.comparisons.submission import ComparisonRequest, SubmissionError, submit_comparison
from webapp.routing import RUN_BENCHMARK

WORKER = "bench@lab-host"


def _target(name: str = "lab-x", enabled: bool = True) -> Target:
    # A VM target: a lab pool without hosts is refused before the worker check (webapp/lab).
    return Target.objects.create(name=name, kind=Target.Kind.QEMU, arch="x86_64", enabled=enabled)


def _seen(target: Target, seconds_ago: float, worker: str = WORKER) -> None:
    seen_at = timezone.now() - timedelta(seconds=seconds_ago)
    ServedQueue.objects.create(queue=target.queue, worker=worker, seen_at=seen_at)


# --- the served-queue records ---------------------------------------------------------------


@pytest.mark.django_db
def test_target_queues_are_the_enabled_targets_matching_the_patterns():
    _target("lab-new1")
    _target("lab-new2", enabled=False)
    _target("lab-old")
    _target("riscv-64")
    assert target_queues(["lab-new*", "riscv-*"]) == {
        "bench.lab-new1": "lab-new1",
        "bench.riscv-64": "riscv-64",
    }
    assert target_queues([]) == {}


@pytest.mark.django_db
def test_served_by_lists_the_workers_seen_within_three_polls(settings):
    settings.RCUBENCH_SERVE_POLL_SECONDS = 10
    target, other = _target("lab-x"), _target("lab-y")
    assert served_by(target) == []
    _seen(target, 5, "b@host")
    _seen(target, 25, "a@host")
    _seen(target, 31, "stale@host")  # three polls (30 s) ago: gone
    _seen(other, 0, "other@host")
    assert served_by(target) == ["a@host", "b@host"]
    assert served_by(other) == ["other@host"]


@pytest.mark.django_db
def test_record_served_upserts_drops_other_queues_and_forgets_a_stopped_worker():
    a, b = _target("lab-a"), _target("lab-b")
    _seen(a, 3600)  # an hour ago: stale
    long_ago = timezone.now() - timedelta(days=2)
    ServedQueue.objects.create(queue="bench.gone", worker="old@host", seen_at=long_ago)
    record_served(WORKER, {a.queue, b.queue})
    assert served_by(a) == [WORKER]
    assert served_by(b) == [WORKER]
    assert ServedQueue.objects.filter(worker=WORKER).count() == 2
    assert not ServedQueue.objects.filter(worker="old@host").exists()  # forgotten after a day
    record_served(WORKER, {b.queue})  # lab-a disabled or no longer matching
    assert served_by(a) == []
    assert served_by(b) == [WORKER]
    forget_worker(WORKER)
    assert served_by(b) == []


# --- submission -----------------------------------------------------------------------------


def _submit(target: str) -> SubmissionError:
    tree = TreeFactory.create(name="rcu")
    request = ComparisonRequest(
        tree=tree.name, base_ref="v6.12", benchmarks=("no-such-benchmark",), target=target
    )
    with pytest.raises(SubmissionError) as refused:
        submit_comparison(request)
    assert not Comparison.objects.exists()
    return refused.value


@pytest.mark.django_db
@pytest.mark.parametrize("seen", ["absent", "stale"])
def test_a_target_no_worker_serves_is_refused_at_once(settings, seen):
    settings.RCUBENCH_REQUIRE_SERVED_TARGETS = True
    target = _target("lab-x")
    if seen == "stale":
        _seen(target, 3 * settings.RCUBENCH_SERVE_POLL_SECONDS + 5)
    refused = _submit("lab-x")
    assert refused.field == "target"
    assert refused.message == (
        "no worker serves target lab-x (its queue bench.lab-x): start a worker with "
        "RCUBENCH_SERVE matching it"
    )
    assert unserved_reason(target) == refused.message


@pytest.mark.django_db
def test_a_served_target_passes_the_check(settings):
    settings.RCUBENCH_REQUIRE_SERVED_TARGETS = True
    target = _target("lab-x")
    _seen(target, 1)
    assert unserved_reason(target) is None
    refused = _submit("lab-x")  # past the target, refused by the next check
    assert refused.field == "benchmarks"


@pytest.mark.django_db
def test_with_the_check_off_an_unserved_target_is_accepted(settings):
    settings.RCUBENCH_REQUIRE_SERVED_TARGETS = False
    _target("lab-x")
    assert _submit("lab-x").field == "benchmarks"


# --- a real worker picks up a target added while it runs ------------------------------------


def _wait(what: str, until, seconds: float, logs) -> None:
    deadline = time.monotonic() + seconds
    while not until():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s; worker log:\n{logs()}")
        time.sleep(0.2)


def test_a_worker_serves_a_target_added_while_it_runs(celery_processes):
    _target("lab-old")  # matches, but disabled before the worker starts
    Target.objects.filter(name="lab-old").update(enabled=False)
    # Enabled, but not matching: the queue it starts on (RCUBENCH_BENCH_TARGETS) is cancelled.
    fields = {"enabled": True, "kind": Target.Kind.QEMU, "arch": "x86_64"}
    Target.objects.update_or_create(name="qemu-x86_64", defaults=fields)
    celery_processes.start_worker(RCUBENCH_SERVE="lab-new*", RCUBENCH_SERVE_POLL_SECONDS="1")
    rows = ServedQueue.objects.values_list("queue", flat=True)
    assert not rows.exists()  # it serves nothing yet

    target = _target("lab-new1")
    _wait("the worker records serving bench.lab-new1", lambda: served_by(target), 10,
          celery_processes.logs)  # fmt: skip
    (worker,) = served_by(target)
    assert worker.startswith("test-")
    assert list(rows) == ["bench.lab-new1"]

    # A task on the new queue runs: a run that does not exist is claimed by nobody, so the
    # task ends at once (execute_run returns None).
    task_id = f"served-{uuid.uuid4()}"
    app.send_task(RUN_BENCHMARK, args=(2**40,), queue=target.queue, task_id=task_id)
    ran = lambda: any(  # noqa: E731
        task_id in line and "succeeded" in line for line in celery_processes.logs().splitlines()
    )
    _wait(f"task {task_id} on bench.lab-new1 runs", ran, 15, celery_processes.logs)

    # Disabled: the worker cancels the queue and no longer records serving it.
    Target.objects.filter(pk=target.pk).update(enabled=False)
    _wait("the worker stops serving bench.lab-new1", lambda: not served_by(target), 10,
          celery_processes.logs)  # fmt: skip
    assert unserved_reason(target)
