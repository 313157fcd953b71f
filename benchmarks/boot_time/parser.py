"""boot-time from the kernel's "Run /init" timestamp, the guest's READY uptime and the host."""

import re

from benchmarks.guest import parse_frame
from benchmarks.spec import Parsed, ParseError, RunContext

_RUN_INIT = re.compile(r"\[\s*(?P<t>\d+\.\d+)\] Run /init as init process")


def parse(console: str, ctx: RunContext) -> Parsed:
    init = _RUN_INIT.search(console)
    if init is None:
        raise ParseError("no timestamped 'Run /init as init process' line (PRINTK_TIME off?)")
    frame = parse_frame(console, "boot-time")
    if frame.ready_uptime is None or ctx.ready_seconds is None:
        raise ParseError("the guest never printed RCUBENCH-READY")
    kernel_to_init = float(init.group("t")) * 1e3
    init_to_ready = frame.ready_uptime * 1e3 - kernel_to_init
    if init_to_ready < -10.0:  # /proc/uptime has 10 ms resolution
        raise ParseError(f"READY ({frame.ready_uptime} s) before init ({kernel_to_init} ms)")
    missing = {"rcu_expedited", "rcu_normal"} - set(frame.records)
    if missing:
        raise ParseError(f"boot-time: no record for {sorted(missing)}")
    return {
        "kernel_to_init_ms": (kernel_to_init,),
        "init_to_ready_ms": (max(init_to_ready, 0.0),),
        "host_to_ready_ms": (ctx.ready_seconds * 1e3,),
        "rcu_expedited": frame.records["rcu_expedited"][:1],
        "rcu_normal": frame.records["rcu_normal"][:1],
    }
