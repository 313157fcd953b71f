"""Parse sync-rcu-latency-exp-load's console: rcuscale's writer lines, read by
sync-rcu-latency's parser, and the guest load's kernel-log lines (guest/*.c):

    rcubench-exp-load: running threads=2 mono_ns=1520335121 updates=4
    rcubench-exp-load: rate mono_ns=2520512309 updates=1012 per_s=1007.8 slowest=498
    rcubench-exp-load: stopped mono_ns=... reason=umount-0:Invalid argument

The writer's numbers are refused unless the load covered the whole measured window: the
running line must come before rcuscale's "start:" (both CLOCK_MONOTONIC ns), the load must
not have stopped, stalled for a report period, or ended (init's RCUBENCH-END: the guest
program only returns on failure, and init then powers off before rcuscale is done).
"""

import re

from benchmarks.guest import parse_frame
from benchmarks.spec import Parsed, ParseError, RunContext
from benchmarks.sync_rcu_latency import parser as sync_rcu
from benchmarks.sync_rcu_latency.parser import NS_MAX, SUMMARY, count
from benchmarks.sync_rcu_latency_exp_load.spec import EXP_THREADS, NAME

_PREFIX = r"rcubench-exp-load: "
_RUNNING = re.compile(
    _PREFIX + r"running threads=(?P<threads>\d+) mono_ns=(?P<t>\d+) updates=\d+\s*$", re.M
)
_RATE = re.compile(
    _PREFIX + r"rate mono_ns=(?P<t>\d+) updates=(?P<u>\d+) per_s=(?P<rate>\d{1,15}\.\d) "
    r"slowest=(?P<slowest>\d+)\s*$",
    re.M,
)
_STOPPED = re.compile(_PREFIX + r"stopped (?P<why>.*)$", re.M)
_END = re.compile(rf"RCUBENCH-END \S+ bench={re.escape(NAME)} ")


def parse(console: str, ctx: RunContext | None = None) -> Parsed:
    console = console.replace("\r\n", "\n")
    if stopped := _STOPPED.search(console):
        raise ParseError(f"the expedited load stopped: {stopped.group('why').strip()[:200]}")
    if _END.search(console):
        parse_frame(console, NAME)  # a failure, with the guest's reason
        raise ParseError(f"{NAME}'s guest program ended before rcuscale powered the guest off")
    running = list(_RUNNING.finditer(console))
    if not running:
        raise ParseError("no 'rcubench-exp-load: running' line: the expedited load never ran")
    if len(running) > 1:
        raise ParseError(f"{len(running)} 'rcubench-exp-load: running' lines: garbled console")
    threads = count(running[0].group("threads"), "load threads", 1000)
    if threads != EXP_THREADS:
        raise ParseError(f"the load ran {threads} threads, the spec asks for {EXP_THREADS}")
    loaded_at = count(running[0].group("t"), "load start (ns)", NS_MAX)
    summary = SUMMARY.search(console)
    if summary is None:
        sync_rcu.parse(console, ctx)  # refuses it, with sync-rcu-latency's reason
        raise ParseError("no rcuscale summary line")
    start = count(summary.group("start"), "writer start (ns)", NS_MAX)
    if loaded_at >= start:
        raise ParseError(
            f"the expedited load was running only from {loaded_at / 1e9:.3f} s, after "
            f"rcuscale's writer started at {start / 1e9:.3f} s: raise rcuscale.holdoff"
        )
    rates = []
    for m in _RATE.finditer(console):
        at = count(m.group("t"), "rate time (ns)", NS_MAX)
        if at <= loaded_at:
            continue
        if count(m.group("slowest"), "slowest thread's umounts", NS_MAX) == 0:
            raise ParseError(f"a load thread made no progress in the period to {at / 1e9:.3f} s")
        rates.append(float(m.group("rate")))
    if not rates:
        raise ParseError("no 'rcubench-exp-load: rate' line after the load started")
    # The writer's lines as sync-rcu-latency reads them, and init's rcuscale window: after
    # the load's own checks, which say first why a run measured no loaded grace periods.
    measured = sync_rcu.parse(console, ctx)
    return {**measured, "exp_load_rate": (rates[-1],)}
