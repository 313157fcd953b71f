"""The build service under hostile output and a racing reaper (security review 2026-11-23):
NUL bytes in a build log, heartbeats while a build waits, late finishes, pruning."""

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from engine.build import builder
from engine.build.git import mirror_lock, mirror_path
from engine.build.store import Store
from engine.build.tests.conftest import DEFAULT_TREE
from engine.build.tests.test_hostile_builds import _makefile_prefix, _series
from tests.support.factories import BuildFactory, ComparisonFactory
from webapp.comparisons import orchestrator
from webapp.states import State
from webapp.text import NUL_SHOWN
from webapp.trees import services
from webapp.trees.models import Build, PatchSeries
from webapp.trees.tests.test_services import _revision


@pytest.mark.django_db
@pytest.mark.timeout(600)
def test_a_nul_byte_and_invalid_utf8_in_the_build_log_are_stored(data_dir):
    # The submitter's config step prints a NUL and bytes that are not UTF-8, then fails.
    mbox = _series(_makefile_prefix("olddefconfig:\n\t@printf 'evil\\000\\377\\376 end\\n'; false"))
    series = PatchSeries.objects.create(subject="nul", mbox=mbox, mbox_sha256="1" * 64)
    build = BuildFactory.create(revision=_revision(series=series), sha="", toolchain="")
    services.execute_build(build.pk)
    build.refresh_from_db()
    assert (build.state, build.result, build.error_code) == (State.DONE, "failed", "make-failed")
    assert f"evil{NUL_SHOWN}" in build.log
    assert " end" in build.log


@pytest.mark.django_db(transaction=True)
def test_a_build_waiting_for_a_lock_keeps_its_heartbeat(data_dir, settings):
    settings.RCUBENCH_RUN_STALE_SECONDS = 4  # a beat every second
    build = BuildFactory.create(revision=_revision("no-such-branch"), sha="", toolchain="")
    mirror = mirror_path(data_dir / "mirrors", str(DEFAULT_TREE))
    beats: list[object] = []
    with mirror_lock(mirror, timeout=5):  # another build fetching this tree
        worker = threading.Thread(target=services.execute_build, args=(build.pk,))
        worker.start()
        for _ in range(4):
            time.sleep(1.2)
            beats.append(Build.objects.get(pk=build.pk).heartbeat_at)
    worker.join(60)
    assert len(set(beats)) >= 3, beats  # beating while it waited, before any progress
    build.refresh_from_db()
    assert build.error_code == "bad-ref"


@pytest.mark.django_db
def test_a_build_the_reaper_ended_is_not_overwritten_by_its_late_finish(
    data_dir,
    monkeypatch,
):
    build = BuildFactory.create(revision=_revision("no-such-branch"), sha="", toolchain="")
    real_build = builder.build_kernel

    def reaped_meanwhile(*args: object, **kw: object) -> object:
        services.reap_stale_builds(now=timezone.now() + timedelta(hours=1))
        return real_build(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(builder, "build_kernel", reaped_meanwhile)
    services.execute_build(build.pk)
    build.refresh_from_db()
    assert (build.result, build.error_code) == ("failed", "infra-error")
    assert "no heartbeat" in build.error_message


@pytest.mark.django_db
def test_artifacts_of_unfinished_comparisons_are_never_pruned(tmp_path):
    store = Store(tmp_path)
    keys = []
    for name in "ab":
        blob = tmp_path / f"{name}.bin"
        blob.write_bytes(b"x" * 1000)
        key = name * 64
        store.publish(key, {"bzImage": blob}, {"image": "bzImage"}, limit=1 << 20)
        keys.append(key)
    needed = BuildFactory.create(artifact_key=keys[0])
    ComparisonFactory.create(build_a=needed, build_b=needed)
    pruned = store.prune(max_artifact_bytes=0, max_slots=0, keep=orchestrator.artifacts_in_use())
    assert pruned == [f"artifact {keys[1]}"]
    assert store.lookup(keys[0]) is not None
