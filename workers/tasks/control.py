"""Control-queue tasks: housekeeping of the database state machine."""

from workers.celery_app import app


@app.task(name="rcubench.control.reap_stale_runs")
def reap_stale_runs() -> int:
    from webapp.comparisons.services import reap_stale_runs as reap

    return reap()


@app.task(name="rcubench.control.reap_stale_builds")
def reap_stale_builds() -> int:
    from webapp.trees.services import reap_stale_builds as reap

    return reap()
