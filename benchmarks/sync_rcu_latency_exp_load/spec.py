"""sync-rcu-latency-exp-load: synchronize_rcu() latency while expedited grace periods run.

rcuscale's writer measures normal grace periods exactly as sync-rcu-latency does (one
writer, writer-duration lines, shutdown=1 powers the guest off), while the guest program
(guest/sync-rcu-latency-exp-load.c) keeps EXP_THREADS threads driving
synchronize_rcu_expedited() back to back: each bind-mounts a directory and unmounts it,
and the umount waits in namespace_unlock() (fs/namespace.c, Linux 6.12) with
synchronize_rcu_expedited(). BPF map-in-map updates, which bpf-slab makes, are no such
load here: maybe_wait_bpf_programs() (kernel/bpf/syscall.c, 6.12) waits with a normal
synchronize_rcu().

Why: the issue this benchmark follows cites a published patch that lets call_rcu()
callbacks use expedited grace periods, which moved this metric from 12.0 ms to 8.1 ms on
average.

Timing: the writer starts rcuscale.holdoff seconds after its kthread (created in the
kernel's initcalls, before init), and the load must already be running then. The guest
announces it on the kernel log with the CLOCK_MONOTONIC time at which every thread had
finished an umount; the parser refuses a console where that is missing or later than
rcuscale's "start:" (the same clock), or where the load stopped or the program ended
before the kernel powered off. HOLDOFF_S is chosen from measured boots, see
fixtures/README.md.
"""

import dataclasses

from benchmarks.spec import BenchmarkSpec, Better, Kind, Metric
from benchmarks.sync_rcu_latency.spec import SPEC as SYNC_RCU

NAME = "sync-rcu-latency-exp-load"
EXP_THREADS = 2
REPORT_MS = 1000  # devkmsg allows a writer 10 lines per 5 s
# The load is up 0.53-1.37 s after the writer's kthread starts (33 boots, x86_64 and
# ppc64le): 3 s leaves 1.6 s or more, so its first rate line precedes the writer too.
HOLDOFF_S = 3
# The writer measures normal grace periods, which end on a tick as in sync-rcu-latency, so
# writer_duration comes in jiffies (fixtures: 35-56% of GPs within 0.1 ms of a whole jiffy,
# against 20% for a quantity with no such structure; the load spreads them over more
# counts). Its tail share stays a secondary: the co-primary is sync-rcu-latency's.
WRITER_DURATION = dataclasses.replace(SYNC_RCU.primary, tail_share_primary=False)

SPEC = BenchmarkSpec(
    name=NAME,
    description=(
        f"synchronize_rcu() latency, rcuscale writer-duration (normal grace periods), while "
        f"{EXP_THREADS} guest threads drive synchronize_rcu_expedited() (umount) continuously"
    ),
    kconfig=SYNC_RCU.kconfig,
    cmdline=(
        f"rcubench.bench={NAME} rcubench.exp_threads={EXP_THREADS} "
        f"rcubench.report_ms={REPORT_MS} rcuscale.shutdown=1 rcuscale.holdoff={HOLDOFF_S} "
        "rcuscale.nwriters=1 rcuscale.nreaders=0"
    ),
    guest_command=NAME,
    metrics=(
        WRITER_DURATION,
        *(m for m in SYNC_RCU.metrics if not m.primary),
        # The load itself, so a report shows it was real: umounts (expedited GPs waited
        # for) per second in the guest's last report period.
        Metric("exp_load_rate", "1/s", Better.HIGHER, Kind.VALUE),
    ),
    traceable=True,
)
