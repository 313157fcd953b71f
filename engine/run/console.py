"""A kernel's console as both runners (engine/vm, engine/lab) read it, and the outcome of
one run, which they both return, so the orchestrator and the statistics cannot tell them
apart.

The console is written by the kernel under test, so it is hostile input: any byte, any
length. It is read incrementally (each poll reads only what was added, and scans only the
lines that completed, at most _LINE_MAX bytes at a time), kept up to a cap, and decoded
without losing a byte (invalid UTF-8 as surrogate escapes, see `console_bytes`).
"""

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from engine.run.hostload import HostLoad
from engine.run.outcomes import BOOT_FAILED, CONSOLE_OVERFLOW, PANIC, TIMEOUT

# A console past this many bytes ends the run (console-overflow): the callers pass their
# setting (RCUBENCH_CONSOLE_MAX_BYTES); real consoles are 10-30 kB.
CONSOLE_MAX_BYTES = 16 * 2**20


@dataclass(frozen=True)
class _Fatal:
    pattern: re.Pattern[str]
    # For a pattern with ".*" in the middle: its first words. Searching such a pattern tries
    # the rest of the line at every place its first words occur, quadratic on a long line
    # (a 352 kB line took 6.9 s); only the first place is tried, which finds the same match
    # (if a later place matches, the first one does too, and is leftmost) in linear time.
    lead: re.Pattern[str] | None = None

    def search(self, line: str) -> re.Match[str] | None:
        if self.lead is None:  # a literal start and ".*" to the end: linear as it is
            return self.pattern.search(line)
        first = self.lead.search(line)
        return None if first is None else self.pattern.match(line, first.start())


# What ends a run as "panic": the kernel's own words for fatal or wedged states, in the
# order an alternation of them would prefer at the same position.
_FATAL = (
    _Fatal(re.compile(r"Kernel panic - not syncing.*")),
    _Fatal(re.compile(r"Oops: .*")),
    _Fatal(re.compile(r"Oops\b.*\[#\d+\].*"), lead=re.compile(r"Oops\b")),
    _Fatal(re.compile(r"kernel BUG at .*")),
    _Fatal(re.compile(r"BUG: .*")),
    _Fatal(
        re.compile(r"INFO: task .* blocked for more than \d+ seconds\."),
        lead=re.compile(r"INFO: task "),
    ),
    _Fatal(re.compile(r"rcu: INFO: .* detected stalls.*"), lead=re.compile(r"rcu: INFO: ")),
    _Fatal(re.compile(r"INFO: rcu_\w+ (?:self-)?detected stall.*")),
)
INIT_REACHED = re.compile(r"Run /init as init process|RCUBENCH-READY v1")
READY = re.compile(r"RCUBENCH-READY v1")
# The kernel's last words on power-off (kernel_power_off): nothing useful follows, so the
# run ends here and the domain is destroyed without waiting for libvirt to see QEMU stop.
POWERED_OFF = re.compile(r"reboot: Power down")
# Its last words on a restart (kernel_restart, as `reboot -f` or a lab host's end of run):
# the machine resets, and a lab host boots its known-good kernel again.
RESTARTING = re.compile(r"reboot: Restarting system")
# Words every pattern above contains: a line without any is not decoded or searched, so a
# flood of short lines costs one search of each.
_MARKERS = re.compile(
    rb"Run /init|RCUBENCH-READY|reboot: (?:Power down|Restarting)|Kernel panic|Oops|BUG|INFO: "
)
# A longer line is scanned in windows of this many bytes overlapping by _OVERLAP, more than
# a printk record (1024 bytes with its timestamp), so a message cut by a window's end is
# whole in the next one and no pattern ever sees more than _LINE_MAX bytes.
_LINE_MAX = 8192
_OVERLAP = 2048
_REASON_MAX = 500  # characters of the fatal line kept as the run's reason
POLL = 0.05  # seconds between looks at the console
PANIC_GRACE = 2.0  # seconds of console kept after a fatal line (the backtrace)


def fatal_message(line: str) -> str | None:
    """The kernel's fatal message in one console line (the leftmost), or None."""
    found = [m for fatal in _FATAL if (m := fatal.search(line))]
    if not found:
        return None
    first = min(found, key=lambda m: m.start())  # min keeps the earlier pattern on a tie
    return first.group().strip()[:_REASON_MAX]


class ConsoleScan:
    """What the watcher needs to know of a console, fed its bytes as they come: each line
    is scanned once, when its newline arrives (or at `flush`, the console's end)."""

    def __init__(self) -> None:
        self.init_reached = self.ready = self.powered_off = self.restarting = False
        self.fatal = ""  # the first fatal message
        self._partial = b""  # the last line so far, without its newline

    def feed(self, data: bytes) -> None:
        buf, start = self._partial + data, 0
        while True:
            newline = buf.find(b"\n", start)
            end = len(buf) if newline < 0 else newline
            while end - start > _LINE_MAX:
                self._scan(buf[start : start + _LINE_MAX])
                start += _LINE_MAX - _OVERLAP
            if newline < 0:
                break
            self._scan(buf[start:newline])
            start = newline + 1
        self._partial = buf[start:]

    def flush(self) -> None:
        """Scan the last line, which has no newline (the console ended)."""
        self._scan(self._partial)
        self._partial = b""

    def _scan(self, raw: bytes) -> None:
        if not _MARKERS.search(raw):
            return
        line = raw.decode("utf-8", "replace")
        self.init_reached = self.init_reached or bool(INIT_REACHED.search(line))
        self.ready = self.ready or bool(READY.search(line))
        self.powered_off = self.powered_off or bool(POWERED_OFF.search(line))
        self.restarting = self.restarting or bool(RESTARTING.search(line))
        if not self.fatal:
            self.fatal = fatal_message(line) or ""


