"""The lab stand-in as a test fixture: a QEMU guest booted from Debian's own kernel with
sshd and kexec-tools (vm-images/lab-standin.sh), which is a real machine to the runner:
reached over ssh on a loopback-forwarded port, its serial console on a TCP port, its power
switch `virsh destroy` + `virsh start`. One per test session; its known-good kernel comes
back on every reset, as a lab machine's firmware boots it."""

import os
import shlex
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.lab.runner import LabHost
from engine.lab.ssh import Endpoint

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "vm-images" / "lab-standin.sh"
IMAGE_DIR = Path(os.environ.get("RCUBENCH_LAB_STANDIN_DIR", "/var/lib/rcubench/lab-standin"))
VIRSH = "virsh -q -c qemu:///system"
POWER = f"{VIRSH} destroy -- {{name}}\n{VIRSH} start -- {{name}}"  # `--`: options end
# Its reprovision command: powered off, and whatever a kernel wrote to its disk thrown away.
REIMAGE = f"bash {shlex.quote(str(SCRIPT))} reimage {{name}} {shlex.quote(str(IMAGE_DIR))}"
BOOT_TIMEOUT = 180.0  # the known-good kernel to sshd under TCG, with room for a busy host


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def standin_host(name: str, ssh_port: int, console_port: int) -> LabHost:
    key = (IMAGE_DIR / "ssh_host_ed25519_key.pub").read_text().split()
    endpoint = Endpoint("127.0.0.1", ssh_port, "root", IMAGE_DIR / "id_ed25519",
                        f"{key[0]} {key[1]}")  # fmt: skip
    return LabHost(
        name=name, endpoint=endpoint,
        console_command=f"socat -u TCP:127.0.0.1:{console_port} STDOUT",
        power_command=POWER, boot_timeout=BOOT_TIMEOUT,
    )  # fmt: skip


@pytest.fixture(scope="session")
def standin() -> Iterator[LabHost]:
    """A running stand-in with sshd answering; destroyed and undefined at the end."""
    subprocess.run(["bash", str(SCRIPT), "build", str(IMAGE_DIR)], check=True)
    name = f"rcubench-lab-test-{uuid.uuid4().hex[:6]}"
    ssh_port, console_port = _free_port(), _free_port()
    script = ["bash", str(SCRIPT)]
    subprocess.run([*script, "define", name, str(ssh_port), str(console_port), str(IMAGE_DIR)],
                   check=True)  # fmt: skip
    try:
        subprocess.run([*script, "wait-ssh", str(ssh_port), str(int(BOOT_TIMEOUT)),
                        str(IMAGE_DIR)], check=True)  # fmt: skip
        yield standin_host(name, ssh_port, console_port)
    finally:
        subprocess.run([*script, "undefine", name, str(IMAGE_DIR)], check=False)


def powered_on(host: LabHost) -> None:
    """Start the stand-in if a test left it off (a host that was made never to return)."""
    subprocess.run([*VIRSH.split(), "start", host.name], capture_output=True, check=False)


def with_power(host: LabHost, power_command: str, boot_timeout: float) -> LabHost:
    return replace(host, power_command=power_command, boot_timeout=boot_timeout)


def untrusted(host: LabHost) -> LabHost:
    """The stand-in as a host of a pool that takes untrusted kernels: re-imaged and
    power-cycled after every run."""
    return replace(host, trusted_only=False, reprovision_command=REIMAGE)
