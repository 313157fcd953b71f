"""Control-queue tasks: the comparison state machine and housekeeping of the database."""

from webapp.routing import (
    ADVANCE_COMPARISON,
    ADVANCE_UNFINISHED,
    PROCESS_PUSH,
    PRUNE_CONSOLE_DIRS,
    REAP_STALE_BUILDS,
    REAP_STALE_RUNS,
    WATCH_TICK,
)
from workers.celery_app import CONTROL_TIME_LIMIT, SOFT_MARGIN, WATCH_TIME_LIMIT, app

# Database work only.
_SOFT = CONTROL_TIME_LIMIT - SOFT_MARGIN


@app.task(name=ADVANCE_COMPARISON, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def advance_comparison_task(comparison_id: int) -> None:
    from webapp.comparisons.orchestrator import advance

    advance(comparison_id)


@app.task(name=ADVANCE_UNFINISHED, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def advance_unfinished_task() -> int:
    from webapp.comparisons.orchestrator import advance_unfinished

    return advance_unfinished()


@app.task(name=REAP_STALE_RUNS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def reap_stale_runs_task() -> int:
    from webapp.comparisons.orchestrator import advance_unfinished
    from webapp.comparisons.runs import reap_stale_runs

    reaped = reap_stale_runs()
    if reaped:
        advance_unfinished()  # replace the lost runs now rather than at the next beat
    return reaped


@app.task(name=REAP_STALE_BUILDS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def reap_stale_builds_task() -> int:
    from webapp.comparisons.orchestrator import advance_unfinished
    from webapp.trees.services import reap_stale_builds

    reaped = reap_stale_builds()
    if reaped:
        advance_unfinished()  # end the comparisons waiting for them
    return reaped


@app.task(name=PRUNE_CONSOLE_DIRS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def prune_console_dirs_task() -> int:
    from webapp.comparisons.consoles import prune_console_dirs

    return prune_console_dirs()


@app.task(name=PROCESS_PUSH, time_limit=WATCH_TIME_LIMIT,
          soft_time_limit=WATCH_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def process_push_task(push_id: int) -> str:
    from webapp.watch.services import process_push

    return process_push(push_id).state


@app.task(name=WATCH_TICK, time_limit=WATCH_TIME_LIMIT,
          soft_time_limit=WATCH_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def watch_tick_task() -> dict[str, int]:
    from webapp.watch.services import watch_tick

    return watch_tick()