class ConsoleFile:
    """The console file as QEMU (through virtlogd) writes it, read incrementally up to
    `max_bytes` + 1 bytes and scanned as it grows. virtlogd rotates a file past its
    max_size (2 MiB by default: console.log -> console.log.0, then a new console.log), so
    the open file is read to its end before the new one is followed."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path, self.max_bytes = path, max_bytes
        self.data = bytearray()
        self.scan = ConsoleScan()
        self._file: BinaryIO | None = None

    @property
    def overflowed(self) -> bool:
        return len(self.data) > self.max_bytes

    def poll(self) -> None:
        new = self._read(self.max_bytes + 1 - len(self.data))
        self.data += new
        self.scan.feed(new)

    def finish(self) -> str:
        """Read and scan what is left, the last line too; the whole console."""
        self.poll()
        self.scan.flush()
        self.close()
        return bytes(self.data).decode("utf-8", "surrogateescape")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read(self, want: int) -> bytes:
        if want <= 0:
            return b""
        if self._file is None:
            try:
                self._file = self.path.open("rb")
            except FileNotFoundError:
                return b""
        data = self._file.read(want)
        if not data and self._rotated():
            data = self._file.read(want)  # written before the rename
            self._file.close()
            self._file = None
            with contextlib.suppress(FileNotFoundError):  # rotated again: the next poll
                self._file = self.path.open("rb")
                data += self._file.read(want - len(data))
        return data

    def _rotated(self) -> bool:
        if self._file is None:
            return False
        try:
            return self.path.stat().st_ino != os.fstat(self._file.fileno()).st_ino
        except FileNotFoundError:  # between virtlogd's rename and its new file
            return False


def clip(console: str, limit: int) -> str:
    """`console` if it has at most `limit` bytes, else its first and last `limit` / 2 bytes
    with a line between them saying how many were cut (for storage: a console that long is
    a flood, whose start and end say what happened)."""
    data = console_bytes(console)
    if len(data) <= limit:
        return console
    half = limit // 2
    marker = f"\n[rcubench: {len(data) - 2 * half} bytes of console cut here]\n".encode()
    return (data[:half] + marker + data[len(data) - half :]).decode("utf-8", "surrogateescape")


def console_bytes(console: str) -> bytes:
    """The console's bytes as the guest wrote them (RunOutcome.console decodes invalid UTF-8
    as surrogate escapes, so nothing is lost on the way)."""
    return console.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class RunOutcome:
    outcome: str
    reason: str
    console: str  # every byte the guest wrote, up to the cap; see console_bytes
    wall_seconds: float  # domain start to domain end
    ready_seconds: float | None  # domain start to the guest's READY marker
    host: HostLoad | None = None  # what else the host did meanwhile; None: not measured


@dataclass
class BootWatch:
    """What a runner's watch loop knows of one run: when it started, and when the console
    first showed init, the READY marker and a fatal message. Both runners end a run on the
    same console facts through it; only how the machine stops differs."""

    console: ConsoleFile
    started: float
    init_at: float | None = None
    ready_at: float | None = None
    fatal_at: float | None = None

    def see(self, now: float) -> None:
        """Read what the console added and note what it showed first."""
        self.console.poll()
        scan = self.console.scan
        if self.init_at is None and scan.init_reached:
            self.init_at = now
        if self.ready_at is None and scan.ready:
            self.ready_at = now
        if self.fatal_at is None and scan.fatal:
            self.fatal_at = now

    def ready(self) -> float | None:
        return None if self.ready_at is None else self.ready_at - self.started

    def outcome(self, code: str, reason: str, text: str, now: float) -> RunOutcome:
        return RunOutcome(code, reason, text, now - self.started, self.ready())

    def panic_settled(self, now: float) -> bool:
        """A fatal message was seen and its backtrace has had its time."""
        return self.fatal_at is not None and now - self.fatal_at >= PANIC_GRACE

    def flood(self) -> tuple[str, str] | None:
        """A console past its cap ends the run now; a panic before it stays a panic."""
        if not self.console.overflowed:
            return None
        if self.console.scan.fatal:
            return PANIC, self.console.scan.fatal
        return CONSOLE_OVERFLOW, f"the console passed its cap of {self.console.max_bytes} bytes"

    def over_limit(
        self, now: float, boot_timeout: float, run_timeout: float
    ) -> tuple[str, str] | None:
        """No init within the boot limit, or still running past boot + run limits."""
        elapsed = now - self.started
        if self.init_at is None and elapsed > boot_timeout:
            return BOOT_FAILED, f"no init within the boot limit of {boot_timeout:.0f} s"
        if self.init_at is not None and elapsed > boot_timeout + run_timeout:
            limit = boot_timeout + run_timeout
            return TIMEOUT, f"still running after {elapsed:.0f} s (limit {limit:.0f} s)"
        return None
