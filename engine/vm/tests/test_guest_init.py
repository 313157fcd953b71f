"""The guest init's reading of rcubench.<name>= from the kernel command line, run with
busybox's sh (the guest's shell) against a stand-in for /proc/cmdline."""

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.cmdline import compose
from benchmarks.registry import get
from engine.vm import images
from engine.vm.images import INIT

BUSYBOX = shutil.which("busybox")


def _arg(tmp_path: Path, cmdline: str, name: str) -> str:
    # The init's own arg() line, reading the stand-in file instead of /proc/cmdline.
    line = next(ln for ln in INIT.read_text().splitlines() if ln.startswith("arg()"))
    fake = tmp_path / "cmdline"
    fake.write_text(cmdline + "\n")  # as the kernel shows it
    script = line.replace("/proc/cmdline", str(fake)) + f'\nprintf "[%s]" "$(arg {name})"'
    assert BUSYBOX is not None
    out = subprocess.run([BUSYBOX, "sh", "-c", script], capture_output=True, text=True,
                         check=True, timeout=30)  # fmt: skip
    return out.stdout.removeprefix("[").removesuffix("]")


pytestmark = pytest.mark.skipif(BUSYBOX is None, reason="busybox is not installed")


def test_the_first_rcubench_parameter_wins(tmp_path):
    # The greedy sed took the last: an extra rcubench.bench= after the benchmark's won.
    line = "console=ttyS0 rcubench.bench=boot-time rcuscale.shutdown=0 rcubench.bench=bpf-slab"
    assert _arg(tmp_path, line, "bench") == "boot-time"


def test_only_a_whole_parameter_name_matches(tmp_path):
    line = "xrcubench.bench=evil rcubench.benchmark=evil rcubench.bench=smt-toggle"
    assert _arg(tmp_path, line, "bench") == "smt-toggle"
    assert _arg(tmp_path, "rcuscale.shutdown=1", "bench") == ""  # in-kernel: init idles


def test_the_run_service_command_line_gives_the_guest_the_benchmarks_own(tmp_path):
    own = get("smt-toggle").spec.cmdline
    line = "console=ttyS0 panic=-1 " + compose(own, "rcubench.bench=x rcubench.cycles=1")
    assert (_arg(tmp_path, line, "bench"), _arg(tmp_path, line, "cycles")) == ("smt-toggle", "10")


def test_the_image_key_covers_the_shared_guest_headers(tmp_path, monkeypatch):
    """A change of benchmarks/include/*.h rebuilds the initramfs, as a program's does."""

    include = tmp_path / "include"
    include.mkdir()
    (include / "rcubench-guest.h").write_text("/* one */\n")
    monkeypatch.setattr(images, "GUEST_INCLUDE", include)
    busybox = Path("/bin/busybox")
    before = images.image_key("x86_64", busybox, images.guest_programs())
    (include / "rcubench-guest.h").write_text("/* two */\n")
    assert images.image_key("x86_64", busybox, images.guest_programs()) != before
