"""Build-queue tasks: thin wrappers that hand a Build id to the build service."""

from webapp.comparisons import orchestrator
from webapp.routing import BUILD_KERNEL
from webapp.trees import services
from workers.celery_app import BUILD_TIME_LIMIT, SOFT_MARGIN, app


@app.task(name=BUILD_KERNEL, time_limit=BUILD_TIME_LIMIT,
          soft_time_limit=BUILD_TIME_LIMIT - SOFT_MARGIN)  # fmt: skip
def build_kernel_task(build_id: int) -> None:
    try:
        # The artifacts unfinished comparisons still boot are never pruned from the cache.
        services.execute_build(build_id, keep=orchestrator.artifacts_in_use())
    finally:
        orchestrator.on_build_done(
            build_id
        )  # a build that raised is recorded failed: end its comparisons
