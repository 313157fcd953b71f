"""sync-rcu-latency: synchronize_rcu() latency from the kernel's built-in rcuscale test.

rcuscale's writer kthread calls synchronize_rcu() (synchronize_rcu_expedited() with
gp_exp=1) in a loop once the system is running, records each call's duration, prints them
all at cleanup ("writer-duration" lines, ns) and powers the machine off (shutdown=1). The
guest's init has nothing to do; the parser reads the kernel's own lines.
"""

from benchmarks.spec import BenchmarkSpec, Better, Kind, Metric

_KCONFIG = ("CONFIG_RCU_SCALE_TEST=y",)
_CMDLINE = "rcuscale.shutdown=1 rcuscale.holdoff=1 rcuscale.nwriters=1 rcuscale.nreaders=0"
_METRICS = (
    Metric("writer_duration", "ms", Better.LOWER, Kind.SAMPLES, primary=True, threshold=2.0),
    Metric("test_duration", "ms", Better.LOWER, Kind.VALUE),
    Metric("gps", "count", Better.HIGHER, Kind.VALUE),
    Metric("batches", "count", Better.LOWER, Kind.VALUE),
)

SPEC = BenchmarkSpec(
    name="sync-rcu-latency",
    description="synchronize_rcu() latency, rcuscale writer-duration (normal grace periods)",
    kconfig=_KCONFIG,
    cmdline=_CMDLINE,
    guest_command="",
    metrics=_METRICS,
)

EXPEDITED = BenchmarkSpec(
    name="sync-rcu-latency-exp",
    description="synchronize_rcu_expedited() latency, rcuscale writer-duration (gp_exp=1)",
    kconfig=_KCONFIG,
    cmdline=f"{_CMDLINE} rcuscale.gp_exp=1",
    guest_command="",
    metrics=_METRICS,
)
