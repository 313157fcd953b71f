"""Real kernel builds of the default tree (Debian's linux-source-6.12, see conftest).

The object dirs and artifacts are fresh per test session; the ccache is the machine's own,
so the first run on a machine is cold and later ones are quicker. Builds are shared between
tests through the session-scoped `x86_build`.
"""

import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from workers.build import builder
from workers.build.builder import BuildError, BuildOutcome, BuildRequest, BuildSettings, build
from workers.build.tests.conftest import BASE_TAG, DEFAULT_TREE, FIXTURES

DATA_DIR = Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench"))
BENCH_FRAGMENT = ("CONFIG_RCU_SCALE_TEST=y", "CONFIG_BPF_SYSCALL=y")


@pytest.fixture(scope="session")
def settings() -> Iterator[BuildSettings]:
    # Not pytest's tmp_path: the unprivileged build user must reach the object dirs.
    root = Path(tempfile.mkdtemp(prefix="rcubench-build-test-", dir="/var/tmp"))
    root.chmod(0o755)
    yield BuildSettings(
        root=root / "build",
        mirrors=root / "mirrors",
        ccache=DATA_DIR / "ccache",
        min_free_bytes=1 << 30,
    )
    shutil.rmtree(root, ignore_errors=True)


def request(**kw: object) -> BuildRequest:
    fields: dict[str, object] = {
        "tree_url": str(DEFAULT_TREE),
        "ref": BASE_TAG,
        "arch": "x86_64",
        "fragments": BENCH_FRAGMENT,
        "allow_local": True,
    }
    return BuildRequest(**{**fields, **kw})  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def x86_race(settings) -> list[BuildOutcome]:
    """Two requests for one key at the same time: one builds, the other waits for it."""
    barrier = threading.Barrier(2)

    def one(_: int) -> BuildOutcome:
        barrier.wait()
        return build(request(), settings)

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(2)))


def test_two_concurrent_requests_build_once(x86_race):
    assert sorted(o.cached for o in x86_race) == [False, True]
    assert len({o.key for o in x86_race}) == 1
    assert len({o.image for o in x86_race}) == 1
    built = next(o for o in x86_race if not o.cached)
    assert built.log_path.read_text().count(" bzImage") >= 1
    assert len(list((built.artifact_dir.parent).iterdir())) == 1


def test_x86_build_gives_a_bootable_image_and_its_config(x86_race):
    out = x86_race[0]
    kind = subprocess.run(["file", "-b", str(out.image)], capture_output=True, text=True)
    assert kind.stdout.startswith("Linux kernel x86 boot executable bzImage"), kind.stdout
    config = (out.artifact_dir / "config").read_text()
    assert "CONFIG_RCU_SCALE_TEST=y" in config
    assert "CONFIG_SLUB_DEBUG=y" in config
    assert "CONFIG_HOTPLUG_SMT=y" in config
    assert (out.artifact_dir / "System.map").stat().st_size > 100_000
    assert out.sha == out.base_sha
    assert re.fullmatch(r"[0-9a-f]{40}", out.sha)
    assert "gcc" in out.toolchain
    assert "GNU ld" in out.toolchain


def test_a_cache_hit_returns_the_artifact_without_running_make(x86_race, settings, monkeypatch):
    def no_make(*args: object, **kwargs: object) -> None:
        raise AssertionError("make ran on a cache hit")

    monkeypatch.setattr(builder, "_compile", no_make)
    monkeypatch.setattr(builder, "run_logged", no_make)
    image = x86_race[0].image
    mtime = image.stat().st_mtime_ns
    # The same commit by another name (its sha) is the same key.
    out = build(request(ref=x86_race[0].sha), settings)
    assert out.cached
    assert out.key == x86_race[0].key
    assert image.stat().st_mtime_ns == mtime
    assert out.seconds < 5


