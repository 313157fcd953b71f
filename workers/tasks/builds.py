"""Build-queue tasks: thin wrappers that hand a Build id to the build service."""

from webapp.routing import BUILD_KERNEL
from workers.celery_app import BUILD_TIME_LIMIT, SOFT_MARGIN, app


@app.task(name=BUILD_KERNEL, time_limit=BUILD_TIME_LIMIT,
          soft_time_limit=BUILD_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def build_kernel_task(build_id: int) -> None:
    from webapp.comparisons.orchestrator import on_build_done
    from webapp.trees.services import execute_build

    try:
        execute_build(build_id)
    finally:
        on_build_done(build_id)  # a build that raised is recorded failed: end its comparisons
