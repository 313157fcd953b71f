"""boot-time from the kernel's "Run /init" timestamp (RCU's boot end: see spec.py), the
guest program's first kernel message, the host, and the grace-period ends the guest read
from the trace."""

import re

from benchmarks.guest import parse_frame, window
from benchmarks.spec import Parsed, ParseError, RunContext

_RUN_INIT = re.compile(r"\[\s*(?P<t>\d+\.\d+)\] Run /init as init process")
# boot-time.sh's first act, through /dev/kmsg: stamped on the same clock as "Run /init".
_STARTS = re.compile(r"\[\s*(?P<t>\d+\.\d+)\] rcubench: boot-time starts")


def parse(console: str, ctx: RunContext) -> Parsed:
    init = _RUN_INIT.search(console)
    if init is None:
        raise ParseError("no timestamped 'Run /init as init process' line (PRINTK_TIME off?)")
    frame = parse_frame(console, "boot-time")
    if frame.ready_uptime is None or ctx.ready_seconds is None:
        raise ParseError("the guest never printed RCUBENCH-READY")
    starts = _STARTS.search(console)
    if starts is None:
        raise ParseError("no timestamped 'rcubench: boot-time starts' line (the guest program "
                         "could not write /dev/kmsg?)")  # fmt: skip
    boot_end = float(init.group("t"))
    kernel_to_init = boot_end * 1e3
    init_to_ready = float(starts.group("t")) * 1e3 - kernel_to_init
    if init_to_ready < 0:
        raise ParseError(f"the guest program started ({starts.group('t')} s) before init "
                         f"({init.group('t')} s): two boots' output on one console?")  # fmt: skip
    missing = {"rcu_expedited", "rcu_normal", "trace_entries"} - set(frame.records)
    if missing:
        raise ParseError(f"boot-time: no record for {sorted(missing)}")
    _check_trace(frame.records["trace_entries"])
    return {
        "kernel_to_init_ms": (kernel_to_init,),
        "init_to_ready_ms": (init_to_ready,),
        "host_to_ready_ms": (ctx.ready_seconds * 1e3,),
        "rcu_expedited": frame.records["rcu_expedited"][:1],
        "rcu_normal": frame.records["rcu_normal"][:1],
        # Both clocks are local_clock() (trace_clock=global): an end stamped at or before
        # "Run /init" came before RCU's boot end.
        "exp_gps_to_boot_end": (_ended_by(frame.records.get("exp_gp_end_s", ()), boot_end),),
        "gps_to_boot_end": (_ended_by(frame.records.get("gp_end_s", ()), boot_end),),
        **window(frame),
    }


def _check_trace(entries: tuple[float, ...]) -> None:
    """The trace the ends were read from is the boot's, whole: something was traced (a
    kernel without trace_event= or the tracepoints counts no grace periods, which is not
    zero of them), and the ring buffer did not wrap (lost events undercount)."""
    if len(entries) != 2:
        raise ParseError(f"boot-time: trace_entries holds {len(entries)} values, not 2")
    in_buffer, written = entries
    if written == 0:
        raise ParseError("boot-time: the trace holds no RCU events (trace_event= off the "
                         "command line, or a kernel without CONFIG_RCU_TRACE?)")  # fmt: skip
    if in_buffer < written:
        lost = written - in_buffer
        raise ParseError(f"boot-time: the trace buffer wrapped: {lost:.0f} of {written:.0f} "
                         "events lost, so grace periods would be undercounted")  # fmt: skip


def _ended_by(ends: tuple[float, ...], moment: float) -> float:
    return float(sum(1 for t in ends if t <= moment))
