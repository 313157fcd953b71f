"""Real boots under libvirt: initramfs images, and a check that no domain is left over."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.vm.images import build_initramfs, busybox_for

URI = "qemu:///system"
DATA_DIR = Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench"))


def _rcubench_domains() -> list[str]:
    out = subprocess.run(
        ["virsh", "-q", "-c", URI, "list", "--all", "--name"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [name for name in out.stdout.split() if name.startswith("rcubench-")]


@pytest.fixture(scope="session", autouse=True)
def no_leaked_domains() -> Iterator[None]:
    before = _rcubench_domains()
    yield
    leaked = sorted(set(_rcubench_domains()) - set(before))
    assert not leaked, f"domains left behind by the tests: {leaked}"


@pytest.fixture(scope="session")
def initramfs(kernel_data_dir) -> dict[str, Path]:
    return {
        arch: build_initramfs(arch, kernel_data_dir / "images", busybox_for(arch, DATA_DIR))
        for arch in ("x86_64", "ppc64le")
    }
