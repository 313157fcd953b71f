"""Fixtures of the lab runner's tests: the fake host (no machine), the stand-in host and the
x86_64 guest image."""

from pathlib import Path

import pytest

from engine.lab.tests.fakehost import fake_host  # noqa: F401  (a fixture)
from engine.lab.tests.standin import standin  # noqa: F401  (a fixture)
from engine.vm.images import build_initramfs, busybox_for

DATA_DIR = Path("/var/lib/rcubench")


@pytest.fixture(scope="session")
def x86_initramfs(kernel_data_dir) -> Path:
    return build_initramfs("x86_64", kernel_data_dir / "images", busybox_for("x86_64", DATA_DIR))
