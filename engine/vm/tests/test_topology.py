"""Topologies: the syntax, each limit's refusal, and the memory rule (no database, no VM)."""

import re
from pathlib import Path

import pytest

from engine.build.arch import CONFIGS
from engine.vm.topology import (
    GUEST_NR_CPUS,
    MEMORY_PER_EXTRA_CPU_MB,
    Topology,
    TopologyError,
    check,
    memory_for,
    parse_topology,
)

X86_BASE = Topology(1, 2, 2)  # qemu-x86_64
PPC_BASE = Topology(1, 1, 8)  # qemu-ppc64le


def test_topology_counts_its_cpus_and_prints_as_it_is_read() -> None:
    assert Topology(2, 3, 4).cpus == 24
    assert str(Topology(2, 3, 4)) == "2x3x4"
    assert parse_topology(str(Topology(2, 3, 4)), X86_BASE) == Topology(2, 3, 4)


@pytest.mark.parametrize(
    ("text", "base", "expected"),
    [
        ("1x2x2", X86_BASE, Topology(1, 2, 2)),
        (" 2X1X8 ", X86_BASE, Topology(2, 1, 8)),  # checked later, not here
        ("8", X86_BASE, Topology(1, 4, 2)),  # keeps SMT2 and one socket
        ("2", X86_BASE, Topology(1, 1, 2)),
        ("4", X86_BASE, Topology(1, 2, 2)),
        ("16", PPC_BASE, Topology(1, 2, 8)),  # 2 cores x SMT8
        ("8", PPC_BASE, Topology(1, 1, 8)),
        ("8", Topology(2, 1, 1), Topology(2, 4, 1)),
        ("0x1x1", X86_BASE, Topology(0, 1, 1)),  # check() refuses it, with its reason
    ],
)
def test_parse(text: str, base: Topology, expected: Topology) -> None:
    assert parse_topology(text, base) == expected


@pytest.mark.parametrize(
    ("text", "base", "message"),
    [
        ("6", PPC_BASE, "6 vCPUs do not divide into 1 socket(s) of cores with 8 thread(s)"),
        ("3", X86_BASE, "3 vCPUs do not divide"),
        ("0", X86_BASE, "0 vCPUs do not divide"),
        ("1x2", X86_BASE, "bad topology '1x2'"),
        ("1s2c2t", X86_BASE, "bad topology"),
        ("-1x2x2", X86_BASE, "bad topology"),
        ("", X86_BASE, "bad topology ''"),
        ("4.0", X86_BASE, "bad topology"),
    ],
)
def test_parse_refuses(text: str, base: Topology, message: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(message)):
        parse_topology(text, base)


@pytest.mark.parametrize(
    ("arch", "machine", "topology"),
    [
        ("x86_64", "pc", Topology(1, 1, 2)),  # acceptance: smt-toggle at 2, 4, 8 vCPUs
        ("x86_64", "pc", Topology(1, 2, 2)),
        ("x86_64", "pc", Topology(1, 4, 2)),
        ("x86_64", "q35", Topology(2, 4, 1)),
        ("ppc64le", "pseries", Topology(1, 1, 8)),  # acceptance: 1 and 2 cores x SMT8
        ("ppc64le", "pseries", Topology(1, 2, 8)),
        ("ppc64le", "", Topology(1, 4, 4)),  # libvirt's default ppc64 machine is pseries
        ("ppc64le", "pseries-10.0", Topology(1, 8, 2)),
        ("ppc64le", "powernv9", Topology(1, 2, 4)),
    ],
)
def test_check_allows(arch: str, machine: str, topology: Topology) -> None:
    assert check(arch, machine, topology, max_vcpus=16) is None


@pytest.mark.parametrize(
    ("arch", "machine", "topology", "max_vcpus", "reason"),
    [
        ("x86_64", "pc", Topology(0, 2, 2), 16, "sockets must be at least 1, got 0"),
        ("x86_64", "pc", Topology(1, 0, 2), 16, "cores must be at least 1, got 0"),
        ("x86_64", "pc", Topology(1, 2, -1), 16, "threads must be at least 1, got -1"),
        ("x86_64", "pc", Topology(1, 8, 2), 8,
         "1x8x2 is 16 vCPUs, more than this host allows (8, RCUBENCH_MAX_VCPUS)"),
        ("ppc64le", "pseries", Topology(1, 2, 8), 8, "more than this host allows (8"),
        ("x86_64", "pc", Topology(1, 33, 2), 1000,
         f"1x33x2 is 66 vCPUs, more than the guest kernel's CONFIG_NR_CPUS ({GUEST_NR_CPUS})"),
        ("x86_64", "pc", Topology(1, 1, 4), 16,
         "x86_64 has at most 2 threads per core (SMT2), got 4"),
        ("ppc64le", "pseries", Topology(1, 1, 3), 16,
         "ppc64le pseries takes 1, 2, 4 or 8 threads per core (the POWER SMT modes), got 3"),
        ("ppc64le", "pseries", Topology(1, 1, 16), 64, "got 16"),
        ("ppc64le", "powernv9", Topology(1, 1, 8), 16,
         "ppc64le powernv9 takes 1, 2 or 4 threads per core"),
        ("ppc64le", "mac99", Topology(1, 1, 1), 16, "no topology rules for ppc64le machine"),
        ("riscv64", "virt", Topology(1, 1, 1), 16, "no topology rules for arch 'riscv64'"),
    ],
)  # fmt: skip
def test_check_refuses(
    arch: str, machine: str, topology: Topology, max_vcpus: int, reason: str
) -> None:
    why = check(arch, machine, topology, max_vcpus)
    assert why is not None
    assert reason in why


def test_guest_nr_cpus_is_the_built_kernels() -> None:
    """The limit is the guest kernels' CONFIG_NR_CPUS: a config raising it raises this."""
    configs = sorted(Path(CONFIGS).glob("*.config"))
    assert configs
    for config in configs:
        values = re.findall(r"^CONFIG_NR_CPUS=(\d+)$", config.read_text(), re.MULTILINE)
        assert values == [str(GUEST_NR_CPUS)], config.name


@pytest.mark.parametrize(
    ("base_mb", "base_cpus", "cpus", "expected"),
    [
        (1024, 4, 4, 1024),  # the base's own shape: its memory
        (1024, 4, 8, 1024 + 4 * MEMORY_PER_EXTRA_CPU_MB),
        (1024, 4, 2, 1024),  # never below the base
        (1024, 8, 16, 1024 + 8 * MEMORY_PER_EXTRA_CPU_MB),
        (512, 1, 64, 512 + 63 * MEMORY_PER_EXTRA_CPU_MB),
    ],
)
def test_memory_rule(base_mb: int, base_cpus: int, cpus: int, expected: int) -> None:
    assert memory_for(base_mb, base_cpus, cpus) == expected


def test_memory_per_extra_cpu_is_32_mib() -> None:
    assert memory_for(1024, 4, 8) == 1152
