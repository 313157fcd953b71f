"""Services over trees, revisions and builds (called by tasks, views and commands)."""

import json
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from engine.build import builder, kconfig
from engine.build.arch import profile
from engine.build.artifacts import ArtifactError, fetch_image, file_sha256, prune_cache
from engine.build.git import run_git
from engine.build.patches import SeriesError, parse_mbox
from engine.build.sandbox import Limits
from engine.build.sources import UnsafeSourceError, validate_tree_url
from webapp import dispatch, logs
from webapp.states import Result, State, end_silent_steps, finish_step, log_state
from webapp.text import storable
from webapp.trees import names
from webapp.trees.models import Build, Patch, PatchSeries, Revision, Tree

log = logs.get(__name__)
GiB = 2**30
LOG_LIMIT = 256 * 1024  # the tail of the build log kept in the row; the whole log is stored
SUBJECT_MAX = Revision._meta.get_field("subject").max_length or 998


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
        limits=Limits(
            memory_bytes=int(settings.RCUBENCH_BUILD_MEMORY_GB * GiB),
            max_processes=settings.RCUBENCH_BUILD_MAX_PROCESSES,
        ),
    )


def request_build(revision: Revision, arch: str, fragments: Sequence[str] = ()) -> Build:
    """The Build of `revision` for `arch` with the benchmarks' Kconfig `fragments`, queued
    on the build queue if it is new or failed before (a retry); a queued, running or
    successful one is returned as it is."""
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
            log_state(build, State.QUEUED, revision=revision.pk, arch=arch, retry=retry)
            dispatch.send_build(build.pk)
    return build


def execute_build(build_id: int, keep: frozenset[str] = frozenset()) -> Build | None:
    """Carry out a queued build (the build task calls this). `keep`: artifact keys the cache
    must not prune (the caller's: those unfinished comparisons still boot). Returns None when
    the build is not queued any more: a duplicate delivery of the task does nothing."""
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
    log_state(build, State.RUNNING, ref=revision.ref, arch=build.arch,
              series=revision.series_id, host=build.host)  # fmt: skip
    try:
        with _beating(build_id):
            outcome = builder.build_kernel(request, build_settings(), keep=keep)
    except builder.BuildError as exc:
        _finish(build, Result.FAILED, error_code=exc.code, error_message=exc.message, log=exc.log)
        return build
    except Exception as exc:  # an engine bug or a host problem: recorded, never a stuck row
        _finish(build, Result.FAILED, error_code=Build.Error.INFRA, error_message=repr(exc))
        raise
    with transaction.atomic():
        finished = _finish(
            build, Result.OK, log=_tail(outcome.log_path), sha=outcome.sha,
            toolchain=outcome.toolchain, artifact_key=outcome.key,
            artifact_dir=str(outcome.artifact_dir), cached=outcome.cached,
            image_name=outcome.image.name, image_sha256=file_sha256(outcome.image),
            seconds=round(outcome.seconds, 2),
            context={"trusted": outcome.trusted},  # wrote the shared objects and ccache
        )  # fmt: skip
        if outcome.pruned:
            log.info("build cache pruned", build=build_id, items=list(outcome.pruned))
        if finished:
            Revision.objects.filter(pk=revision.pk).update(
                base_sha=outcome.base_sha,
                sha=outcome.sha,
                subject=_text(outcome.subject, SUBJECT_MAX),
                applied_with=outcome.series.method if outcome.series else "",
                apply_notes=storable("\n".join(outcome.series.notes) if outcome.series else ""),
            )
    return build


def _finish(build: Build, result: str, *, error_code: str = "", error_message: str = "",
            log: str = "", **fields: Any) -> bool:  # fmt: skip
    """Record the build's end, only if it is still running: one the reaper ended meanwhile
    keeps that ending (its late result is dropped; a retry finds the artifact cached). The
    log and message are the build's output and may hold any byte."""
    return finish_step(
        build, unfinished=(State.RUNNING,), result=result, error_code=error_code,
        error_message=error_message, log=storable(log[-LOG_LIMIT:]), **fields,
    )  # fmt: skip


