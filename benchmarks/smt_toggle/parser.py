"""smt-toggle's framed records: off_ms and on_ms, one value per cycle, equally many; and
init's window guards (benchmarks/guest.py WINDOW)."""

from benchmarks.guest import parse_frame, window
from benchmarks.spec import Parsed, ParseError, RunContext


def parse(console: str, ctx: RunContext | None = None) -> Parsed:
    frame = parse_frame(console, "smt-toggle")
    off, on = frame.records.get("off_ms", ()), frame.records.get("on_ms", ())
    if not off or len(off) != len(on):
        raise ParseError(f"smt-toggle: {len(off)} off and {len(on)} on samples")
    if min(off + on) < 0:
        raise ParseError("smt-toggle: a negative duration")
    return {"off_ms": off, "on_ms": on, **window(frame)}
