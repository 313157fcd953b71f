"""The exp-load parser on its real x86_64 console made to break the load's guarantees (what
the whole console parses to, and the real consoles of a boot without the load and of one
whose load started after the writer, are golden files: benchmarks/tests/test_golden.py)."""

import re
import time
from pathlib import Path

import pytest

from benchmarks.spec import ParseError
from benchmarks.sync_rcu_latency_exp_load.parser import parse

FIXTURES = Path(__file__).parents[1] / "fixtures"
CONSOLE = (FIXTURES / "x86_64-pc-tcg.log").read_bytes().decode("utf-8", "surrogateescape")
START_NS = int(re.search(r"rcu-scale: start: (\d+)", CONSOLE).group(1))  # type: ignore[union-attr]
RUNNING = next(ln for ln in CONSOLE.splitlines() if "rcubench-exp-load: running" in ln)
RATES = [ln for ln in CONSOLE.splitlines() if "rcubench-exp-load: rate" in ln]


def _marker_at(ns: str) -> str:
    return CONSOLE.replace(RUNNING, re.sub(r"mono_ns=\d+", f"mono_ns={ns}", RUNNING))


def test_without_the_running_line_the_load_never_ran():
    with pytest.raises(ParseError, match="no 'rcubench-exp-load: running' line"):
        parse(CONSOLE.replace(RUNNING, ""))


@pytest.mark.parametrize("late_ns", [START_NS, START_NS + 1, START_NS + 10**9])
def test_a_load_running_only_from_the_writers_start_or_later_is_refused(late_ns):
    with pytest.raises(ParseError, match=r"running only from .* after rcuscale's writer started"):
        parse(_marker_at(str(late_ns)))


def test_a_load_that_stopped_is_refused_with_its_reason():
    stopped = "[    4.0] rcubench-exp-load: stopped mono_ns=4000000000 reason=umount-1:Busy"
    with pytest.raises(ParseError, match=r"the expedited load stopped: .*umount-1:Busy"):
        parse(CONSOLE.replace(RATES[-1], f"{RATES[-1]}\n{stopped}"))


def test_a_guest_program_that_ended_is_refused_with_the_guests_reason():
    end = (
        "RCUBENCH-STDERR cannot open /dev/kmsg: No such file or directory\n"
        "RCUBENCH-END v1 bench=sync-rcu-latency-exp-load status=error records=0 reason=exit-2"
    )
    with pytest.raises(ParseError, match=r"failed in the guest \(exit-2\): cannot open /dev/kmsg"):
        parse(f"{CONSOLE}\n{end}\n")


def test_a_guest_program_that_returned_ok_still_ended_the_load_early():
    end = "RCUBENCH-END v1 bench=sync-rcu-latency-exp-load status=ok records=0"
    with pytest.raises(ParseError, match="guest program ended before rcuscale powered"):
        parse(f"{CONSOLE}\n{end}\n")


def test_a_load_thread_that_made_no_progress_for_a_period_is_refused():
    stalled = RATES[0].replace(re.search(r"slowest=\d+", RATES[0]).group(), "slowest=0")  # type: ignore[union-attr]
    with pytest.raises(ParseError, match="a load thread made no progress in the period to"):
        parse(CONSOLE.replace(RATES[0], stalled))


def test_without_a_rate_line_after_the_start_the_load_is_unproven():
    console = CONSOLE
    for line in RATES:
        console = console.replace(line, "")
    with pytest.raises(ParseError, match="no 'rcubench-exp-load: rate' line after the load"):
        parse(console)


def test_another_thread_count_than_the_spec_is_refused():
    with pytest.raises(ParseError, match="the load ran 1 threads, the spec asks for 2"):
        parse(CONSOLE.replace(RUNNING, RUNNING.replace("threads=2", "threads=1")))


def test_two_running_lines_are_a_garbled_console():
    with pytest.raises(ParseError, match="2 'rcubench-exp-load: running' lines"):
        parse(CONSOLE.replace(RUNNING, f"{RUNNING}\n{RUNNING}"))


def test_the_writer_lines_are_held_to_sync_rcu_latencys_rules():
    cut = CONSOLE[: CONSOLE.index("writer-duration:    57")]
    with pytest.raises(ParseError, match=r"writer 0: 57 writer-duration lines for gps 101"):
        parse(cut)


@pytest.mark.parametrize(
    ("line", "reason"),
    [(RUNNING, r"load start \(ns\)=9{40}: out of range"),
     (RATES[-1], r"rate time \(ns\)=9{40}: out of range")],
    ids=["running", "rate"],
)  # fmt: skip
def test_an_absurd_time_is_refused_before_it_is_used(line, reason):
    # 5000 digits: int() alone would raise ValueError (Python's 4300-digit limit).
    absurd = re.sub(r"mono_ns=\d+", "mono_ns=" + "9" * 5000, line)
    started = time.monotonic()
    with pytest.raises(ParseError, match=reason):
        parse(CONSOLE.replace(line, absurd))
    assert time.monotonic() - started < 1.0
