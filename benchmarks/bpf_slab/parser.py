"""bpf-slab's framed records: one value per delay step, the steps the spec asked for; and
init's window guards (benchmarks/guest.py WINDOW)."""

from benchmarks.bpf_slab.spec import DELAYS_MS
from benchmarks.guest import parse_frame, window
from benchmarks.spec import Parsed, ParseError, RunContext

_SERIES = ("slab_kb_mean", "slab_kb_peak", "update_rate", "socket_rate")


def parse(console: str, ctx: RunContext | None = None) -> Parsed:
    frame = parse_frame(console, "bpf-slab")
    ran = frame.records.get("delay_ms", ())
    if ran != tuple(map(float, DELAYS_MS)):  # as floats: 0.5 is not step 0
        raise ParseError(f"bpf-slab ran delays {ran[:10]}, the spec asks for {DELAYS_MS}")
    delays = DELAYS_MS
    for name in _SERIES:
        got = frame.records.get(name, ())
        if len(got) != len(delays):
            raise ParseError(f"bpf-slab: {len(got)} {name} values for {len(delays)} steps")
    if min(frame.records["update_rate"]) <= 0 or min(frame.records["socket_rate"]) <= 0:
        raise ParseError("bpf-slab: a step made no map updates or no sockets (workers stuck)")
    parsed: Parsed = {}
    for i, d in enumerate(delays):
        parsed[f"slab_kb_peak_d{d}"] = (frame.records["slab_kb_peak"][i],)
        parsed[f"slab_kb_mean_d{d}"] = (frame.records["slab_kb_mean"][i],)
        parsed[f"update_rate_d{d}"] = (frame.records["update_rate"][i],)
    return parsed | window(frame)
