"""Analysis-queue tasks: thin wrappers around the analysis service."""

from workers.celery_app import app


@app.task(name="rcubench.analysis.analyse_comparison")
def analyse_comparison(comparison_id: int) -> int:
    """Store the comparison's verdicts; return how many more runs per side it needs."""
    from webapp.analysis.services import analyse_comparison as analyse

    return analyse(comparison_id).need_more_runs
