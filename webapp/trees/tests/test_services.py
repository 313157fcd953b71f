"""Build service: requests become Build rows, the build task records what the engine did."""

import time
from pathlib import Path

import pytest

from benchmarks.registry import BENCHMARKS, kconfig_for
from engine.build.kconfig import ConfigError
from engine.build.tests.conftest import BASE_TAG, DEFAULT_TREE, FIXTURES
from tests.support.factories import BuildFactory, RevisionFactory, TreeFactory
from webapp.states import Result, State
from webapp.trees import services
from webapp.trees.models import Build, PatchSeries

# Every benchmark's Kconfig, as the session's shared kernels (root conftest) are built.
BENCH = kconfig_for(BENCHMARKS)
PERF_FIXTURES = Path(__file__).resolve().parents[3] / "perf" / "fixtures"


def _revision(ref: str = BASE_TAG, **kw: object):
    tree = TreeFactory.create(url=str(DEFAULT_TREE))
    return RevisionFactory.create(tree=tree, ref=ref, base_sha="", sha="", **kw)


@pytest.mark.django_db
def test_a_request_creates_one_queued_build_and_enqueues_it_once(
    django_capture_on_commit_callbacks,
):
    revision = _revision()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        build = services.request_build(revision, "x86_64", BENCH)
        again = services.request_build(revision, "x86_64", BENCH)
    assert again.pk == build.pk
    assert len(callbacks) == 1
    assert (build.state, build.result, build.kconfig) == (
        State.QUEUED,
        "",
        "".join(f"{line}\n" for line in BENCH),
    )
    other = services.request_build(revision, "x86_64", ())
    assert other.pk != build.pk  # another config is another build


@pytest.mark.django_db
def test_a_failed_build_is_queued_again_when_requested_again(django_capture_on_commit_callbacks):
    revision = _revision()
    with django_capture_on_commit_callbacks(execute=False):
        build = services.request_build(revision, "x86_64", BENCH)
    Build.objects.filter(pk=build.pk).update(
        state=State.DONE, result=Result.FAILED, error_code=Build.Error.MAKE_FAILED,
        error_message="make bzImage failed",
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        again = services.request_build(revision, "x86_64", BENCH)
    assert again.pk == build.pk
    assert (again.state, again.result, again.error_code, again.error_message) == (
        State.QUEUED, "", "", ""
    )  # fmt: skip
    assert len(callbacks) == 1


@pytest.mark.django_db
def test_a_malformed_kconfig_line_is_refused_and_nothing_is_stored():
    revision = _revision()
    with pytest.raises(ConfigError, match="'RCU_SCALE_TEST=y' is not CONFIG_X=value"):
        services.request_build(revision, "x86_64", ["RCU_SCALE_TEST=y"])
    assert not Build.objects.exists()


@pytest.mark.django_db
def test_a_bad_ref_ends_the_build_as_failed_with_the_reason(data_dir):
    build = BuildFactory.create(revision=_revision("no-such-branch"), sha="", toolchain="")
    services.execute_build(build.pk)
    build.refresh_from_db()
    assert (build.state, build.result, build.error_code) == (State.DONE, "failed", "bad-ref")
    assert build.error_message == "ref 'no-such-branch' does not name a commit in this tree"
    assert build.finished_at is not None
    assert build.revision.base_sha == ""


@pytest.mark.django_db
def test_a_series_that_does_not_apply_records_patch_failed_with_gits_output(data_dir):
    mbox = (FIXTURES / "conflict.mbox").read_bytes()
    series = PatchSeries.objects.create(subject="conflict", mbox=mbox, mbox_sha256="0" * 64)
    build = BuildFactory.create(revision=_revision(series=series), sha="", toolchain="")
    services.execute_build(build.pk)
    build.refresh_from_db()
    assert build.error_code == "patch-failed"
    assert "patch 1 ('rcuscale: Reword writer_holdoff description')" in build.error_message
    assert "Patch failed at 0001" in build.log


@pytest.mark.django_db
def test_a_duplicate_delivery_of_a_running_build_does_nothing():
    build = BuildFactory.create(state=State.RUNNING, sha="")
    assert services.execute_build(build.pk) is None
    build.refresh_from_db()
    assert build.state == State.RUNNING


def test_the_build_task_on_a_real_worker_builds_then_serves_the_cache(
    data_dir, celery_worker_process
):
    """Through the broker and a worker process: a real x86_64 build of a patched revision,
    then another revision of the same base and series is a cache hit recorded as such."""
    mbox = (PERF_FIXTURES / "one-line.mbox").read_bytes()
    series = PatchSeries.objects.create(subject="one line", mbox=mbox, mbox_sha256="1" * 64)
    first = services.request_build(_revision(series=series), "x86_64", BENCH)
    first = _wait_done(first, timeout=1500, worker=celery_worker_process)
    assert (first.result, first.error_code, first.cached) == ("ok", "", False), first.log[-3000:]
    assert Path(first.artifact_dir, "bzImage").stat().st_size > 500_000
    first.revision.refresh_from_db()
    assert first.revision.sha == first.sha != first.revision.base_sha
    assert first.revision.applied_with == "git am"
    assert "Kernel: arch/x86/boot/bzImage is ready" in first.log

    second = services.request_build(_revision(series=series), "x86_64", BENCH)
    second = _wait_done(second, timeout=120, worker=celery_worker_process)
    assert (second.result, second.cached) == ("ok", True)
    assert second.artifact_key == first.artifact_key
    assert second.artifact_dir == first.artifact_dir


def _wait_done(build: Build, *, timeout: float, worker) -> Build:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        build.refresh_from_db()
        if build.state == State.DONE:
            return build
        time.sleep(1)
    pytest.fail(f"build {build.pk} not done after {timeout} s:\n{worker.log_path.read_text()}")
