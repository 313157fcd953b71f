"""The framed output rcubench's guest init prints (vm-images/init), parsed strictly.

    RCUBENCH-READY v1 uptime=<s>
    RCUBENCH-BEGIN v1 bench=<name>
    RCUBENCH-RECORD <metric> <value> [<value> ...]
    RCUBENCH-END v1 bench=<name> status=ok records=<n>
A frame without its END line, with a record count that does not match, with status other
than ok, or with a value that is not a finite number is a ParseError: never partial data.
"""

import math
import re
from dataclasses import dataclass

from benchmarks.spec import ParseError

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
    for line in lines[begin + 1 :]:
        if m := _END.search(line):
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
