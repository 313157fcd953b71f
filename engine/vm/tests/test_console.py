"""The runner's console watching on hostile consoles, without a boot: the scan of long
lines, incremental reads across virtlogd's rotation, and the size cap, through the same
watcher code a boot uses (a stand-in domain; the console file written by the test)."""

import re
import time
from pathlib import Path

import pytest

from engine.run.console import (
    ConsoleFile,
    ConsoleScan,
    RunOutcome,
    clip,
    console_bytes,
    fatal_message,
)
from engine.vm import runner

# The single alternation the runner used before the scan was made linear: the meaning kept.
BEFORE = re.compile(
    r"(?P<what>Kernel panic - not syncing.*"
    r"|Oops: .*|Oops\b.*\[#\d+\].*"
    r"|kernel BUG at .*|BUG: .*"
    r"|INFO: task .* blocked for more than \d+ seconds\."
    r"|rcu: INFO: .* detected stalls.*|INFO: rcu_\w+ (?:self-)?detected stall.*)"
)
LINES = [
    "[    1.234567] Kernel panic - not syncing: No working init found.",
    "[    2.000000] Oops: general protection fault, probably for non-canonical address",
    "[    2.000000] Oops 0002 [#1] PREEMPT SMP",
    "[    2.000000] Oopsy Oops daisy [#12] SMP",
    "[    2.000000] Oopsy daisy [#1]",
    "[    3.1] kernel BUG at kernel/rcu/tree.c:1234!",
    "[    3.1] BUG: kernel NULL pointer dereference, address: 0000000000000000",
    "[    3.1] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [rcu_scale_write:75]",
    "[  245.1] INFO: task rcu_scale_write:75 blocked for more than 120 seconds.",
    "[  245.1] INFO: task x blocked for more than 12 INFO: task y blocked for more than 3 seconds.",
    "[   21.0] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
    "[   21.0] INFO: rcu_preempt self-detected stall on CPU",
    "[   21.0] INFO: rcu_x INFO: rcu_sched detected stall on CPU",
    "[   21.0] rcu: INFO: rcu_preempt self-detected stall on CPU Oops: late",
    "BUG: first Kernel panic - not syncing: second",
    "[    0.5] Run /init as init process",
    "RCUBENCH-RECORD off_ms 1.5 2.5",
    "Oops",
    "INFO: task ",
    "",
]


@pytest.mark.parametrize("line", LINES)
def test_the_fatal_scan_finds_what_the_single_pattern_found(line):
    before = BEFORE.search(line)
    assert fatal_message(line) == (before.group("what").strip() if before else None)
    scan = ConsoleScan()  # and so does the watcher's scan, which skips lines quickly first
    scan.feed(f"{line}\r\n".encode())
    assert scan.fatal == (before.group("what").strip() if before else "")


