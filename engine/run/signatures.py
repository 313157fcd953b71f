"""The kernel's complaints in a console, as signatures that compare across runs and kernels.

A report says what else moved besides the metrics: a message one kernel prints and the
other never does (a new WARN_ON_ONCE, lockdep splat, stall or hung task). Each complaint line
becomes a signature with what varies from boot to boot stripped, so the same complaint has
the same signature in every run of either kernel:

- the printk timestamp ("[    1.234567] ") and the "rcu: " style prefixes are dropped;
- "WARNING: CPU: 0 PID: 46 at kernel/rcu/tree.c:4117 synchronize_rcu+0x16/0x9a" becomes
  "WARNING at kernel/rcu/tree.c synchronize_rcu": the line number goes too, since a patch
  that adds lines above an old WARN would otherwise make it look new;
- function offsets ("+0x1c/0x80"), hex words and addresses become "ADDR", other numbers
  (CPUs, pids, seconds, jiffies, counts) "N";
- "INFO: task kworker/0:1:23 blocked for more than 122 seconds." keeps the task's name
  (digits as N), not its pid.

What counts as a complaint: the kernel's own words for warnings (WARNING:, including
lockdep's "WARNING: suspicious RCU usage" and "possible circular locking dependency"),
bugs (BUG:, kernel BUG at), Oops, RCU's "rcu: INFO:" reports and stalls, hung tasks and
"Kernel panic - not syncing". Benign boot lines (ACPI, nvram) that say "WARNING:" are kept:
they are printed alike by both kernels, and only differences are reported.

The console is hostile input: lines are scanned at most _LINE_MAX characters each, a run
keeps at most MAX_SIGNATURES distinct signatures (the first ones) and reads at most
MAX_LINES complaint lines (`truncated` says when either cut something), and a signature and
its example line are capped and stripped of control characters.
"""

import re
from dataclasses import dataclass

MAX_SIGNATURES = 32
MAX_LINES = 20_000  # complaint lines read per console; a flood past it is cut (truncated)
SIGNATURE_MAX = 160  # characters
EXAMPLE_MAX = 240
_LINE_MAX = 8192

_STAMP = re.compile(r"^\s*(?:<\d+>)?\s*\[\s*\d+\.\d+\]\s?")
# The words that make a line a complaint; the first match (leftmost) decides its kind.
_COMPLAINT = re.compile(
    r"WARNING: |kernel BUG at |BUG: |Oops\b|rcu: INFO: |INFO: rcu_|INFO: task "
    r"|Kernel panic - not syncing"
)
_WARN_AT = re.compile(r"WARNING: CPU: \d+ PID: \d+ at (?P<where>\S+?)(?::\d+)? (?P<fn>[\w.$]+)")
_BUG_AT = re.compile(r"kernel BUG at (?P<where>[^:\s]+)")
_HUNG = re.compile(r"INFO: task (?P<comm>.+?):\d+ blocked for more than \d+ seconds")
_STALL = re.compile(r"(?P<head>(?:rcu: )?INFO: [\w-]+ (?:self-)?detected (?:expedited )?stalls?\b"
                    r"(?: on CPUs?(?:/tasks)?)?)")  # fmt: skip
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+/0x[0-9a-fA-F]+")
_HEX = re.compile(r"\b(?:0x[0-9a-fA-F]+|[0-9a-fA-F]{8,16})\b")
_FILE_LINE = re.compile(r"(\.[chS]):\d+")
_NUMBER = re.compile(r"\d+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]|[\ud800-\udfff]")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Found:
    """One signature in one console: how often it appeared, and its first line as printed
    (timestamp stripped)."""

    signature: str
    count: int
    example: str


@dataclass(frozen=True)
class Scan:
    found: tuple[Found, ...]  # in order of first appearance
    truncated: bool  # past MAX_SIGNATURES or MAX_LINES: the rest not kept or not counted

    def as_json(self) -> dict[str, object]:
        """What a run stores (Run.console_signatures)."""
        return {
            "found": [[f.signature, f.count, f.example] for f in self.found],
            "truncated": self.truncated,
        }


def signature(line: str) -> str | None:
    """The signature of one console line, or None when it is not a complaint."""
    text = _CONTROL.sub("", _STAMP.sub("", line[: 2 * _LINE_MAX]))
    m = _COMPLAINT.search(text)
    if m is None:
        return None
    text = text[m.start() :]
    if w := _WARN_AT.match(text):
        sig = f"WARNING at {w['where']} {w['fn']}"
    elif b := _BUG_AT.match(text):
        sig = f"kernel BUG at {b['where']}"
    elif h := _HUNG.match(text):
        sig = f"INFO: task {h['comm']} blocked for more than N seconds"
    elif s := _STALL.match(text):
        sig = s["head"]
    else:
        sig = _FILE_LINE.sub(r"\1", _OFFSET.sub("", text))
    sig = _NUMBER.sub("N", _HEX.sub("ADDR", sig))
    return _SPACES.sub(" ", sig).strip()[:SIGNATURE_MAX]


def scan(console: str) -> Scan:
    """Every complaint in a console, counted by signature. Linear in the console's length
    (a run's console may be 16 MiB of one line): the complaint words are searched over the
    whole text, and only the line around each first match is read, at most _LINE_MAX
    characters each side of it."""
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    truncated = False
    pos = lines = 0
    while (m := _COMPLAINT.search(console, pos)) is not None:
        start = max(console.rfind("\n", max(0, m.start() - _LINE_MAX), m.start()) + 1,
                    m.start() - _LINE_MAX)  # fmt: skip
        end = console.find("\n", m.end())
        end = len(console) if end < 0 else end
        pos = end + 1
        line = console[start : min(end, m.start() + _LINE_MAX)]
        sig = signature(line)
        if sig is None:
            continue
        lines += 1
        if lines > MAX_LINES:
            truncated = True  # a flood: what it floods with is counted already
            break
        if sig in counts:
            counts[sig] += 1
        elif len(counts) < MAX_SIGNATURES:
            counts[sig] = 1
            # The line as printed, from a little before the complaint (its "watchdog: ").
            shown = console[max(start, m.start() - 48) : min(end, m.start() + EXAMPLE_MAX)]
            shown = _SPACES.sub(" ", _CONTROL.sub("", _STAMP.sub("", shown)))
            examples[sig] = shown.strip()[:EXAMPLE_MAX]
        else:
            truncated = True
    return Scan(tuple(Found(s, n, examples[s]) for s, n in counts.items()), truncated)


def from_json(stored: object) -> Scan | None:
    """A run's stored scan (as_json), or None when it holds none or is not one."""
    if not isinstance(stored, dict) or not isinstance(stored.get("found"), list):
        return None
    found = []
    for item in stored["found"]:
        if (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and isinstance(item[1], int) and isinstance(item[2], str)):  # fmt: skip
            found.append(Found(item[0], item[1], item[2]))
    return Scan(tuple(found), bool(stored.get("truncated")))
