"""The framed output rcubench's guest init prints (vm-images/init), parsed strictly.

    RCUBENCH-READY v1 uptime=<s>
    RCUBENCH-BEGIN v1 bench=<name>
    RCUBENCH-RECORD <metric> <value> [<value> ...]
    RCUBENCH-END v1 bench=<name> status=ok records=<n>
Init adds three records of its own to every guest program's frame (WINDOW): the guest's
system time, context switches and RCU softirqs over the program's run, from /proc/stat.
A frame without its END line, with a record count that does not match, with status other
than ok, or with a value that is not a finite number is a ParseError: never partial data.
"""

import math
import re
from dataclasses import dataclass

from benchmarks.spec import Better, Kind, Metric, Parsed, ParseError

VERSION = "v1"
# Serial consoles may put kernel messages or "\r" on the same line as guest output.
_READY = re.compile(r"RCUBENCH-READY (?P<v>\S+) uptime=(?P<uptime>[0-9.]+)")
_BEGIN = re.compile(r"RCUBENCH-BEGIN (?P<v>\S+) bench=(?P<bench>\S+)")
_RECORD = re.compile(r"RCUBENCH-RECORD (?P<metric>[a-z][a-z0-9_]*)(?P<values>(?: \S+)+)\s*$")
_END = re.compile(
    r"RCUBENCH-END (?P<v>\S+) bench=(?P<bench>\S+) status=(?P<status>\S+) "
    r"records=(?P<records>\d+)(?: reason=(?P<reason>\S+))?"
)
_STDERR = re.compile(r"RCUBENCH-STDERR (?P<line>.*)$")


# What a change cost the whole guest over the program's run (issue 37): init reads
# /proc/stat before and after it (vm-images/init). Guards of every benchmark with a guest
# program that returns, and of the in-kernel rcuscale ones over RCUSCALE_WINDOW's window.
# System time comes in USER_HZ ticks: 10 ms steps.
WINDOW = (
    Metric("window_system_ms", "ms", Better.LOWER, Kind.VALUE, guard="guest system time"),
    Metric("window_ctxt", "switches", Better.LOWER, Kind.VALUE, guard="context switches"),
    Metric("window_rcu_softirqs", "softirqs", Better.LOWER, Kind.VALUE, guard="RCU softirqs"),
)
# The in-kernel rcuscale benchmarks' window: from boot (the calls may begin as init does)
# to the last writer's "has N measurements" line, when init reads it and frames it on the
# kernel log as RCUSCALE_FRAME (vm-images/init). Beside WINDOW, the grace-period kthread's
# run time (rcu_sched, or rcu_preempt), from its /proc/<pid>/schedstat in ns: what
# rcuscale itself prints for the RCU Tasks flavours only (docs/benchmarks.md, "Guards").
RCUSCALE_FRAME = "rcuscale-window"
GP_KTHREAD = Metric("gp_kthread_ms", "ms", Better.LOWER, Kind.VALUE, guard="GP kthread CPU time")
RCUSCALE_WINDOW = (GP_KTHREAD, *WINDOW)


@dataclass(frozen=True)
class Frame:
    bench: str
    records: dict[str, tuple[float, ...]]  # metric -> values, in the order printed
    ready_uptime: float | None  # guest uptime (s) when init printed READY


def ready_uptime(console: str) -> float | None:
    m = _READY.search(console)
    return _number(m.group("uptime"), m.group()) if m else None


def parse_frame(console: str, bench: str) -> Frame:
    lines = console.replace("\r", "\n").split("\n")
    begin = next((i for i, ln in enumerate(lines) if (m := _BEGIN.search(ln))
                  and m.group("bench") == bench), None)  # fmt: skip
    if begin is None:
        raise ParseError(f"no RCUBENCH-BEGIN line for {bench}: the benchmark never started")
    records: dict[str, list[float]] = {}
    count = 0
    stderr: list[str] = []
    other = None  # another frame inside this one (init's rcuscale window), skipped whole
    for line in lines[begin + 1 :]:
        end = _END.search(line)
        if other is not None:
            if end and end.group("bench") == other:
                other = None
            continue
        if (m := _BEGIN.search(line)) and m.group("bench") != bench:
            other = m.group("bench")
            continue
        if end and end.group("bench") != bench:
            continue  # an END without its BEGIN: not this frame's
        if m := end:
            if m.group("v") != VERSION:
                raise ParseError(f"frame version {_shown(m.group('v'))}, expected {VERSION}")
            if m.group("status") != "ok":
                why = _shown(m.group("reason") or "no reason given")
                detail = f": {' | '.join(_shown(e) for e in stderr[-5:])}" if stderr else ""
                raise ParseError(f"{bench} failed in the guest ({why}){detail}")
            if len(m.group("records")) > 9 or int(m.group("records")) != count:
                raise ParseError(
                    f"{bench}: END says {m.group('records')[:20]} records, the console has "
                    f"{count} (lines lost or garbled)"
                )
            return Frame(bench, {k: tuple(v) for k, v in records.items()}, ready_uptime(console))
        if m := _STDERR.search(line):
            stderr.append(m.group("line"))
        elif (at := line.find("RCUBENCH-RECORD")) >= 0:
            # Tried where the marker first occurs, not at every later one: each try reads
            # to the line's end, so searching a line of repeated markers was quadratic.
            rec = _RECORD.match(line, at)
            if rec is None:
                raise ParseError(f"garbled record line: {_shown(line)!r}")
            values = [_number(v, line) for v in rec.group("values").split()]
            records.setdefault(rec.group("metric"), []).extend(values)
            count += 1
    raise ParseError(f"no RCUBENCH-END line for {bench}: output truncated (VM stopped early?)")


def _number(text: str, line: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"not a number {_shown(text)!r} in {_shown(line)!r}") from None
    if not math.isfinite(value):
        raise ParseError(f"non-finite value {_shown(text)!r} in {_shown(line)!r}")
    return value


def _shown(text: str, limit: int = 200) -> str:
    """Console text quoted in a reason: a line can be megabytes long."""
    text = text.strip()
    return text if len(text) <= limit else f"{text[:limit]}..."


def window(frame: Frame, metrics: tuple[Metric, ...] = WINDOW) -> Parsed:
    """The frame's WINDOW metrics (or `metrics`), one value each: an init older than them,
    or a count that went backwards (a garbled line, or two boots on one console), is
    refused."""
    got: Parsed = {}
    for m in metrics:
        values = frame.records.get(m.name)
        if values is None or len(values) != 1:
            raise ParseError(f"{frame.bench}: init printed {0 if values is None else len(values)} "
                             f"{m.name} records, not 1 (an older initramfs?)")  # fmt: skip
        if values[0] < 0:
            raise ParseError(f"{frame.bench}: {m.name} went backwards ({values[0]:g})")
        got[m.name] = values
    return got


def rcuscale_window(console: str) -> Parsed:
    """RCUSCALE_WINDOW's metrics from init's frame on the kernel log: a console without it
    (an older initramfs, or the kernel powered off before init wrote it) is refused, as is
    one that says why init could not read the window."""
    if not re.search(rf"RCUBENCH-BEGIN \S+ bench={RCUSCALE_FRAME}\b", console):
        raise ParseError("rcuscale's window: init printed no frame of it (an initramfs older "
                         "than it, or the kernel powered off first)")  # fmt: skip
    try:
        return window(parse_frame(console, RCUSCALE_FRAME), RCUSCALE_WINDOW)
    except ParseError as e:
        raise ParseError(f"rcuscale's window: {e}") from None
