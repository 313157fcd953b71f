"""Services over trees, revisions and builds (called by tasks, views and commands)."""

import socket
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp.states import Result, State, end_silent_steps, heartbeat
from webapp.trees.models import Build, Patch, PatchSeries, Revision, Tree
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


class SubmissionError(ValueError):
    """A request rcubench refuses before storing anything; the message names the problem."""


def store_series(mbox: bytes) -> PatchSeries:
    """The PatchSeries of `mbox` (stored once per content), with its patches. A file that is
    too large or not a patch series is refused with the reason."""
    import hashlib

    from workers.build.patches import SeriesError, parse_mbox

    limit = settings.RCUBENCH_MAX_MBOX_BYTES
    if len(mbox) > limit:
        raise SubmissionError(f"the mbox is {len(mbox)} bytes; the limit is {limit}")
    try:
        series = parse_mbox(mbox)
    except SeriesError as exc:
        raise SubmissionError(f"bad patch series: {exc}") from None
    digest = hashlib.sha256(mbox).hexdigest()
    with transaction.atomic():
        stored, created = PatchSeries.objects.get_or_create(
            mbox_sha256=digest,
            defaults={"message_id": series.message_id[:998], "subject": series.subject[:998],
                      "author": series.author[:500], "mbox": mbox},
        )  # fmt: skip
        if created:
            Patch.objects.bulk_create(
                Patch(series=stored, index=p.index, subject=p.subject[:998],
                      author=p.author[:500], message_id=p.message_id[:998])
                for p in series.patches
            )  # fmt: skip
    return stored


DEFAULT_TREE = "linux-6.12"  # Debian's linux-source-6.12, imported by scripts/setup.sh


def default_tree() -> Tree:
    """The demo tree, registered on first use."""
    path = Path(str(settings.RCUBENCH_DATA_DIR)) / "trees" / "linux-6.12.git"
    tree, _ = Tree.objects.get_or_create(
        name=DEFAULT_TREE,
        defaults={"url": str(path), "description": "Debian linux-source-6.12 (scripts/setup.sh)"},
    )
    return tree


def register_local_tree(path: Path) -> Tree:
    """The Tree of a local git repository, registered on first use (an operator's command)."""
    from django.utils.text import slugify

    from workers.build.sources import UnsafeSourceError, validate_tree_url

    url = str(path.resolve())
    try:
        validate_tree_url(url, allow_local=True)
    except UnsafeSourceError as exc:
        raise SubmissionError(str(exc)) from None
    if (known := Tree.objects.filter(url=url).first()) is not None:
        return known
    base = slugify(path.resolve().name.removesuffix(".git"))[:56] or "tree"
    name, n = base, 1
    while Tree.objects.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return Tree.objects.create(name=name, url=url, description="registered by ./manage.py compare")
