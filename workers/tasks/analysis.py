"""Analysis-queue tasks: thin wrappers around the orchestrator's look."""

from webapp.comparisons import orchestrator
from webapp.routing import CONCLUDE_LOOK
from workers.celery_app import ANALYSIS_TIME_LIMIT, SOFT_MARGIN, app


@app.task(name=CONCLUDE_LOOK, time_limit=ANALYSIS_TIME_LIMIT,
          soft_time_limit=ANALYSIS_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def conclude_look_task(comparison_id: int) -> None:
    """A comparison's look: verdicts stored, then more runs scheduled or the comparison ends."""
    orchestrator.conclude_look(comparison_id)
