"""Control-queue tasks: the comparison state machine and housekeeping of the database."""

from workers.celery_app import CONTROL_TIME_LIMIT, SOFT_MARGIN, app


@app.task(
    name="rcubench.control.advance_comparison",
    time_limit=CONTROL_TIME_LIMIT,
    soft_time_limit=CONTROL_TIME_LIMIT - SOFT_MARGIN,
)
def advance_comparison(comparison_id: int) -> None:
    from webapp.comparisons.orchestrator import advance

    advance(comparison_id)


@app.task(
    name="rcubench.control.kick_comparisons",
    time_limit=CONTROL_TIME_LIMIT,
    soft_time_limit=CONTROL_TIME_LIMIT - SOFT_MARGIN,
)
def kick_comparisons() -> int:
    from webapp.comparisons.orchestrator import kick

    return kick()


@app.task(
    name="rcubench.control.reap_stale_runs",
    time_limit=CONTROL_TIME_LIMIT,
    soft_time_limit=CONTROL_TIME_LIMIT - SOFT_MARGIN,
)
def reap_stale_runs() -> int:
    from webapp.comparisons.orchestrator import kick
    from webapp.comparisons.services import reap_stale_runs as reap

    reaped = reap()
    if reaped:
        kick()  # replace the lost runs now rather than at the next kick
    return reaped


@app.task(
    name="rcubench.control.reap_stale_builds",
    time_limit=CONTROL_TIME_LIMIT,
    soft_time_limit=CONTROL_TIME_LIMIT - SOFT_MARGIN,
)
def reap_stale_builds() -> int:
    from webapp.comparisons.orchestrator import kick
    from webapp.trees.services import reap_stale_builds as reap

    reaped = reap()
    if reaped:
        kick()
    return reaped


@app.task(
    name="rcubench.control.prune_console_dirs",
    time_limit=CONTROL_TIME_LIMIT,
    soft_time_limit=CONTROL_TIME_LIMIT - SOFT_MARGIN,
)
def prune_console_dirs() -> int:
    from webapp.comparisons.services import prune_console_dirs as prune

    return prune()