@pytest.mark.parametrize(
    "lead", ["Oops ", "INFO: task ", "rcu: INFO: ", "INFO: rcu_x ", "BUG", "Kernel panic"]
)
def test_a_1_mb_line_is_scanned_in_linear_time_and_a_panic_at_its_end_is_found(lead):
    # Before: "Oops " repeated over 20 kB took 0.08 s, quadratic in the length (a 352 kB
    # line took seconds per poll); each place a pattern's first words occur was retried.
    line = (lead * (2**20 // len(lead))).encode()
    started = time.monotonic()
    plain = ConsoleScan()
    plain.feed(line + b"\n")
    fatal = ConsoleScan()
    fatal.feed(line + b" Kernel panic - not syncing: at the end\n")
    assert time.monotonic() - started < 2.0  # measured 0.02 s each; generous for load
    assert plain.fatal == ""
    assert fatal.fatal.endswith("Kernel panic - not syncing: at the end")
    assert len(fatal.fatal) <= 500


def test_lines_are_scanned_when_complete_across_reads_and_windows():
    scan = ConsoleScan()
    for piece in (b"[ 0.9] Run /ini", b"t as init process\r\nRCUBENCH-READY v1 uptime=0.95\r\n"):
        scan.feed(piece)
    assert (scan.init_reached, scan.ready, scan.fatal) == (True, True, "")
    # A message straddling a window of a long line is whole in the next (overlapping) one.
    for cut in (8192 - 20, 8192 + 100, 3 * 6144 + 8192 - 5):
        scan = ConsoleScan()
        scan.feed(b"x" * cut + b"Kernel panic - not syncing: VFS")
        assert scan.fatal == ""  # no newline yet: the line may go on
        scan.feed(b" unable to mount root\n")
        assert scan.fatal.endswith("Kernel panic - not syncing: VFS unable to mount root"), cut
    scan = ConsoleScan()
    scan.feed(b"reboot: Power down")  # the console's last bytes, without a newline
    assert not scan.powered_off
    scan.flush()
    assert scan.powered_off


class _Domain:
    """A stand-in for libvirt's virDomain: running until destroyed or stopped."""

    def __init__(self) -> None:
        self.active, self.destroyed = True, False

    def isActive(self) -> bool:  # libvirt's name
        return self.active

    def destroy(self) -> None:
        self.active, self.destroyed = False, True


def _watch(path: Path, dom: _Domain, max_bytes: int = 4096) -> RunOutcome:
    console = ConsoleFile(path, max_bytes)
    try:
        return runner._watch(dom, console, time.monotonic(), 60, 60, None, lambda: None)
    finally:
        console.close()


def test_a_console_past_its_cap_ends_the_run_and_keeps_every_byte_up_to_it(tmp_path):
    log = tmp_path / "console.log"
    hostile = b"RCUBENCH-READY v1 uptime=0.5\n\0\xff\xfe bad utf-8 \xc3(\n"
    with log.open("wb") as f:  # 100 MB: what a flooding guest writes between two polls
        f.write(hostile)
        f.write(b"A" * (100 * 2**20))
    dom = _Domain()
    out = _watch(log, dom, max_bytes=16 * 2**20)
    assert (out.outcome, out.reason) == ("console-overflow", f"the console passed its cap of "
                                         f"{16 * 2**20} bytes")  # fmt: skip
    assert dom.destroyed
    data = console_bytes(out.console)
    assert len(data) == 16 * 2**20 + 1  # read no further than the cap
    assert data.startswith(hostile)  # NUL and invalid UTF-8 byte for byte


def test_a_panic_printed_as_the_vm_stops_is_a_panic(tmp_path):
    # panic=-1 reboots at once and on_reboot=destroy ends the domain: the fatal line can
    # arrive in the same poll that finds the domain gone.
    log = tmp_path / "console.log"
    log.write_bytes(b"[ 0.9] Run /init as init process\n[ 1.0] Kernel panic - not syncing: x")
    dom = _Domain()
    dom.active = False
    out = _watch(log, dom)
    assert (out.outcome, out.reason) == ("panic", "Kernel panic - not syncing: x")


def test_the_console_is_read_incrementally_across_virtlogd_rotation(tmp_path):
    log = tmp_path / "console.log"
    console = ConsoleFile(log, 1 << 20)
    console.poll()  # not created yet
    log.write_bytes(b"one\n")
    console.poll()
    with log.open("ab") as f:
        f.write(b"two\n")
    console.poll()
    assert bytes(console.data) == b"one\ntwo\n"
    # virtlogd past max_size: the last bytes go to the old file, it is renamed, a new one.
    with log.open("ab") as f:
        f.write(b"three\n")
    log.rename(tmp_path / "console.log.0")
    log.write_bytes(b"four\n")
    console.poll()
    console.poll()
    assert console.finish() == "one\ntwo\nthree\nfour\n"


def test_clip_keeps_head_and_tail_and_says_how_many_bytes_were_cut():
    console = "H" * 100 + "\udcff" + "é" * 1000 + "T" * 100
    kept = clip(console, 200)
    size = len(console_bytes(console))
    assert kept == "H" * 100 + f"\n[rcubench: {size - 200} bytes of console cut here]\n" + "T" * 100
    assert clip("short \udcff", 200) == "short \udcff"
