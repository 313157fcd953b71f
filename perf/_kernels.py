"""Kernels and images for the perf scripts: built (or taken from the cache) through the
same engine the workers use, in the machine's data dir, so later runs reuse them."""

import os
from pathlib import Path

from benchmarks.registry import BENCHMARKS, kconfig_for
from engine.build.builder import BuildOutcome, BuildRequest, BuildSettings, build_kernel
from engine.vm.images import build_initramfs, busybox_for

DATA = Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench"))
TREE = DATA / "trees" / "linux-6.12.git"
REF = "v6.12.117-debian"


def build_settings(data: Path = DATA) -> BuildSettings:
    return BuildSettings(root=data / "build", mirrors=data / "mirrors", ccache=data / "ccache")


def request(arch: str, fragments: tuple[str, ...] | None = None) -> BuildRequest:
    """The base of the default tree with `fragments` (the builder adds the arch's base
    fragment); by default every benchmark's Kconfig, as the workers build it."""
    return BuildRequest(
        tree_url=str(TREE), ref=REF, arch=arch,
        fragments=kconfig_for(BENCHMARKS) if fragments is None else fragments,
        allow_local=True,
    )  # fmt: skip


def kernel(arch: str, fragments: tuple[str, ...] | None = None) -> BuildOutcome:
    return build_kernel(request(arch, fragments), build_settings())


def initramfs(arch: str, data: Path = DATA) -> Path:
    return build_initramfs(arch, data / "images", busybox_for(arch, data))
