"""Control-queue tasks: the comparison state machine and housekeeping of the database."""

from webapp.bisections import services as bisections
from webapp.comparisons import consoles, orchestrator, runs
from webapp.regressions import rules as regression_rules
from webapp.routing import (
    ADVANCE_COMPARISON,
    ADVANCE_UNFINISHED,
    PROCESS_PUSH,
    PRUNE_CONSOLE_DIRS,
    REAP_STALE_BUILDS,
    REAP_STALE_RUNS,
    WATCH_TICK,
)
from webapp.sweeps import services as sweeps
from webapp.trees import services as build_services
from webapp.watch import services as watch_services
from workers.celery_app import CONTROL_TIME_LIMIT, SOFT_MARGIN, WATCH_TIME_LIMIT, app

# Database work only.
_SOFT = CONTROL_TIME_LIMIT - SOFT_MARGIN


@app.task(name=ADVANCE_COMPARISON, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def advance_comparison_task(comparison_id: int) -> None:
    orchestrator.advance(comparison_id)


@app.task(name=ADVANCE_UNFINISHED, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def advance_unfinished_task() -> int:
    return (orchestrator.advance_unfinished() + bisections.advance_unfinished()
            + sweeps.conclude_unfinished())  # fmt: skip


@app.task(name=REAP_STALE_RUNS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def reap_stale_runs_task() -> int:
    reaped = runs.reap_stale_runs()
    if reaped:
        orchestrator.advance_unfinished()  # replace the lost runs now rather than at the next beat
    return reaped


@app.task(name=REAP_STALE_BUILDS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def reap_stale_builds_task() -> int:
    reaped = build_services.reap_stale_builds()
    if reaped:
        orchestrator.advance_unfinished()  # end the comparisons waiting for them
    return reaped


@app.task(name=PRUNE_CONSOLE_DIRS, time_limit=CONTROL_TIME_LIMIT, soft_time_limit=_SOFT)
def prune_console_dirs_task() -> int:
    return consoles.prune_console_dirs()


@app.task(name=PROCESS_PUSH, time_limit=WATCH_TIME_LIMIT,
          soft_time_limit=WATCH_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def process_push_task(push_id: int) -> str:
    return watch_services.process_push(push_id).state


@app.task(name=WATCH_TICK, time_limit=WATCH_TIME_LIMIT,
          soft_time_limit=WATCH_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def watch_tick_task() -> dict[str, int]:
    # Then the regressions of the branches whose heads it checked: fixed or inactive.
    return {**watch_services.watch_tick(), "regressions moved": regression_rules.apply_rules()}
