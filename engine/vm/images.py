"""The guest initramfs: busybox-static, rcubench's init and the benchmarks' guest programs.

Reproducible: files are packed in sorted order with fixed mtimes and owners (cpio
--reproducible, gzip -n), so the same inputs give the same bytes, and the image is cached
under the hash of its inputs (init, busybox, the shared guest headers, each program's
source, compiler, arch).
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.build.arch import profile
from engine.build.store import flocked

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "vm-images" / "init"
BENCHMARKS = ROOT / "benchmarks"
# Headers every guest program may include (benchmarks/include/*.h).
GUEST_INCLUDE = BENCHMARKS / "include"
DEFAULT_BUSYBOX = {"x86_64": Path("/bin/busybox")}
# Where an image ships its own busybox of an arch Debian cannot install beside the host's
# (the container image, Dockerfile): the data dir may be a volume that hides anything else.
IMAGE_GUEST_DIR = Path("/usr/local/lib/rcubench/guest")


class ImageError(RuntimeError):
    """The initramfs could not be built (missing busybox, a guest program that fails)."""


@dataclass(frozen=True)
class GuestProgram:
    name: str  # installed as /bench/<name>
    source: Path  # one C file (built -static) or a busybox sh script (copied)


def guest_programs() -> list[GuestProgram]:
    """Every benchmarks/<bench>/guest/<name>.c and <name>.sh."""
    sources = [*BENCHMARKS.glob("*/guest/*.c"), *BENCHMARKS.glob("*/guest/*.sh")]
    return [GuestProgram(src.stem, src) for src in sorted(sources)]


def busybox_for(arch: str, data_dir: Path) -> Path:
    path = DEFAULT_BUSYBOX.get(arch) or data_dir / "guest" / arch / "busybox"
    if not path.exists() and (shipped := IMAGE_GUEST_DIR / arch / "busybox").exists():
        return shipped
    if not path.exists():
        raise ImageError(f"no busybox-static for {arch} at {path} (run scripts/setup.sh)")
    return path


def image_key(arch: str, busybox: Path, programs: list[GuestProgram]) -> str:
    h = hashlib.sha256()
    h.update(f"{arch}\n{profile(arch).toolchain()}\n".encode())
    headers = sorted(GUEST_INCLUDE.glob("*.h"))
    for path in (INIT, busybox, *headers, *(p.source for p in programs)):
        h.update(hashlib.sha256(path.read_bytes()).digest())
    h.update("\n".join(p.name for p in programs).encode())
    return h.hexdigest()


def build_initramfs(arch: str, cache_dir: Path, busybox: Path) -> Path:
    """The initramfs for `arch`, built on first use and cached in `cache_dir`."""
    programs = guest_programs()
    key = image_key(arch, busybox, programs)
    out = cache_dir / arch / f"initramfs-{key[:16]}.cpio.gz"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with flocked(out.with_suffix(".lock"), timeout=600):
        if out.exists():
            return out
        with tempfile.TemporaryDirectory(prefix="rcubench-initramfs-") as tmp:
            root = Path(tmp) / "root"
            for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "bench"):
                (root / d).mkdir(parents=True)
            shutil.copyfile(busybox, root / "bin/busybox")
            shutil.copyfile(INIT, root / "init")
            for prog in programs:
                _compile(arch, prog, root / "bench" / prog.name)
            for path in root.rglob("*"):
                os.chmod(path, 0o755 if path.is_dir() or path.parent.name in ("bin", "bench")
                         or path.name == "init" else 0o644)  # fmt: skip
            tmp_out = out.with_name(f".{out.name}.{os.getpid()}")
            _pack(root, tmp_out)
            tmp_out.rename(out)
    return out


def _compile(arch: str, prog: GuestProgram, dest: Path) -> None:
    if prog.source.suffix == ".sh":
        shutil.copyfile(prog.source, dest)
        return
    cc = profile(arch).cc
    result = subprocess.run(
        [cc, "-static", "-O2", "-Wall", "-Werror", "-pthread", "-I", str(GUEST_INCLUDE),
         "-o", str(dest), str(prog.source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise ImageError(f"{cc} failed on {prog.source.name}:\n{result.stderr.strip()}")


def _pack(root: Path, out: Path) -> None:
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    for name in files:
        os.utime(root / name, (0, 0), follow_symlinks=False)
    with open(out, "wb") as f:
        cpio = subprocess.Popen(
            ["cpio", "--quiet", "--reproducible", "-o", "-H", "newc", "-R", "0:0"],
            cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        gzip = subprocess.Popen(["gzip", "-n", "-9"], stdin=cpio.stdout, stdout=f)
        if cpio.stdin is None or cpio.stdout is None:  # pragma: no cover - PIPE gives both
            raise ImageError("no pipe to cpio")
        cpio.stdout.close()
        cpio.stdin.write("".join(f"{name}\n" for name in files).encode())
        cpio.stdin.close()
        if cpio.wait() != 0 or gzip.wait() != 0:
            raise ImageError("cpio/gzip failed packing the initramfs")
