"""Build-queue tasks: thin wrappers that hand a Build id to the build service."""

from workers.celery_app import app


@app.task(name="rcubench.build.build_kernel")
def build_kernel(build_id: int) -> None:
    from webapp.trees.services import run_build

    run_build(build_id)
