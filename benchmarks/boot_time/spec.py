"""boot-time: kernel start to init, init to ready, and host wall clock to ready.

RCU shapes boot: grace periods are expedited until the kernel declares boot over
(rcu_end_inkernel_boot), and rcupdate.rcu_expedited / rcupdate.rcu_normal /
rcupdate.rcu_boot_end_delay move that line; the guest records the first two as in effect.
"""

from benchmarks.spec import RCUSCALE_IDLE, BenchmarkSpec, Better, Kind, Metric

SPEC = BenchmarkSpec(
    name="boot-time",
    description="Boot time: kernel to init (kernel clock), init to ready, host wall clock",
    kconfig=(),
    cmdline=f"rcubench.bench=boot-time {RCUSCALE_IDLE}",
    guest_command="boot-time",
    metrics=(
        Metric("kernel_to_init_ms", "ms", Better.LOWER, Kind.VALUE, primary=True, threshold=2.0),
        Metric("init_to_ready_ms", "ms", Better.LOWER, Kind.VALUE),
        Metric("host_to_ready_ms", "ms", Better.LOWER, Kind.VALUE, threshold=2.0),
        Metric("rcu_expedited", "flag", Better.LOWER, Kind.VALUE),
        Metric("rcu_normal", "flag", Better.LOWER, Kind.VALUE),
    ),
)
