"""Real kernel builds of the default tree (Debian's linux-source-6.12).

The session's kernels come from the root conftest (`x86_kernel_race`, `x86_kernel`,
`ppc64le_kernel`), built once per session in a fresh data dir with the machine's ccache,
and shared with the VM and service tests.
"""

import re
import subprocess
from pathlib import Path

import pytest

from engine.build import builder
from engine.build.builder import BuildError, BuildSettings, build_kernel
from engine.build.tests.conftest import FIXTURES


def test_two_concurrent_requests_build_once(x86_kernel_race):
    assert sorted(o.cached for o in x86_kernel_race) == [False, True]
    assert len({o.key for o in x86_kernel_race}) == 1
    assert len({o.image for o in x86_kernel_race}) == 1
    built = next(o for o in x86_kernel_race if not o.cached)
    assert built.log_path.read_text().count(" bzImage") >= 1
    assert len(list((built.artifact_dir.parent).iterdir())) == 1


def test_x86_build_gives_a_bootable_image_and_its_config(x86_kernel):
    out = x86_kernel
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


def test_a_cache_hit_returns_the_artifact_without_running_make(
    x86_kernel, build_settings, monkeypatch, kernel_request
):
    def no_make(*args: object, **kwargs: object) -> None:
        raise AssertionError("make ran on a cache hit")

    monkeypatch.setattr(builder, "_compile", no_make)
    monkeypatch.setattr(builder, "run_logged", no_make)
    image = x86_kernel.image
    mtime = image.stat().st_mtime_ns
    # The same commit by another name (its sha) is the same key.
    out = build_kernel(kernel_request(ref=x86_kernel.sha), build_settings)
    assert out.cached
    assert out.key == x86_kernel.key
    assert image.stat().st_mtime_ns == mtime
    assert out.seconds < 5


def test_a_two_patch_series_is_applied_and_built_incrementally(
    x86_kernel, build_settings, kernel_request
):
    mbox = (FIXTURES / "two-patches.mbox").read_bytes()
    phases: list[str] = []
    out = build_kernel(kernel_request(mbox=mbox), build_settings, progress=phases.append)
    assert not out.cached
    # Progress keeps coming while make runs (each output line), not only at phase starts.
    assert phases[:3] == ["fetch", "apply", "config"]
    assert phases.count("make") > 10
    assert out.sha != out.base_sha == x86_kernel.sha
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
    again = build_kernel(kernel_request(mbox=mbox), build_settings)
    assert again.cached
    assert again.key == out.key
    assert again.series == out.series


def test_a_patch_that_does_not_apply_is_patch_failed_with_index_and_hunk(
    build_settings, kernel_request
):
    mbox = (FIXTURES / "conflict.mbox").read_bytes()
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=mbox), build_settings)
    assert err.value.code == "patch-failed"
    assert "patch 1 ('rcuscale: Reword writer_holdoff description')" in err.value.message
    assert "kernel/rcu/rcuscale.c, hunk #1" in err.value.message
    assert "Patch failed at 0001" in err.value.log


def test_a_dropped_kconfig_option_is_reported(build_settings, kernel_request):
    # VIRTIO_BLK needs BLOCK, which tinyconfig leaves off: Kconfig drops it silently.
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(fragments=("CONFIG_VIRTIO_BLK=y",)), build_settings)
    assert err.value.code == "config-dropped"
    assert "CONFIG_VIRTIO_BLK (requested y, got n)" in err.value.message
    assert not list((build_settings.root / "artifacts").glob("*/*/build.log")) or all(
        "VIRTIO_BLK" not in p.read_text()
        for p in (build_settings.root / "artifacts").glob("*/*/config")
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
def test_a_malicious_ref_or_url_is_refused_before_anything_runs(
    build_settings, kw, code, message, kernel_request
):
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(**kw), build_settings)
    assert err.value.code == code
    assert message in err.value.message
    assert not Path("/tmp/pwned").exists()


def test_a_build_past_its_time_limit_is_killed_and_reported(
    x86_kernel, build_settings, kernel_request
):
    mbox = (FIXTURES / "needs-fuzz.mbox").read_bytes()
    short = BuildSettings(**{**build_settings.__dict__, "timeout": 2.0})
    with pytest.raises(BuildError) as err:
        build_kernel(kernel_request(mbox=mbox, patch_fallback=True), short)
    assert err.value.code == "timeout"
    assert "killed after" in err.value.message or "no time left" in err.value.message


def test_ppc64le_cross_build(ppc64le_kernel):
    out = ppc64le_kernel
    kind = subprocess.run(["file", "-b", str(out.image)], capture_output=True, text=True)
    assert kind.stdout.startswith("ELF 64-bit LSB executable, 64-bit PowerPC"), kind.stdout
    config = (out.artifact_dir / "config").read_text()
    assert "CONFIG_PPC_PSERIES=y" in config
    assert "CONFIG_RCU_SCALE_TEST=y" in config
    assert "powerpc64le-linux-gnu-gcc" in out.toolchain
