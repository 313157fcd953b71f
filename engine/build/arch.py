"""What differs between the architectures rcubench builds for."""

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CONFIGS = Path(__file__).parent / "configs"


@dataclass(frozen=True)
class ArchProfile:
    name: str  # rcubench's name (Target.arch): x86_64, ppc64le
    make_arch: str  # the kernel's ARCH=
    cross_compile: str  # CROSS_COMPILE= prefix ("" when native)
    base_target: str  # the make target that starts the config: tinyconfig / allnoconfig
    image_target: str  # the make target that builds the bootable image
    image_path: str  # the image, relative to the object directory

    @property
    def base_fragment(self) -> Path:
        return CONFIGS / f"{self.name}.config"

    @property
    def cc(self) -> str:
        return f"{self.cross_compile}gcc"

    def toolchain(self) -> str:
        """Compiler and linker versions: part of the cache key, as a new compiler makes a
        different kernel from the same source."""
        versions = []
        for tool in (self.cc, f"{self.cross_compile}ld"):
            if shutil.which(tool) is None:
                raise ToolchainMissing(f"{tool} is not installed (run scripts/setup.sh)")
            out = subprocess.run(
                [tool, "--version"], capture_output=True, text=True, check=True, timeout=30
            )
            versions.append(out.stdout.splitlines()[0].strip())
        return " / ".join(versions)


class ToolchainMissing(RuntimeError):
    """The compiler or linker for an architecture is not installed on this worker."""


ARCHS: dict[str, ArchProfile] = {
    "x86_64": ArchProfile(
        name="x86_64",
        make_arch="x86",
        cross_compile="",
        base_target="tinyconfig",
        image_target="bzImage",
        image_path="arch/x86/boot/bzImage",
    ),
    "ppc64le": ArchProfile(
        name="ppc64le",
        make_arch="powerpc",
        cross_compile="powerpc64le-linux-gnu-",
        base_target="allnoconfig",
        image_target="vmlinux",
        image_path="vmlinux",
    ),
}


def profile(arch: str) -> ArchProfile:
    try:
        return ARCHS[arch]
    except KeyError:
        raise ValueError(f"unknown arch {arch!r}; known: {', '.join(ARCHS)}") from None
