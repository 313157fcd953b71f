"""Parse rcuscale's console output (kernel/rcu/rcuscale.c, Linux 6.12) into metrics.

Lines read (timestamps and the "rcu-scale:" prefix as the kernel prints them):
    rcu-scale:--- Start of test: gp_async=0 ... gp_exp=0 ... nwriters=1 ...
    rcu-scale: writer 0 gps: 101
    rcu-scale: start: 1313504603 end: 2045153966 duration: 731649363 gps: 101 batches: 102
    rcu-scale:    0 writer-duration:    62 5993897          (writer, index, ns)
Every writer must have exactly `gps` contiguous writer-duration lines: a console cut off
mid-way is an error, never a shorter sample. rcuscale's own "!!!" complaints (all grace
periods expedited, none normal to measure) are errors too.
"""

import re

from benchmarks.spec import Parsed, ParseError, RunContext

_TS = r"^(?:\[\s*\d+\.\d+\]\s*)?"
_START = re.compile(_TS + r"rcu-scale:--- Start of test: (?P<params>.*)$", re.M)
_WRITER_GPS = re.compile(_TS + r"rcu-scale: writer (?P<w>\d+) gps: (?P<gps>\d+)\s*$", re.M)
_SUMMARY = re.compile(
    _TS + r"rcu-scale: start: (?P<start>\d+) end: (?P<end>\d+) duration: (?P<dur>\d+) "
    r"gps: (?P<gps>\d+) batches: (?P<batches>\d+)\s*$",
    re.M,
)
_DURATION = re.compile(
    _TS + r"rcu-scale:\s+(?P<w>\d+) writer-duration:\s+(?P<i>\d+) (?P<ns>\d+)\s*$", re.M
)
_COMPLAINT = re.compile(_TS + r"rcu-scale:!!! (?P<what>.*)$", re.M)


def params(console: str) -> dict[str, str]:
    """The test's parameters as rcuscale printed them at start."""
    m = _START.search(console)
    if not m:
        raise ParseError("no 'rcu-scale:--- Start of test' line: rcuscale did not run")
    return dict(kv.split("=", 1) for kv in m.group("params").split() if "=" in kv)


def parse(console: str, ctx: RunContext | None = None) -> Parsed:
    console = console.replace("\r\n", "\n")
    settings = params(console)
    if complaint := _COMPLAINT.search(console):
        raise ParseError(f"rcuscale reports: {complaint.group('what').strip()}")
    summary = _SUMMARY.search(console)
    if not summary:
        raise ParseError("no rcuscale summary line ('start: ... batches:'): output truncated")
    writers = {int(m.group("w")): int(m.group("gps")) for m in _WRITER_GPS.finditer(console)}
    expected = int(settings.get("nwriters", "-1"))
    if not writers or (expected > 0 and sorted(writers) != list(range(expected))):
        raise ParseError(
            f"rcuscale reported writers {sorted(writers)}, expected {expected} (nwriters)"
        )
    samples: dict[int, dict[int, int]] = {w: {} for w in writers}
    for m in _DURATION.finditer(console):
        w, i = int(m.group("w")), int(m.group("i"))
        if w not in samples:
            raise ParseError(f"writer-duration line for unknown writer {w}")
        if i in samples[w]:
            raise ParseError(f"writer {w} duration {i} appears twice: garbled console")
        samples[w][i] = int(m.group("ns"))
    durations: list[float] = []
    for w, gps in sorted(writers.items()):
        got = samples[w]
        if sorted(got) != list(range(gps)):
            missing = gps - len(got)
            raise ParseError(
                f"writer {w}: {len(got)} writer-duration lines for gps {gps}"
                f" ({missing} missing: console truncated or garbled)"
            )
        durations += [got[i] / 1e6 for i in range(gps)]
    return {
        "writer_duration": tuple(durations),
        "test_duration": (int(summary.group("dur")) / 1e6,),
        "gps": (float(summary.group("gps")),),
        "batches": (float(summary.group("batches")),),
    }
