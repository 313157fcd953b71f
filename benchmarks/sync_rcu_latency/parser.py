"""Parse rcuscale's console output (kernel/rcu/rcuscale.c, Linux 6.12) into metrics.

Lines read (timestamps and the "rcu-scale:" prefix as the kernel prints them):
    rcu-scale:--- Start of test: gp_async=0 ... gp_exp=0 ... nwriters=1 ...
    rcu-scale: writer 0 gps: 101
    rcu-scale: start: 1313504603 end: 2045153966 duration: 731649363 gps: 101 batches: 102
    rcu-scale:    0 writer-duration:    62 5993897          (writer, index, ns)
Every writer must have exactly `gps` contiguous writer-duration lines: a console cut off
mid-way is an error, never a shorter sample. rcuscale's own "!!!" complaints (all grace
periods expedited, none normal to measure) are errors too. So is any number out of the range
rcuscale can print, checked before anything is sized by it: the console is the kernel's.
Beside them, for normal grace periods, init's frame of the window from boot to the calls'
end (benchmarks/guest.py rcuscale_window): the grace-period kthread's CPU time and the
guest's, refused if missing.
"""

import re

from benchmarks.guest import rcuscale_window
from benchmarks.spec import Parsed, ParseError, RunContext

_TS = r"^(?:\[\s*\d+\.\d+\]\s*)?"
_START = re.compile(_TS + r"rcu-scale:--- Start of test: (?P<params>.*)$", re.M)
_WRITER_GPS = re.compile(_TS + r"rcu-scale: writer (?P<w>\d+) gps: (?P<gps>\d+)\s*$", re.M)
SUMMARY = re.compile(
    _TS + r"rcu-scale: start: (?P<start>\d+) end: (?P<end>\d+) duration: (?P<dur>\d+) "
    r"gps: (?P<gps>\d+) batches: (?P<batches>\d+)\s*$",
    re.M,
)
DURATION = re.compile(
    _TS + r"rcu-scale:\s+(?P<w>\d+) writer-duration:\s+(?P<i>\d+) (?P<ns>\d+)\s*$", re.M
)
_COMPLAINT = re.compile(_TS + r"rcu-scale:!!! (?P<what>.*)$", re.M)
# rcuscale keeps at most MAX_MEAS durations per writer (kernel/rcu/rcuscale.c), and runs at
# most one writer per CPU (CONFIG_NR_CPUS is at most 8192).
MAX_MEAS = 10000
MAX_WRITERS = 8192
NS_MAX = 2**64 - 1  # times and counts are u64 at most


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
        raise ParseError(f"rcuscale reports: {complaint.group('what').strip()[:200]}")
    summary = SUMMARY.search(console)
    if not summary:
        raise ParseError("no rcuscale summary line ('start: ... batches:'): output truncated")
    expected = count(settings.get("nwriters", "-1"), "nwriters", MAX_WRITERS, signed=True)
    writers: dict[int, int] = {}
    for m in _WRITER_GPS.finditer(console):
        w = count(m.group("w"), "writer", MAX_WRITERS - 1)
        writers[w] = count(m.group("gps"), f"writer {w} gps", MAX_MEAS)
    if not writers or (expected > 0 and sorted(writers) != list(range(expected))):
        raise ParseError(
            f"rcuscale reported writers {sorted(writers)[:10]}, expected {expected} (nwriters)"
        )
    samples: dict[int, dict[int, int]] = {w: {} for w in writers}
    for m in DURATION.finditer(console):
        w = count(m.group("w"), "writer", MAX_WRITERS - 1)
        i = count(m.group("i"), f"writer {w} duration index", MAX_MEAS - 1)
        if w not in samples:
            raise ParseError(f"writer-duration line for unknown writer {w}")
        if i in samples[w]:
            raise ParseError(f"writer {w} duration {i} appears twice: garbled console")
        samples[w][i] = count(m.group("ns"), f"writer {w} duration {i} (ns)", NS_MAX)
    durations: list[float] = []
    for w, gps in sorted(writers.items()):
        got = samples[w]
        if len(got) != gps or sorted(got) != list(range(gps)):
            missing = gps - len(got)
            raise ParseError(
                f"writer {w}: {len(got)} writer-duration lines for gps {gps}"
                f" ({missing} missing: console truncated or garbled)"
            )
        durations += [got[i] / 1e6 for i in range(gps)]
    duration = count(summary.group("dur"), "test duration (ns)", NS_MAX)
    summary_counts = {k: count(summary.group(k), k, NS_MAX) for k in ("gps", "batches")}
    if not summary_counts["batches"]:
        raise ParseError("rcuscale's summary counts 0 grace periods (batches) for "
                         f"{summary_counts['gps']} calls: its sequence did not move")  # fmt: skip
    # init's window, for normal grace periods only (spec.py _METRICS)
    window = rcuscale_window(console) if settings.get("gp_exp") != "1" else {}
    return {
        **window,
        "writer_duration": tuple(durations),
        "test_duration": (duration / 1e6,),
        # rcuscale's names: "gps" is every writer's calls summed, "batches" the grace
        # periods elapsed meanwhile (the sequence's difference, kernel/rcu/rcuscale.c).
        "gps": (float(summary_counts["gps"]),),
        "batches": (float(summary_counts["batches"]),),
        # Calls per grace period: ~1 for one writer back to back, more where concurrent
        # requests share a grace period (16 writers: 1,651 calls in 211).
        "updates_per_gp": (summary_counts["gps"] / summary_counts["batches"],),
    }


def count(text: str, what: str, limit: int, *, signed: bool = False) -> int:
    """`text` as an integer in [0, limit] (or -1 when `signed`: rcuscale's "one per CPU"),
    else ParseError naming `what`. Too many digits are refused before int() reads them."""
    low = -1 if signed else 0
    if not re.fullmatch(r"-?\d+" if signed else r"\d+", text):
        raise ParseError(f"{what}={text[:40]!r}: not a number")
    if len(text.lstrip("-")) > len(str(limit)) or not low <= int(text) <= limit:
        raise ParseError(f"{what}={text[:40]}: out of range ({low}..{limit})")
    return int(text)
