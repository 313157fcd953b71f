"""sync-rcu-latency: synchronize_rcu() latency from the kernel's built-in rcuscale test.

rcuscale's writer kthread calls synchronize_rcu() (synchronize_rcu_expedited() with
gp_exp=1) in a loop once the system is running, records each call's duration, prints them
all at cleanup ("writer-duration" lines, ns) and powers the machine off (shutdown=1). The
guest's init has nothing to do; the parser reads the kernel's own lines.

A normal grace period ends on a tick: the grace-period kthread waits in jiffies between
force-quiescent-state scans, and idle CPUs are only seen quiescent at a scan. So
writer_duration comes in whole jiffies plus ~0.02 ms (fixtures: 84-92% of a boot's GPs
within 0.1 ms of a whole jiffy on x86_64 and ppc64le, most at 6), and a patch that ends some
of them a jiffy sooner moves the share above the modal count: its tail share is a
co-primary (../shared/STATS.md v3). Expedited grace periods are driven by IPIs, not ticks,
and last well under a jiffy: no jiffy statistics for them.
"""

from benchmarks import rcutrace
from benchmarks.spec import BenchmarkSpec, Better, Kind, Metric

# The tracing Kconfig in every build: a diagnosis traces the very kernels the verdict
# measured (benchmarks/rcutrace; docs/tracing.md has the A/A of the two configs).
_KCONFIG = ("CONFIG_RCU_SCALE_TEST=y", *rcutrace.KCONFIG)
_CMDLINE = "rcuscale.shutdown=1 rcuscale.holdoff=1 rcuscale.nwriters=1 rcuscale.nreaders=0"
_COUNTS = (
    Metric("test_duration", "ms", Better.LOWER, Kind.VALUE),
    Metric("gps", "count", Better.HIGHER, Kind.VALUE),
    Metric("batches", "count", Better.LOWER, Kind.VALUE),
)
# Normal grace periods: whole jiffies, the tail share a co-primary.
WRITER_DURATION = Metric("writer_duration", "ms", Better.LOWER, Kind.SAMPLES, primary=True,
                         threshold=2.0, jiffies=True, tail_share_primary=True)  # fmt: skip
_METRICS = (WRITER_DURATION, *_COUNTS)
_EXPEDITED_METRICS = (
    Metric("writer_duration", "ms", Better.LOWER, Kind.SAMPLES, primary=True, threshold=2.0),
    *_COUNTS,
)

SPEC = BenchmarkSpec(
    name="sync-rcu-latency",
    description="synchronize_rcu() latency, rcuscale writer-duration (normal grace periods)",
    kconfig=_KCONFIG,
    cmdline=_CMDLINE,
    guest_command="",
    metrics=_METRICS,
    traceable=True,
)

EXPEDITED = BenchmarkSpec(
    name="sync-rcu-latency-exp",
    description="synchronize_rcu_expedited() latency, rcuscale writer-duration (gp_exp=1)",
    kconfig=_KCONFIG,
    cmdline=f"{_CMDLINE} rcuscale.gp_exp=1",
    guest_command="",
    metrics=_EXPEDITED_METRICS,
    traceable=True,
)
