"""Services over trees, revisions and builds (called by tasks, views and commands)."""

import socket
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp.states import Result, State, end_silent_steps, heartbeat
from webapp.trees.models import Build, Revision
from workers.build import builder, kconfig
from workers.build.arch import profile

GiB = 2**30
LOG_LIMIT = 256 * 1024  # the tail of the build log kept in the row; the whole log is stored


def build_settings() -> builder.BuildSettings:
    data = Path(str(settings.RCUBENCH_DATA_DIR))
    return builder.BuildSettings(
        root=data / "build",
        mirrors=data / "mirrors",
        ccache=Path(str(settings.RCUBENCH_CCACHE_DIR)),
        user=settings.RCUBENCH_BUILD_USER,
        timeout=settings.RCUBENCH_BUILD_TIMEOUT_SECONDS,
        min_free_bytes=int(settings.RCUBENCH_BUILD_MIN_FREE_GB * GiB),
        max_artifact_bytes=int(settings.RCUBENCH_BUILD_CACHE_MAX_GB * GiB),
        max_slots=settings.RCUBENCH_BUILD_MAX_SLOTS,
    )


def request_build(revision: Revision, arch: str, fragments: Sequence[str] = ()) -> Build:
    """The Build of `revision` for `arch` with the benchmarks' Kconfig `fragments`, queued
    on the build queue if it is new or failed before (a retry); a queued, running or
    successful one is returned as it is."""
    from workers.tasks.build import build_kernel

    merged = kconfig.merge(profile(arch), fragments)  # refuses a malformed fragment line
    config_hash = kconfig.config_hash(profile(arch), merged)
    with transaction.atomic():
        build, created = Build.objects.select_for_update().get_or_create(
            revision=revision,
            arch=arch,
            config_hash=config_hash,
            defaults={"kconfig": "".join(f"{line}\n" for line in fragments)},
        )
        retry = not created and build.state == State.DONE and build.result != Result.OK
        if retry:
            build.state, build.result, build.error_code = State.QUEUED, Result.NONE, ""
            build.error_message = ""
            build.save(update_fields=["state", "result", "error_code", "error_message"])
        if created or retry:
            transaction.on_commit(lambda: build_kernel.delay(build.pk))
    return build


def run_build(build_id: int) -> Build | None:
    """Carry out a queued build (the build task calls this). Returns None when the build
    is not queued any more: a duplicate delivery of the task does nothing."""
    now = timezone.now()
    claimed = Build.objects.filter(pk=build_id, state=State.QUEUED).update(
        state=State.RUNNING, started_at=now, heartbeat_at=now, host=socket.gethostname()
    )
    if not claimed:
        return None
    build = Build.objects.select_related("revision__tree", "revision__series").get(pk=build_id)
    revision = build.revision
    request = builder.BuildRequest(
        tree_url=revision.tree.url,
        ref=revision.ref,
        arch=build.arch,
        fragments=tuple(build.kconfig.splitlines()),
        mbox=bytes(revision.series.mbox) if revision.series else None,
        patch_fallback=revision.patch_fallback,
        allow_local=True,  # trees are registered by operators; their URLs were validated
    )
    try:
        outcome = builder.build(request, build_settings(), progress=heartbeat(Build, build_id))
    except builder.BuildError as exc:
        _finish(build, Result.FAILED, error_code=exc.code, error_message=exc.message, log=exc.log)
        return build
    except Exception as exc:  # an engine bug or a host problem: recorded, never a stuck row
        _finish(build, Result.FAILED, error_code=Build.Error.INFRA, error_message=repr(exc))
        raise
    with transaction.atomic():
        Revision.objects.filter(pk=revision.pk).update(
            base_sha=outcome.base_sha,
            sha=outcome.sha,
            applied_with=outcome.series.method if outcome.series else "",
            apply_notes="\n".join(outcome.series.notes) if outcome.series else "",
        )
        build.sha, build.toolchain = outcome.sha, outcome.toolchain
        build.artifact_key, build.artifact_dir = outcome.key, str(outcome.artifact_dir)
        build.cached, build.seconds = outcome.cached, round(outcome.seconds, 2)
        _finish(build, Result.OK, log=_tail(outcome.log_path))
    return build


def _finish(build: Build, result: str, *, error_code: str = "", error_message: str = "",
            log: str = "") -> None:  # fmt: skip
    build.state, build.result = State.DONE, result
    build.error_code, build.error_message = error_code, error_message
    build.log = log[-LOG_LIMIT:]
    build.finished_at = timezone.now()
    build.save()


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - LOG_LIMIT))
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def reap_stale_builds(now: datetime | None = None) -> int:
    """End running builds whose worker went silent as failed (infra-error)."""
    return end_silent_steps(
        Build,
        now=now or timezone.now(),
        stale_seconds=settings.RCUBENCH_RUN_STALE_SECONDS,
        result=Result.FAILED,
        error_code=Build.Error.INFRA,
    )
