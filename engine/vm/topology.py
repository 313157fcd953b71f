"""A guest's CPU topology (sockets x cores x threads), its syntax, its limits and its memory.

Sweeps vary a target's topology (issue 36): this module says which shapes a guest may have
and how much memory goes with one, without the database. webapp/comparisons/targets.py
makes the Target rows.

Syntax (`parse_topology`): "SxCxT", e.g. "1x2x2" (1 socket, 2 cores, 2 threads per core),
or a plain vCPU count "8", which keeps the base's sockets and threads per core and sets
cores = 8 / (sockets * threads); a count that does not divide is refused, never rounded.

Limits (`check`), each refusal a sentence naming the rule:
- every count at least 1;
- vCPUs at most the host's allowance (RCUBENCH_MAX_VCPUS), and at most GUEST_NR_CPUS,
  the CONFIG_NR_CPUS of the guest kernels rcubench builds (engine/build/configs): a guest
  kernel ignores CPUs past NR_CPUS, so it would measure a smaller machine than its target
  names;
- x86_64: at most 2 threads per core. QEMU accepts more, but no x86 server CPU ships more
  than 2 (Intel Hyper-Threading, AMD SMT); a guest with SMT4 is a machine nobody runs, and
  results on it describe no real host;
- ppc64le pseries: threads per core in {1, 2, 4, 8}, the POWER SMT modes. QEMU's pseries
  refuses a count that is not a power of 2 ("must be a power of 2", hw/ppc/spapr.c), and
  under TCG it allows up to 8 on POWER8 and newer CPUs since QEMU 8.1 (7.2 allowed 1:
  shared/KERNEL-NOTES.md; ppc64le runs on QEMU 10.0, engine/vm/domain.py); Linux on
  powerpc assumes a power of 2 too (asm/cputhreads.h);
- ppc64le powernv*: threads per core in {1, 2, 4}: QEMU's powernv9 reports "max 4
  threads/core" and powernv8 crashed with 8 (measured, shared/KERNEL-NOTES.md);
- any other arch: refused, as there are no rules for it.

Memory (`memory_for`): the base's memory plus MEMORY_PER_EXTRA_CPU_MB (32 MiB) per vCPU
above the base's count, never below the base's. What a guest needs grows with its CPUs:
per-CPU areas (the percpu chunk with rcu_data, runqueues, the page allocator's per-CPU
lists, slab per-CPU caches) and per-CPU kthreads (cpuhp, ksoftirqd, migration, rcuc/rcuop,
kworkers; rcuscale's readers and writers default to one per CPU), each with a 16 KiB stack
on both arches. That is a few MiB per CPU at most; 32 MiB is a margin of several times it,
cheap because QEMU allocates guest memory as the guest touches it. Fewer vCPUs than the
base keep the base's memory: the base is known to boot with its benchmarks, and memory
going down would be a second variable in a sweep over CPUs.
"""

import re
from dataclasses import dataclass

GUEST_NR_CPUS = 64  # CONFIG_NR_CPUS in engine/build/configs/*.config (a test keeps them equal)
MEMORY_PER_EXTRA_CPU_MB = 32
X86_MAX_THREADS = 2
PSERIES_THREADS = (1, 2, 4, 8)
POWERNV_THREADS = (1, 2, 4)

_SXCXT = re.compile(r"(\d+)x(\d+)x(\d+)")
_COUNT = re.compile(r"\d+")


class TopologyError(ValueError):
    """A topology that cannot be read: bad syntax, or a vCPU count the base's shape does
    not divide."""


@dataclass(frozen=True)
class Topology:
    sockets: int
    cores: int  # per socket
    threads: int  # per core (SMT)

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    def __str__(self) -> str:
        """The syntax parse_topology reads: "SxCxT"."""
        return f"{self.sockets}x{self.cores}x{self.threads}"


def parse_topology(text: str, base: Topology) -> Topology:
    """`text` as a topology: "SxCxT", or a vCPU count N that keeps `base`'s sockets and
    threads per core (cores = N / (sockets * threads)). Raises TopologyError. Counts are
    read, not checked: zero passes here and `check` refuses it with its reason."""
    text = text.strip().lower()
    if match := _SXCXT.fullmatch(text):
        sockets, cores, threads = (int(group) for group in match.groups())
        return Topology(sockets, cores, threads)
    if _COUNT.fullmatch(text):
        cpus = int(text)
        per_core = base.sockets * base.threads
        if cpus == 0 or cpus % per_core:
            raise TopologyError(
                f"{cpus} vCPUs do not divide into {base.sockets} socket(s) of cores with "
                f"{base.threads} thread(s) each (the base's {base}): give SxCxT instead"
            )
        return Topology(base.sockets, cpus // per_core, base.threads)
    raise TopologyError(
        f"bad topology {text!r}: give sockets x cores x threads as SxCxT (e.g. 1x2x2) or a "
        "vCPU count (e.g. 8)"
    )


def check(arch: str, machine: str, topology: Topology, max_vcpus: int) -> str | None:
    """Why a guest of `arch` on QEMU machine `machine` cannot have `topology` on a host that
    allows `max_vcpus` vCPUs per guest, or None. The rules are in the module docstring."""
    counts = (("sockets", topology.sockets), ("cores", topology.cores),
              ("threads", topology.threads))  # fmt: skip
    for label, count in counts:
        if count < 1:
            return f"{label} must be at least 1, got {count}"
    cpus = topology.cpus
    if cpus > max_vcpus:
        return (
            f"{topology} is {cpus} vCPUs, more than this host allows ({max_vcpus}, "
            "RCUBENCH_MAX_VCPUS)"
        )
    if cpus > GUEST_NR_CPUS:
        return (
            f"{topology} is {cpus} vCPUs, more than the guest kernel's CONFIG_NR_CPUS "
            f"({GUEST_NR_CPUS})"
        )
    threads = topology.threads
    if arch == "x86_64":
        if threads > X86_MAX_THREADS:
            return f"x86_64 has at most {X86_MAX_THREADS} threads per core (SMT2), got {threads}"
        return None
    if arch == "ppc64le":
        if machine.startswith("powernv"):
            if threads not in POWERNV_THREADS:
                return (
                    f"ppc64le {machine} takes 1, 2 or 4 threads per core (QEMU's powernv: "
                    f"at most SMT4), got {threads}"
                )
            return None
        if machine in ("", "pseries") or machine.startswith("pseries-"):
            if threads not in PSERIES_THREADS:
                return (
                    "ppc64le pseries takes 1, 2, 4 or 8 threads per core (the POWER SMT "
                    f"modes), got {threads}"
                )
            return None
        return f"no topology rules for ppc64le machine {machine!r}"
    return f"no topology rules for arch {arch!r}"


def memory_for(base_memory_mb: int, base_cpus: int, cpus: int) -> int:
    """The memory (MiB) of a guest of `cpus` vCPUs derived from a base of `base_cpus` with
    `base_memory_mb`: MEMORY_PER_EXTRA_CPU_MB more per vCPU above the base's count, never
    less than the base's (the rule and its reasons: the module docstring)."""
    return base_memory_mb + MEMORY_PER_EXTRA_CPU_MB * max(0, cpus - base_cpus)
