"""boot-time: kernel start to RCU's boot end and init, init to ready, host wall clock to
ready, and the grace periods the boot waited for.

RCU shapes boot: synchronize_rcu() is expedited until the kernel declares boot over. That
moment has no message or tracepoint of its own. In Linux 6.12 (init/main.c kernel_init)
rcu_end_inkernel_boot() runs after SYSTEM_RUNNING, and only do_sysctl_args() stands between
it and run_init_process(), which prints "Run /init as init process": that line's timestamp
is RCU's boot end (kernel_to_init_ms), to within the sysctl arguments' time. (The proposed
rcupdate.rcu_boot_end_delay, which would move it later, is not in 6.12.) The grace periods
come from the RCU tracepoints, on from the command line, so a comparison of
rcupdate.rcu_expedited / rcupdate.rcu_normal shows where the boot's time went: how many
expedited and normal grace periods ended before the boot end. The guest records the two
settings as in effect.
"""

from benchmarks import rcutrace
from benchmarks.guest import WINDOW
from benchmarks.spec import RCUSCALE_IDLE, BenchmarkSpec, Better, Kind, Metric

# The tracing core (rcutrace.KCONFIG) is in every kernel that runs an rcuscale benchmark;
# boot-time asks for it too, so a comparison of boot-time alone traces as well.
# Only the two events whose "end" closes a grace period, on the printk clock: trace_clock=
# global reads sched_clock_cpu(), the clock local_clock() and so printk stamp with (kept
# monotonic across CPUs), so the parser may compare the two. A boot writes about 10 events
# a grace period; the default buffer (1.4 MB a CPU) holds tens of thousands, and the
# parser refuses a buffer that wrapped.
TRACE_CMDLINE = "trace_event=rcu:rcu_grace_period,rcu:rcu_exp_grace_period trace_clock=global"

SPEC = BenchmarkSpec(
    name="boot-time",
    description="Boot time: kernel to RCU's boot end and init (kernel clock), init to ready, "
    "host wall clock; grace periods before the boot end",
    kconfig=rcutrace.KCONFIG,
    cmdline=f"rcubench.bench=boot-time {TRACE_CMDLINE} {RCUSCALE_IDLE}",
    guest_command="boot-time",
    metrics=(
        Metric("kernel_to_init_ms", "ms", Better.LOWER, Kind.VALUE, primary=True, threshold=2.0),
        Metric("init_to_ready_ms", "ms", Better.LOWER, Kind.VALUE),
        Metric("host_to_ready_ms", "ms", Better.LOWER, Kind.VALUE, threshold=2.0),
        Metric("rcu_expedited", "flag", Better.LOWER, Kind.VALUE),
        Metric("rcu_normal", "flag", Better.LOWER, Kind.VALUE),
        Metric(
            "exp_gps_to_boot_end",
            "GPs",
            Better.LOWER,
            Kind.VALUE,
            guard="expedited GPs to boot end",
        ),
        Metric("gps_to_boot_end", "GPs", Better.LOWER, Kind.VALUE, guard="normal GPs to boot end"),
        *WINDOW,
    ),
)
