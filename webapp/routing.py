"""The one routing table: which queue each kind of task goes to.

Every task is named rcubench.<kind>.<task>. Control, build and analysis tasks have a fixed
queue each. Benchmark runs go to the queue of their Target ("bench.<target>"), which the
sender names (webapp/dispatch.py), so each lab host or VM host serves only the targets it
has; a bench task sent without its queue, or a task of no known kind, is refused here
rather than left to fall to a default queue that no worker for it consumes.
"""

from collections.abc import Iterable
from typing import Any

CONTROL, BUILD, ANALYSIS = "control", "build", "analysis"
FIXED_QUEUES = (CONTROL, BUILD, ANALYSIS)
BENCH_PREFIX = "rcubench.bench."
_FIXED_ROUTES = {
    "rcubench.control.": CONTROL,
    "rcubench.build.": BUILD,
    "rcubench.analysis.": ANALYSIS,
}


# Every task's stable name (the wire name in messages and the beat schedule): the tasks
# register under these, webapp/dispatch.py sends them.
BUILD_KERNEL = "rcubench.build.build_kernel"
RUN_BENCHMARK = "rcubench.bench.run_benchmark"
RUN_LAB_BENCHMARK = "rcubench.bench.run_lab_benchmark"
CONCLUDE_LOOK = "rcubench.analysis.conclude_look"
ADVANCE_COMPARISON = "rcubench.control.advance_comparison"
ADVANCE_UNFINISHED = "rcubench.control.advance_unfinished_comparisons"
REAP_STALE_RUNS = "rcubench.control.reap_stale_runs"
REAP_STALE_BUILDS = "rcubench.control.reap_stale_builds"
PRUNE_CONSOLE_DIRS = "rcubench.control.prune_console_dirs"
PROCESS_PUSH = "rcubench.control.process_push"
WATCH_TICK = "rcubench.control.watch_tick"
NOTIFY_COMPARISON = "rcubench.control.notify_comparison"
PROCESS_INBOUND = "rcubench.control.process_inbound_mail"
NOTIFY_CHANGE_POINT = "rcubench.control.notify_change_point"
SEND_ALERT = "rcubench.control.send_alert"
RESEND_LOST_ALERTS = "rcubench.control.resend_lost_alerts"
ADVANCE_BISECTION = "rcubench.control.advance_bisection"
NOTIFY_BISECTION = "rcubench.control.notify_bisection"
NOTIFY_TRANSITION = "rcubench.control.notify_transition"
NOTIFY_SWEEP = "rcubench.control.notify_sweep"


class UnroutedTask(ValueError):
    """A task name with no route, or a bench task sent without its target's queue."""


def route_task(
    name: str, args: Any, kwargs: Any, options: dict[str, Any], task: Any = None, **_: Any
) -> dict[str, str] | None:
    """Celery's router (task_routes): the queue of task `name`."""
    for prefix, queue in _FIXED_ROUTES.items():
        if name.startswith(prefix):
            return {"queue": queue}
    if name.startswith(BENCH_PREFIX):
        if not options.get("queue"):
            raise UnroutedTask(f"{name} needs its target's queue (bench.<target>)")
        return None  # the sender's queue stands
    raise UnroutedTask(f"no route for task {name!r}")


def bench_queue(target_name: str) -> str:
    """The queue of a benchmark target (Target.queue)."""
    if not target_name or any(ch.isspace() for ch in target_name):
        raise ValueError(f"bad target name {target_name!r}")
    return f"bench.{target_name}"


def all_queues(bench_targets: Iterable[str]) -> list[str]:
    return [*FIXED_QUEUES, *(bench_queue(t) for t in bench_targets)]
