"""Boot one kernel once in a fresh transient libvirt domain and watch its console.

The outcome is one of ok, boot-failed, panic, timeout, console-overflow, infra-error; the
console is kept in every case, and the domain is destroyed on every path (a transient domain
then vanishes). Whether the benchmark's output is complete is the benchmark parser's call,
not ours. What else the host did meanwhile is sampled from /proc (hostload.py) and comes
with the outcome; where the host has spare cores the guest is pinned (domain.pinning).

The console is written by the kernel under test, so it is hostile input: any byte, any
length. It is read incrementally (each poll reads only what was added, and scans only the
lines that completed, at most _LINE_MAX bytes at a time), kept up to a cap, and decoded
without losing a byte (invalid UTF-8 as surrogate escapes, see `console_bytes`).
"""

import contextlib
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import libvirt

from workers.vm.connection import LibvirtUnavailable, open_connection
from workers.vm.domain import VMSpec, domain_xml, is_rcubench_domain, pinning
from workers.vm.hostload import HostLoad, HostMonitor
from workers.vm.outcomes import BOOT_FAILED, CONSOLE_OVERFLOW, INFRA, OK, PANIC, TIMEOUT

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
# Words every pattern above contains: a line without any is not decoded or searched, so a
# flood of short lines costs one search of each.
_MARKERS = re.compile(rb"Run /init|RCUBENCH-READY|reboot: Power down|Kernel panic|Oops|BUG|INFO: ")
# A longer line is scanned in windows of this many bytes overlapping by _OVERLAP, more than
# a printk record (1024 bytes with its timestamp), so a message cut by a window's end is
# whole in the next one and no pattern ever sees more than _LINE_MAX bytes.
_LINE_MAX = 8192
_OVERLAP = 2048
_REASON_MAX = 500  # characters of the fatal line kept as the run's reason
_POLL = 0.05
_PANIC_GRACE = 2.0  # seconds of console kept after a fatal line (the backtrace)


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
        self.init_reached = self.ready = self.powered_off = False
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
        if not self.fatal:
            self.fatal = fatal_message(line) or ""


class _Console:
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
    """The console's bytes as the guest wrote them (VMOutcome.console decodes invalid UTF-8
    as surrogate escapes, so nothing is lost on the way)."""
    return console.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class VMOutcome:
    outcome: str
    reason: str
    console: str  # every byte the guest wrote, up to the cap; see console_bytes
    wall_seconds: float  # domain start to domain end
    ready_seconds: float | None  # domain start to the guest's READY marker
    host: HostLoad | None = None  # what else the host did meanwhile; None: not measured


def run_vm(
    uri: str,
    spec: VMSpec,
    *,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None = None,
    console_max_bytes: int = CONSOLE_MAX_BYTES,
    pin: bool = True,
) -> VMOutcome:
    """Boot `spec`, wait until it powers off, panics, times out or floods its console past
    `console_max_bytes`; always destroy it. The host's load meanwhile is sampled from
    /proc; with `pin` and spare host cores, the guest's vCPUs and emulator are pinned."""
    spec.console_log.parent.mkdir(parents=True, exist_ok=True)
    spec.console_log.unlink(missing_ok=True)
    try:
        conn = open_connection(uri)
    except LibvirtUnavailable as exc:
        return VMOutcome(INFRA, str(exc), "", 0.0, None)
    console = _Console(spec.console_log, console_max_bytes)
    # The CPUs this worker may use (its cpuset), which are the ones QEMU inherits.
    cpus = pinning(spec.cpus, os.sched_getaffinity(0)) if pin else None
    monitor = HostMonitor(spec.name)
    dom = None
    started = time.monotonic()
    try:
        try:
            dom = conn.createXML(domain_xml(spec, cpus), 0)
        except libvirt.libvirtError as exc:
            return VMOutcome(INFRA, f"libvirt refused the domain: {exc}", "", 0.0, None)
        started = time.monotonic()
        monitor.start()
        out = _watch(dom, console, started, boot_timeout, run_timeout, on_poll, monitor.poll)
        return replace(out, host=monitor.result(pinned=cpus is not None))
    except libvirt.libvirtError as exc:
        return VMOutcome(INFRA, f"libvirt: {exc}", console.finish(),
                         time.monotonic() - started, None,
                         monitor.result(pinned=cpus is not None))  # fmt: skip
    finally:
        console.close()
        if dom is not None:
            _destroy(dom)
        conn.close()


