"""sync-rcu-latency: synchronize_rcu() latency from the kernel's built-in rcuscale test.

rcuscale's writer kthread calls synchronize_rcu() (synchronize_rcu_expedited() with
gp_exp=1) in a loop once the system is running, records each call's duration, prints them
all at cleanup ("writer-duration" lines, ns) and powers the machine off (shutdown=1). The
guest's init has nothing to do; the parser reads the kernel's own lines.

A normal grace period ends on a tick: the grace-period kthread waits in jiffies between
force-quiescent-state scans, and idle CPUs are only seen quiescent at a scan. So
writer_duration comes in whole jiffies plus ~0.02 ms (fixtures: 77-93% of a boot's GPs
within 0.1 ms of a whole jiffy on x86_64 and ppc64le, on two hosts, most at 6), and a patch
that ends some of them a jiffy sooner moves the share above the modal count: its tail share
is a co-primary (../shared/STATS.md v3). Expedited grace periods are driven by IPIs, not ticks,
and last well under a jiffy: no jiffy statistics for them.
"""

from benchmarks import rcutrace
from benchmarks.guest import RCUSCALE_WINDOW
from benchmarks.presets import Preset
from benchmarks.spec import BenchmarkSpec, Better, Kind, Metric

# The tracing Kconfig in every build: a diagnosis traces the very kernels the verdict
# measured (benchmarks/rcutrace; docs/tracing.md has the A/A of the two configs).
# SCHEDSTATS (it selects SCHED_INFO) gives /proc/<pid>/schedstat: a task's run time in ns,
# the grace-period kthread's CPU time guard (vm-images/init's rcuscale window). Without it
# the only per-task CPU time is /proc/<pid>/stat's, in 10 ms steps (and POSIX_TIMERS, for
# a CPU clock, is off in tinyconfig). The statistics themselves stay off unless
# schedstats=enable: what it costs a run is SCHED_INFO's bookkeeping at each switch.
_KCONFIG = ("CONFIG_RCU_SCALE_TEST=y", "CONFIG_SCHEDSTATS=y", *rcutrace.KCONFIG)
_CMDLINE = "rcuscale.shutdown=1 rcuscale.holdoff=1 rcuscale.nwriters=1 rcuscale.nreaders=0"
# The guards (issue 37's "CPU overhead verification"): how many grace periods and batches
# the writers' calls took, and how many calls a grace period served. A patch that ends
# grace periods sooner by starting more of them shows here, and in what the grace-period
# kthread's CPU time cost: 6.12's rcuscale prints that for the RCU Tasks flavours only
# (rso_gp_kthread), so init reads it (benchmarks/guest.py RCUSCALE_WINDOW).
_COUNTS = (
    Metric("test_duration", "ms", Better.LOWER, Kind.VALUE),
    # rcuscale's names: "gps" counts the writers' calls, "batches" the grace periods.
    Metric("gps", "count", Better.HIGHER, Kind.VALUE, guard="calls"),
    Metric("batches", "count", Better.LOWER, Kind.VALUE, guard="grace periods"),
    Metric("updates_per_gp", "count", Better.HIGHER, Kind.VALUE, guard="calls per GP"),
)
# Normal grace periods: whole jiffies, the tail share a co-primary.
WRITER_DURATION = Metric("writer_duration", "ms", Better.LOWER, Kind.SAMPLES, primary=True,
                         threshold=2.0, jiffies=True, tail_share_primary=True)  # fmt: skip
# Normal grace periods only: the grace-period kthread's CPU time and the guest's, from boot
# to the calls' end (guest.py RCUSCALE_WINDOW). Not for expedited ones, which the requester
# and workqueues drive rather than the kthread, and whose 101 calls (0.24 s on x86_64) start
# with the holdoff, without waiting for init: they were over before init could read.
_METRICS = (WRITER_DURATION, *_COUNTS, *RCUSCALE_WINDOW)
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
    # A sweep's variant axis (benchmarks/presets.py variant): how synchronize_rcu() latency
    # grows with concurrent requesters, or with the gap before each request.
    sweepable=("rcuscale.nwriters", "rcuscale.writer_holdoff", "rcuscale.writer_holdoff_jiffies"),
)

