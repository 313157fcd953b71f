"""The one routing table: which queue each kind of task goes to.

Benchmark runs go to the queue of their Target ("bench.<target>"), chosen when sent, so each
lab host or VM host serves only the targets it has.
"""

from collections.abc import Iterable

CONTROL, BUILD, ANALYSIS = "control", "build", "analysis"
FIXED_QUEUES = (CONTROL, BUILD, ANALYSIS)

TASK_ROUTES = {
    "rcubench.control.*": {"queue": CONTROL},
    "rcubench.build.*": {"queue": BUILD},
    "rcubench.analysis.*": {"queue": ANALYSIS},
}


def bench_queue(target_name: str) -> str:
    """The queue of a benchmark target (Target.queue)."""
    if not target_name or any(ch.isspace() for ch in target_name):
        raise ValueError(f"bad target name {target_name!r}")
    return f"bench.{target_name}"


def all_queues(bench_targets: Iterable[str]) -> list[str]:
    return [*FIXED_QUEUES, *(bench_queue(t) for t in bench_targets)]