def _watch(
    dom: libvirt.virDomain,
    console: _Console,
    started: float,
    boot_timeout: float,
    run_timeout: float,
    on_poll: Callable[[], None] | None,
    sample_host: Callable[[], None],
) -> VMOutcome:
    init_at: float | None = None
    ready_at: float | None = None
    fatal_at: float | None = None
    scan = console.scan
    while True:
        time.sleep(_POLL)
        sample_host()  # before the checks below, which may destroy the domain
        now = time.monotonic()
        console.poll()
        active = _active(dom) and not scan.powered_off
        if on_poll is not None:
            on_poll()
        if init_at is None and scan.init_reached:
            init_at = now
        if ready_at is None and scan.ready:
            ready_at = now
        if fatal_at is None and scan.fatal:
            fatal_at = now
        elapsed = now - started
        ready = None if ready_at is None else ready_at - started
        if console.overflowed:  # a flood ends the run now; a panic before it stays a panic
            text = _settle(dom, console)
            if scan.fatal:
                return VMOutcome(PANIC, scan.fatal, text, elapsed, ready)
            return VMOutcome(CONSOLE_OVERFLOW, f"the console passed its cap of "
                             f"{console.max_bytes} bytes", text, elapsed, ready)  # fmt: skip
        if fatal_at is not None and (not active or now - fatal_at >= _PANIC_GRACE):
            return VMOutcome(PANIC, scan.fatal, _settle(dom, console), elapsed, ready)
        if not active:
            text = console.finish()
            if scan.fatal:  # printed just before the VM stopped (panic=-1 reboots at once)
                return VMOutcome(PANIC, scan.fatal, text, elapsed, ready)
            if not scan.init_reached:
                return VMOutcome(BOOT_FAILED, "the VM stopped before the kernel ran init",
                                 text, elapsed, ready)  # fmt: skip
            return VMOutcome(OK, "powered off", text, elapsed, ready)
        if init_at is None and elapsed > boot_timeout:
            return VMOutcome(BOOT_FAILED, f"no init within the boot limit of {boot_timeout:.0f} s",
                             _settle(dom, console), elapsed, ready)  # fmt: skip
        if init_at is not None and elapsed > boot_timeout + run_timeout:
            return VMOutcome(TIMEOUT, f"still running after {elapsed:.0f} s (limit "
                             f"{boot_timeout + run_timeout:.0f} s)", _settle(dom, console),
                             elapsed, ready)  # fmt: skip


def _active(dom: libvirt.virDomain) -> bool:
    try:
        return bool(dom.isActive())
    except libvirt.libvirtError:
        return False  # a transient domain that stopped is gone


def _settle(dom: libvirt.virDomain, console: _Console) -> str:
    _destroy(dom)
    return console.finish()


def _destroy(dom: libvirt.virDomain) -> None:
    with contextlib.suppress(libvirt.libvirtError):  # already gone
        if dom.isActive():
            dom.destroy()


def new_domain_name(label: str) -> str:
    return f"rcubench-{label}-{uuid.uuid4().hex[:8]}"


def destroy_leftovers(uri: str, prefix: str) -> list[str]:
    """Destroy domains named `prefix`... that a killed worker left running; return their
    names. The prefix names one target, so a worker never touches another's domains."""
    if not is_rcubench_domain(prefix):
        raise ValueError(f"{prefix!r} is not an rcubench domain prefix")
    conn = open_connection(uri)
    gone = []
    try:
        for dom in conn.listAllDomains():
            if dom.name().startswith(prefix):
                _destroy(dom)
                with_name = dom.name()
                with contextlib.suppress(libvirt.libvirtError):  # transient: none to undefine
                    dom.undefine()
                gone.append(with_name)
    finally:
        conn.close()
    return gone
