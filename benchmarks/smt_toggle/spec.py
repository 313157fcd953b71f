"""smt-toggle: wall time of turning SMT off and on via /sys/devices/system/cpu/smt/control.

Each write is a CPU-hotplug storm (every sibling thread goes offline or comes back), so it
is RCU-heavy: the time tracks grace-period latency on the hotplug path. The guest program
(guest/smt-toggle.c) does K cycles and times each write inside the guest.
Topology: x86_64 1 socket x 2 cores x 2 threads (off/on); ppc64le pseries 1 x 1 x 8 (SMT
8 -> 1 -> 8), which needs QEMU >= 9 under TCG: 7.2 refuses ("TCG cannot support more than
1 thread/core on a pseries machine"), so ppc64le runs on QEMU 10.0 from bookworm-backports
(scripts/setup.sh). On a target without SMT the guest finds smt/control "notsupported" and
the run fails with that reason.
"""

from benchmarks.guest import WINDOW
from benchmarks.spec import RCUSCALE_IDLE, BenchmarkSpec, Better, Kind, Metric

SPEC = BenchmarkSpec(
    name="smt-toggle",
    description="SMT off/on wall time (ms per write to smt/control), K cycles per boot",
    kconfig=("CONFIG_HOTPLUG_CPU=y", "CONFIG_SCHED_SMT=y"),
    cmdline=f"rcubench.bench=smt-toggle rcubench.cycles=10 {RCUSCALE_IDLE}",
    guest_command="smt-toggle",
    metrics=(
        Metric("off_ms", "ms", Better.LOWER, Kind.SAMPLES, primary=True, threshold=5.0),
        Metric("on_ms", "ms", Better.LOWER, Kind.SAMPLES, threshold=5.0),
        *WINDOW,
    ),
)