EXPEDITED = BenchmarkSpec(
    name="sync-rcu-latency-exp",
    description="synchronize_rcu_expedited() latency, rcuscale writer-duration (gp_exp=1)",
    kconfig=_KCONFIG,
    cmdline=f"{_CMDLINE} rcuscale.gp_exp=1",
    guest_command="",
    metrics=_EXPEDITED_METRICS,
    traceable=True,
    # The expedited preset of sync-rcu-latency, under the name it had before presets: its
    # history stays one benchmark's (benchmarks/presets.py derives the others).
    base="sync-rcu-latency",
    preset="expedited",
    sweepable=("rcuscale.nwriters",),
)

# Presets (benchmarks/presets.py), each a benchmark "<base>--<name>"; the fixtures of each
# are real boots of it (fixtures/README.md), and docs/benchmarks.md#presets says why each
# value. rcuscale keeps shutdown=1, so every run still ends, and prints the same lines.
MANY_WRITERS = Preset(
    name="many-writers",
    description="16 writer kthreads at once (rcuscale.nwriters=16)",
    params="rcuscale.nwriters=16",
    reviewed=(
        "Grace periods requested by 16 writers at once, as a busy machine's updaters do: "
        "concurrent requests share grace periods (x86_64 fixture: 1,651 synchronize_rcu() "
        "calls in 211 grace periods; expedited, 1,716 in 86). rcuscale pins writer i to CPU "
        "i % CPUs, so 16 spreads evenly over 2, 4 or 8 CPUs. Each writer waits for at least "
        "100 grace periods and measures until all are done; the parser holds each writer's "
        "writer-duration lines to its own 'writer i gps' count and pools them. Not the "
        "upstream nwriters=200, meant for one writer per CPU of a large machine: on a 4-CPU "
        "guest that is 50 writers queued on each CPU, 1.47 MB of console and 21,943 samples "
        "a run, where 16 writers print 125 kB and boot as fast as one. The durations are "
        "less close to whole jiffies (43-50% within 0.1 ms, against 77-92% for one writer), "
        "so their tail share is a secondary, as in sync-rcu-latency-exp-load."
    ),
    tail_share_primary=False,
)
WRITER_HOLDOFF = Preset(
    name="writer-holdoff",
    description="1 ms between the writer's grace periods (rcuscale.writer_holdoff=1000)",
    params="rcuscale.writer_holdoff=1000",
    reviewed=(
        "rcuscale's writer busy-waits 1000 us (udelay) before each synchronize_rcu(), "
        "outside the timed window: a jiffy at both targets' HZ=1000, so each grace period "
        "is asked for a tick after the last one ended, as an occasional updater's is, "
        "where back to back each request follows the last grace period's end at once. It "
        "adds 0.1 s to a run of 100 grace periods (x86_64 fixtures: test_duration 711 ms "
        "against 622 ms, and 928 against 851 ms on a second host). One writer and normal "
        "grace periods as in the base (p50 5.99 ms on the unpatched kernel, as without "
        "holdoff), but a request is no longer aligned to the tick that ended the last grace "
        "period: 75% of durations within 0.1 ms of a whole jiffy against the base's 84-92% "
        "(77% against 77-93% on the second host, whose boots spread more), so their tail "
        "share is a secondary."
    ),
    tail_share_primary=False,
)
PRESETS = (MANY_WRITERS, WRITER_HOLDOFF)  # of SPEC; EXPEDITED is its expedited one
EXPEDITED_PRESETS = (MANY_WRITERS,)  # of EXPEDITED: expedited requests from 16 writers
