"""Control-queue tasks: the comparison state machine and housekeeping of the database."""

from workers.celery_app import app


@app.task(name="rcubench.control.advance_comparison")
def advance_comparison(comparison_id: int) -> None:
    from webapp.comparisons.orchestrator import advance

    advance(comparison_id)


@app.task(name="rcubench.control.kick_comparisons")
def kick_comparisons() -> int:
    from webapp.comparisons.orchestrator import kick

    return kick()


@app.task(name="rcubench.control.reap_stale_runs")
def reap_stale_runs() -> int:
    from webapp.comparisons.orchestrator import kick
    from webapp.comparisons.services import reap_stale_runs as reap

    reaped = reap()
    if reaped:
        kick()  # replace the lost runs now rather than at the next kick
    return reaped


@app.task(name="rcubench.control.reap_stale_builds")
def reap_stale_builds() -> int:
    from webapp.comparisons.orchestrator import kick
    from webapp.trees.services import reap_stale_builds as reap

    reaped = reap()
    if reaped:
        kick()
    return reaped
