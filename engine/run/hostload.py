"""What else the host did while a VM ran: other processes' CPU time, steal, load.

Under TCG the guest's timing is the host's timing, so a host busy with something else
widens the run-to-run spread (two CPU-bound processes took the per-run CV of the mean
synchronize_rcu() latency from 2-3 % to 11-16 % on a 2-core host). Each run records it.

"Other processes' CPU time" is the host's busy time from /proc/stat (every process, the
kernel's own work, and processes that exited during the run) minus the CPU time of the
run's own QEMU from /proc/<pid>/stat: summing /proc/<pid>/stat over every pid would miss
what short-lived processes used. Both count USER_HZ ticks. The worker's own polling is
"other" too; it is the same for every run (see the idle measurement in the settings).

Reading /proc never fails a run: a sample that cannot be read is skipped, and a run
without two samples has no record (None).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

PROC = Path("/proc")
LIBVIRT_QEMU_RUN = Path("/run/libvirt/qemu")  # <domain name>.pid, written by libvirtd
# Shorter windows are all tick rounding (USER_HZ is 100: 10 ms per tick per CPU).
_MIN_WINDOW_SECONDS = 0.5


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate "cpu" line of /proc/stat, in ticks, and how many CPUs it sums."""

    total: int  # user..steal: guest time is already inside user and nice
    idle: int  # idle + iowait
    steal: int
    cpus: int

    @property
    def busy(self) -> int:
        return self.total - self.idle - self.steal


def parse_stat(text: str) -> CpuTimes:
    """/proc/stat: the "cpu" line (user nice system idle iowait irq softirq steal ...) and
    the number of "cpuN" lines (online CPUs)."""
    agg: list[int] | None = None
    cpus = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name == "cpu":
            agg = [int(x) for x in rest.split()]
        elif name.startswith("cpu") and name[3:].isdigit():
            cpus += 1
    if agg is None or len(agg) < 8 or cpus == 0:
        raise ValueError("no cpu line with steal time in /proc/stat")
    user, nice, system, idle, iowait, irq, softirq, steal = agg[:8]
    total = user + nice + system + idle + iowait + irq + softirq + steal
    return CpuTimes(total=total, idle=idle + iowait, steal=steal, cpus=cpus)


def parse_pid_ticks(text: str) -> int:
    """utime + stime of every thread of a process, from /proc/<pid>/stat. The command name
    (field 2) may hold spaces and parentheses, so fields are counted after its last ")"."""
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def parse_loadavg(text: str) -> float:
    """The 1-minute load average, the first field of /proc/loadavg."""
    return float(text.split()[0])


@dataclass(frozen=True)
class Sample:
    at: float  # seconds, monotonic
    cpu: CpuTimes
    guest_ticks: int | None  # the run's QEMU; None if it could not be found or read


@dataclass(frozen=True)
class HostLoad:
    """The host during one run, between the first and the last sample taken while the
    run's QEMU was alive."""

    busy_share: float | None  # others' CPU seconds / (seconds x host CPUs); None: no QEMU pid
    steal_share: float  # stolen CPU seconds / (seconds x host CPUs)
    load_avg: float | None  # 1 minute, at the end
    host_cpus: int
    seconds: float
    pinned: bool  # the guest's vCPUs and emulator were pinned to host CPUs of their own


def host_load(
    first: Sample, last: Sample, load_avg: float | None, *, pinned: bool = False
) -> HostLoad | None:
    """The host's load between two samples, or None if they are too close to say."""
    ticks = last.cpu.total - first.cpu.total
    if last.at - first.at < _MIN_WINDOW_SECONDS or ticks <= 0:
        return None
    busy: float | None = None
    if first.guest_ticks is not None and last.guest_ticks is not None:
        others = (last.cpu.busy - first.cpu.busy) - (last.guest_ticks - first.guest_ticks)
        # The two counters are kept apart in the kernel and round differently: clamp.
        busy = min(max(others / ticks, 0.0), 1.0)
    steal = min(max((last.cpu.steal - first.cpu.steal) / ticks, 0.0), 1.0)
    return HostLoad(
        busy_share=busy, steal_share=steal, load_avg=load_avg, host_cpus=last.cpu.cpus,
        seconds=last.at - first.at, pinned=pinned,
    )  # fmt: skip


def find_qemu_pid(name: str, *, proc: Path = PROC, run_dir: Path = LIBVIRT_QEMU_RUN) -> int | None:
    """The pid of domain `name`'s QEMU: libvirtd's pidfile, else the process whose command
    line has `-name guest=<name>,...` (libvirt's form; the pidfile is root's only)."""
    try:
        pid = int((run_dir / f"{name}.pid").read_text().strip())
        if (proc / str(pid)).exists():
            return pid
    except (OSError, ValueError):
        pass
    wanted = f"guest={name},".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # exited meanwhile, or not ours to read
            continue
        if any(a == b"-name" and b.startswith(wanted) for a, b in pairwise(args)):
            return int(entry.name)
    return None


class HostMonitor:
    """Samples the host while one VM runs: `start` once QEMU exists, `poll` as often as
    convenient (it samples at most every `every` seconds), `result` at the end. The last
    sample kept is the last one taken while QEMU was alive, so a VM that powered off
    before the final poll still gets its window."""

    def __init__(
        self, domain: str, *, every: float = 0.5, proc: Path = PROC,
        run_dir: Path = LIBVIRT_QEMU_RUN, clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.domain, self.every, self.proc, self.run_dir = domain, every, proc, run_dir
        self.clock = clock
        self.pid: int | None = None
        self.first: Sample | None = None
        self.last: Sample | None = None

    def start(self) -> None:
        self.pid = find_qemu_pid(self.domain, proc=self.proc, run_dir=self.run_dir)
        self.first = self._sample()
        self.last = self.first

    def poll(self) -> None:
        if self.first is None or self.last is None:
            return
        if self.clock() - self.last.at < self.every:
            return
        sample = self._sample()
        # Keep the window's ends comparable: once QEMU is gone, later samples would count
        # its exit as others' time; a sample without the guest ends nothing.
        if sample is not None and (self.pid is None or sample.guest_ticks is not None):
            self.last = sample

    def result(self, *, pinned: bool = False) -> HostLoad | None:
        if self.first is None or self.last is None:
            return None
        try:
            load: float | None = parse_loadavg((self.proc / "loadavg").read_text())
        except (OSError, ValueError, IndexError):
            load = None
        return host_load(self.first, self.last, load, pinned=pinned)

    def _sample(self) -> Sample | None:
        at = self.clock()
        try:
            cpu = parse_stat((self.proc / "stat").read_text())
        except (OSError, ValueError):
            return None
        guest = None
        if self.pid is not None:
            try:
                guest = parse_pid_ticks((self.proc / str(self.pid) / "stat").read_text())
            except (OSError, ValueError, IndexError):
                guest = None
        return Sample(at, cpu, guest)
