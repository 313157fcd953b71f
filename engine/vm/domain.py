"""libvirt domain XML for one benchmark boot: direct kernel boot, console to a file."""

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# ppc64le runs on QEMU 10.0 from bookworm-backports, unpacked by scripts/qemu-ppc64.sh: QEMU
# 7.2's pseries refuses SMT threads under TCG. Its firmware is VOF, QEMU's minimal Open
# Firmware for direct kernel boot (machine property x-vof=on, which libvirt does not
# model, so it goes on QEMU's command line): SLOF under TCG took 15-26 s before the
# kernel started, VOF 0.5 s (measured, QEMU 10.0.2).
_PPC_QEMU = "/opt/rcubench-qemu/current"
EMULATOR = {
    "x86_64": "/usr/bin/qemu-system-x86_64",
    "ppc64le": f"{_PPC_QEMU}/qemu-system-ppc64",  # a wrapper: its own modules only
}
FIRMWARE = {"ppc64le": f"{_PPC_QEMU}/usr/share/qemu/vof.bin"}
MACHINE_ARGS = {"ppc64le": "x-vof=on"}
_QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", _QEMU_NS)
_CONSOLE = {"x86_64": "ttyS0", "ppc64le": "hvc0"}
_PREFIX = "rcubench-"


@dataclass(frozen=True)
class VMSpec:
    name: str  # unique; starts with "rcubench-" so leftovers can be found and destroyed
    arch: str  # x86_64 | ppc64le
    machine: str  # pc | pseries
    kernel: Path
    initrd: Path
    cmdline: str  # the benchmark's and the side's parameters; console= and panic= are added
    sockets: int
    cores: int
    threads: int
    memory_mb: int
    console_log: Path
    kvm: bool = False  # TCG unless /dev/kvm is usable for stock kernels

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    @property
    def full_cmdline(self) -> str:
        # panic=-1: reboot at once on panic, and on_reboot=destroy ends the domain.
        return f"console={_CONSOLE[self.arch]} panic=-1 {self.cmdline}".strip()


@dataclass(frozen=True)
class Pinning:
    """Host CPUs of the guest: one per vCPU, and one for QEMU's emulator threads."""

    vcpus: tuple[int, ...]
    emulator: int


def pinning(vcpus: int, host_cpus: Iterable[int]) -> Pinning | None:
    """Pin only where the host has spare cores (more than vCPUs + 1): each vCPU and the
    emulator get a CPU of their own, and the lowest CPUs (where most of the host's
    interrupts and housekeeping land) stay the host's. With fewer, pinning would put
    guest threads on the same CPUs as the host's work and only remove the scheduler's
    freedom to move them away from it."""
    cpus = sorted(set(host_cpus))
    if len(cpus) <= vcpus + 1:
        return None
    return Pinning(vcpus=tuple(cpus[-vcpus:]), emulator=cpus[-vcpus - 1])


def is_rcubench_domain(name: str) -> bool:
    return name.startswith(_PREFIX)


def domain_xml(spec: VMSpec, pin: Pinning | None = None) -> str:
    if not is_rcubench_domain(spec.name):
        raise ValueError(f"domain name {spec.name!r} must start with {_PREFIX!r}")
    dom = ET.Element("domain", type="kvm" if spec.kvm else "qemu")
    ET.SubElement(dom, "name").text = spec.name
    ET.SubElement(dom, "memory", unit="MiB").text = str(spec.memory_mb)
    ET.SubElement(dom, "vcpu").text = str(spec.cpus)
    if pin is not None:
        if len(pin.vcpus) != spec.cpus:
            raise ValueError(f"{len(pin.vcpus)} pinned vCPUs for a guest of {spec.cpus}")
        tune = ET.SubElement(dom, "cputune")
        for vcpu, host_cpu in enumerate(pin.vcpus):
            ET.SubElement(tune, "vcpupin", vcpu=str(vcpu), cpuset=str(host_cpu))
        ET.SubElement(tune, "emulatorpin", cpuset=str(pin.emulator))
    os_ = ET.SubElement(dom, "os")
    ET.SubElement(os_, "type", arch=spec.arch, machine=spec.machine).text = "hvm"
    if spec.arch in FIRMWARE:
        ET.SubElement(os_, "loader", type="rom").text = FIRMWARE[spec.arch]
    ET.SubElement(os_, "kernel").text = str(spec.kernel)
    ET.SubElement(os_, "initrd").text = str(spec.initrd)
    ET.SubElement(os_, "cmdline").text = spec.full_cmdline
    features = ET.SubElement(dom, "features")
    if spec.arch == "x86_64":
        ET.SubElement(features, "acpi")  # without it the guest cannot power itself off
    cpu = ET.SubElement(dom, "cpu")
    ET.SubElement(
        cpu, "topology", sockets=str(spec.sockets), dies="1", cores=str(spec.cores),
        threads=str(spec.threads),
    )  # fmt: skip
    ET.SubElement(dom, "clock", offset="utc")
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        ET.SubElement(dom, event).text = "destroy"
    devices = ET.SubElement(dom, "devices")
    ET.SubElement(devices, "emulator").text = EMULATOR[spec.arch]
    serial = ET.SubElement(devices, "serial", type="file")
    # Appended to the empty file the runner made, which virtlogd then keeps as it is (owner,
    # mode); with append="off" it makes a new one of its own (root's, 0600).
    ET.SubElement(serial, "source", path=str(spec.console_log), append="on")
    if spec.arch == "ppc64le":
        ET.SubElement(serial, "address", type="spapr-vio")
    ET.SubElement(devices, "memballoon", model="none")
    # No USB controller: nothing uses it, and it is one more device to set up per boot.
    ET.SubElement(devices, "controller", type="usb", model="none")
    if spec.arch in MACHINE_ARGS:  # QEMU merges a second -machine into the first
        args = ET.SubElement(dom, f"{{{_QEMU_NS}}}commandline")
        for value in ("-machine", MACHINE_ARGS[spec.arch]):
            ET.SubElement(args, f"{{{_QEMU_NS}}}arg", value=value)
    return ET.tostring(dom, encoding="unicode")