@contextmanager
def _beating(build_id: int) -> Iterator[None]:
    """Heartbeat from a thread for the whole build, the build's one heartbeat: fetching,
    applying the series and waiting for another build's lock print nothing, and a cold make
    can be silent for minutes, yet the reaper must not take a live build for a dead one."""
    every = max(1.0, min(15.0, settings.RCUBENCH_RUN_STALE_SECONDS / 4))
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(every):
                Build.objects.filter(pk=build_id, state=State.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
        finally:
            connection.close()  # the thread's own connection

    thread = threading.Thread(target=loop, name=f"build-{build_id}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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
    reaped = end_silent_steps(
        Build,
        now=now or timezone.now(),
        stale_seconds=settings.RCUBENCH_RUN_STALE_SECONDS,
        result=Result.FAILED,
        error_code=Build.Error.INFRA,
    )
    return len(reaped)


class InvalidSeries(ValueError):
    """An mbox refused as a patch series (too large, too many patches, not a series)."""


class InvalidTree(ValueError):
    """A path refused as a tree (not a local bare git repository)."""


def store_series(mbox: bytes) -> PatchSeries:
    """The PatchSeries of `mbox` (stored once per content), with its patches. A file that is
    too large, has too many patches or is not a patch series is refused with the reason.

    Call it in the transaction that submits the comparison (as `submit_comparison` does): a
    request refused after it then leaves no series behind.
    """
    import hashlib

    limit = settings.RCUBENCH_MAX_MBOX_BYTES
    if len(mbox) > limit:
        raise InvalidSeries(f"the mbox is {len(mbox)} bytes; the limit is {limit}")
    try:
        series = parse_mbox(mbox, max_patches=settings.RCUBENCH_MAX_SERIES_PATCHES)
    except SeriesError as exc:
        raise InvalidSeries(f"bad patch series: {exc}") from None
    digest = hashlib.sha256(mbox).hexdigest()
    with transaction.atomic():
        stored, created = PatchSeries.objects.get_or_create(
            mbox_sha256=digest,
            defaults={"message_id": _text(series.message_id, 998),
                      "subject": _text(series.subject, 998),
                      "author": _text(series.author, 500), "mbox": mbox},
        )  # fmt: skip
        if created:
            Patch.objects.bulk_create(
                Patch(series=stored, index=p.index, subject=_text(p.subject, 998),
                      author=_text(p.author, 500), message_id=_text(p.message_id, 998))
                for p in series.patches
            )  # fmt: skip
    return stored


def _text(header: str, max_length: int) -> str:
    """A header of the mbox (one line already) as its column stores it: undecodable bytes
    escaped, cut to the column's length."""
    return storable(header)[:max_length]


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
    """The Tree of a local bare git repository, registered on first use (an operator's
    command). Anything else is refused: the build mirrors borrow its objects directory."""
    url = str(path.resolve())
    try:
        validate_tree_url(url, allow_local=True)
    except UnsafeSourceError as exc:
        raise InvalidTree(str(exc)) from None
    if not _is_bare_repository(Path(url)):
        raise InvalidTree(
            f"{path} is not a bare git repository; give a bare clone (git clone --bare)"
        )
    if (known := Tree.objects.filter(url=url).first()) is not None:
        return known
    base = names.name_from(path.resolve().name.removesuffix(".git"))[:56]
    name, n = base, 1
    while Tree.objects.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return Tree.objects.create(name=name, url=url, description="registered by ./manage.py compare")


def _is_bare_repository(path: Path) -> bool:
    if not path.is_dir():  # a file could be a gitfile ("gitdir: ...") naming another repo
        return False
    # With --git-dir, git does not search parent directories: a work tree or any other
    # directory is not a repository; a non-bare one's .git answers "false".
    result = run_git(["rev-parse", "--is-bare-repository"], git_dir=path, check=False)
    return result.returncode == 0 and result.stdout.strip() == "true"


def kernel_image(build: Build) -> Path:
    """The build's kernel image on this host: in the build store when this is the build
    host (or shares its disk), else fetched from RCUBENCH_ARTIFACT_URL by the artifact's key
    into this host's cache, and checked against the sha256 recorded when it was built.
    Raises ArtifactError naming what is missing or wrong."""
    local = Path(build.artifact_dir)
    meta = local / "meta.json"
    if build.artifact_dir and meta.exists():
        return local / json.loads(meta.read_text())["image"]
    if not settings.RCUBENCH_ARTIFACT_URL:
        raise ArtifactError(f"build {build.pk}'s kernel is not on this host "
                            f"({build.artifact_dir}) and RCUBENCH_ARTIFACT_URL names no build "
                            "host to fetch it from")  # fmt: skip
    cache = Path(str(settings.RCUBENCH_DATA_DIR)) / "artifact-cache"
    image = fetch_image(
        build.artifact_key, build.image_name, build.image_sha256,
        base_url=settings.RCUBENCH_ARTIFACT_URL, secret=settings.RCUBENCH_ARTIFACT_SECRET,
        cache=cache,
    )  # fmt: skip
    if dropped := prune_cache(cache, int(settings.RCUBENCH_ARTIFACT_CACHE_GB * GiB)):
        log.info("artifact cache pruned", build=build.pk, items=dropped)
    log.info("kernel fetched", build=build.pk, key=build.artifact_key[:16], path=str(image))
    return image
