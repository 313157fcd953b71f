"""Kernels and images for the perf scripts: built (or taken from the cache) through the
same engine the workers use, in the machine's data dir, so later runs reuse them."""

import os
from pathlib import Path

from benchmarks.registry import BENCHMARKS, kconfig_for
from workers.build.builder import BuildOutcome, BuildRequest, BuildSettings, build
from workers.vm.images import build_initramfs, busybox_for

DATA = Path(os.environ.get("RCUBENCH_DATA_DIR", "/var/lib/rcubench"))
TREE = DATA / "trees" / "linux-6.12.git"
REF = "v6.12.117-debian"


def kernel(arch: str) -> BuildOutcome:
    settings = BuildSettings(root=DATA / "build", mirrors=DATA / "mirrors", ccache=DATA / "ccache")
    request = BuildRequest(
        tree_url=str(TREE), ref=REF, arch=arch, fragments=kconfig_for(BENCHMARKS),
        allow_local=True,
    )  # fmt: skip
    return build(request, settings)


def initramfs(arch: str) -> Path:
    return build_initramfs(arch, DATA / "images", busybox_for(arch, DATA))
