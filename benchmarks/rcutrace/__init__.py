"""Traced diagnostic runs: the Kconfig and command line that turn the RCU tracepoints on,
and the parser of the trace the kernel dumps (parser.py).

The events are the ones that decompose a grace period (include/trace/events/rcu.h, all
behind CONFIG_RCU_TRACE): rcu_grace_period (start, fqswait, fqsstart, fqsend, end, ...),
rcu_grace_period_init, rcu_fqs, rcu_quiescent_state_report, rcu_exp_grace_period and
rcu_batch_start/end. trace_clock=global: the dump merges the CPUs' buffers by time, and
a grace period starts on one CPU and ends on another.
"""

# CONFIG_RCU_TRACE is `default y if TREE_RCU` under DEBUG_KERNEL (the base fragments set
# both), but its events are no-ops without the tracing core: ENABLE_DEFAULT_TRACERS is the
# one switch that selects TRACING (and with it EVENT_TRACING and tracefs) without a tracer.
KCONFIG = ("CONFIG_FTRACE=y", "CONFIG_ENABLE_DEFAULT_TRACERS=y", "CONFIG_RCU_TRACE=y")

EVENTS = (
    "rcu:rcu_grace_period",
    "rcu:rcu_grace_period_init",
    "rcu:rcu_fqs",
    "rcu:rcu_quiescent_state_report",
    "rcu:rcu_exp_grace_period",
    "rcu:rcu_batch_start",
    "rcu:rcu_batch_end",
)
# trace_buf_size is per CPU. The x86_64 fixture (4 vCPUs, the whole boot and rcuscale's
# 101 grace periods) holds 4,168 events, about 0.2 MB in the ring buffer's binary form for
# all CPUs together: 2 MiB a CPU is tens of times that, so a run never wraps and a longer
# one still fits; a run that does wrap loses its first grace periods, which the window
# check (rcuscale's own count) catches.
BUFFER_BYTES = 2 * 2**20
CMDLINE = f"trace_event={','.join(EVENTS)} trace_buf_size={BUFFER_BYTES} trace_clock=global"