def test_a_two_patch_series_is_applied_and_built_incrementally(x86_race, settings):
    mbox = (FIXTURES / "two-patches.mbox").read_bytes()
    out = build(request(mbox=mbox), settings)
    assert not out.cached
    assert out.sha != out.base_sha == x86_race[0].sha
    assert out.series is not None
    assert out.series.method == "git am"
    assert out.series.subjects == (
        "rcuscale: Shorten the default holdoff to one second",
        "rcu: Document the jiffies_till_first_fqs default",
    )
    assert all(m.startswith("<") for m in out.series.message_ids)
    # Same slot as the base build: only what the patches touch is compiled again.
    compiled = re.findall(r"^\s+CC\s+(\S+)", out.log_path.read_text(), re.M)
    assert "kernel/rcu/rcuscale.o" in compiled
    assert "kernel/rcu/tree.o" in compiled
    assert len(compiled) < 20, compiled
    again = build(request(mbox=mbox), settings)
    assert again.cached
    assert again.key == out.key
    assert again.series == out.series


def test_a_patch_that_does_not_apply_is_patch_failed_with_index_and_hunk(settings):
    mbox = (FIXTURES / "conflict.mbox").read_bytes()
    with pytest.raises(BuildError) as err:
        build(request(mbox=mbox), settings)
    assert err.value.code == "patch-failed"
    assert "patch 1 ('rcuscale: Reword writer_holdoff description')" in err.value.message
    assert "kernel/rcu/rcuscale.c, hunk #1" in err.value.message
    assert "Patch failed at 0001" in err.value.log


def test_a_dropped_kconfig_option_is_reported(settings):
    # VIRTIO_BLK needs BLOCK, which tinyconfig leaves off: Kconfig drops it silently.
    with pytest.raises(BuildError) as err:
        build(request(fragments=(*BENCH_FRAGMENT, "CONFIG_VIRTIO_BLK=y")), settings)
    assert err.value.code == "config-dropped"
    assert "CONFIG_VIRTIO_BLK (requested y, got n)" in err.value.message
    assert not list((settings.root / "artifacts").glob("*/*/build.log")) or all(
        "VIRTIO_BLK" not in p.read_text() for p in (settings.root / "artifacts").glob("*/*/config")
    )


@pytest.mark.parametrize(
    ("kw", "code", "message"),
    [
        ({"ref": "--upload-pack=touch /tmp/pwned"}, "bad-ref", "starts with '-'"),
        ({"ref": "v6.12..HEAD"}, "bad-ref", "is not a branch, tag or sha"),
        ({"ref": "no-such-branch"}, "bad-ref", "does not name a commit"),
        ({"tree_url": "ext::sh -c touch% /tmp/pwned", "allow_local": False}, "fetch-failed",
         "tree URL refused"),
        ({"tree_url": "file:///var/lib/rcubench/trees/linux-6.12.git", "allow_local": False},
         "fetch-failed", "tree URL refused"),
    ],
)  # fmt: skip
def test_a_malicious_ref_or_url_is_refused_before_anything_runs(settings, kw, code, message):
    with pytest.raises(BuildError) as err:
        build(request(**kw), settings)
    assert err.value.code == code
    assert message in err.value.message
    assert not Path("/tmp/pwned").exists()


def test_a_build_past_its_time_limit_is_killed_and_reported(x86_race, settings):
    mbox = (FIXTURES / "needs-fuzz.mbox").read_bytes()
    short = BuildSettings(**{**settings.__dict__, "timeout": 2.0})
    with pytest.raises(BuildError) as err:
        build(request(mbox=mbox, patch_fallback=True), short)
    assert err.value.code == "timeout"
    assert "killed after" in err.value.message or "no time left" in err.value.message


@pytest.mark.slow
def test_ppc64le_cross_build(settings):
    out = build(request(arch="ppc64le"), settings)
    kind = subprocess.run(["file", "-b", str(out.image)], capture_output=True, text=True)
    assert kind.stdout.startswith("ELF 64-bit LSB executable, 64-bit PowerPC"), kind.stdout
    config = (out.artifact_dir / "config").read_text()
    assert "CONFIG_PPC_PSERIES=y" in config
    assert "CONFIG_RCU_SCALE_TEST=y" in config
    assert "powerpc64le-linux-gnu-gcc" in out.toolchain
