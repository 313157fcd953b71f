"""Analysis-queue tasks: thin wrappers around the analysis services."""

from workers.celery_app import ANALYSIS_TIME_LIMIT, SOFT_MARGIN, app


@app.task(
    name="rcubench.analysis.analyse_comparison",
    time_limit=ANALYSIS_TIME_LIMIT,
    soft_time_limit=ANALYSIS_TIME_LIMIT - SOFT_MARGIN,
)
def analyse_comparison(comparison_id: int) -> int:
    """Store the comparison's verdicts; return how many more runs per side it needs."""
    from webapp.analysis.services import analyse_comparison as analyse

    return analyse(comparison_id).need_more_runs


@app.task(
    name="rcubench.analysis.conclude_look",
    time_limit=ANALYSIS_TIME_LIMIT,
    soft_time_limit=ANALYSIS_TIME_LIMIT - SOFT_MARGIN,
)
def conclude_look(comparison_id: int) -> None:
    """A comparison's look: verdicts stored, then more runs scheduled or the comparison ends."""
    from webapp.comparisons.orchestrator import conclude_look as conclude

    conclude(comparison_id)
