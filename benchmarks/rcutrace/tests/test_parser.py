"""The trace parser on real traced consoles (fixtures/README.md says how each was captured),
whole (their golden files) and cut or altered the ways a run can lose or garble them."""

import json
import re
import time
from pathlib import Path

import pytest

from benchmarks.rcutrace import golden
from benchmarks.rcutrace.parser import (
    MAX_LOSS,
    events,
    parse,
    parse_console,
    split,
    summary,
    text,
)  # fmt: skip
from benchmarks.spec import ParseError
from benchmarks.sync_rcu_latency.parser import parse as parse_rcuscale

X86 = (golden.FIXTURES / "x86_64-pc-tcg.log").read_text()


def _split(console: str) -> tuple[str, str]:
    rest, dump = split(console)
    assert dump is not None
    return rest, dump


@pytest.mark.parametrize("fixture", golden.fixtures(), ids=lambda p: p.name)
def test_each_traced_console_parses_to_its_golden_file(fixture: Path):
    path = golden.expected_path(fixture)
    assert path.exists(), "run: .venv/bin/python -m benchmarks.rcutrace.golden --update"
    assert json.loads(golden.render(fixture)) == json.loads(path.read_text())


@pytest.mark.parametrize("fixture", golden.fixtures(), ids=lambda p: p.name)
def test_every_grace_period_of_the_benchmark_is_paired(fixture: Path):
    trace = parse_console(fixture.read_text())
    assert trace.usable
    assert trace.paired_share >= 0.99
    assert len(trace.window) == trace.test_gps  # rcuscale's own count


@pytest.mark.parametrize("fixture", golden.fixtures(), ids=lambda p: p.name)
def test_the_phases_add_up_to_each_grace_periods_duration(fixture: Path):
    for gp in parse_console(fixture.read_text()).gps:
        assert gp.init_us + gp.first_wait_us + gp.after_us == gp.duration_us
        assert min(gp.init_us, gp.first_wait_us, gp.after_us) >= 0


def test_the_console_without_the_dump_reads_as_the_untraced_one_does():
    console, dump = _split(X86)
    assert "Dumping ftrace buffer:" in dump
    assert "Dumping ftrace buffer" not in console
    assert "us : rcu_" not in console
    assert len(console.split("\n")) + len(dump.split("\n")) == len(X86.split("\n"))
    # the benchmark's parser gives the same on both: what the verdict runs would measure
    assert parse_rcuscale(console) == parse_rcuscale(X86)
    assert console.endswith(X86[-200:])


def test_a_console_without_a_dump_is_left_whole():
    plain = (
        X86[: X86.index("Dumping ftrace buffer:")] + X86[X86.index("rcu-scale: Test complete") :]
    )
    assert split(plain) == (plain, None)
    with pytest.raises(ParseError, match="no ftrace dump"):
        parse_console(plain)


def test_a_dump_without_rcu_events_is_an_error_not_an_empty_trace():
    begin = X86.index("Dumping ftrace buffer:")
    first_event = X86.index("\n", X86.index("---------", begin)) + 1
    end = X86.index("\n", X86.index("---------", first_event)) + 1
    empty = X86[:first_event] + X86[X86.rindex("\n", 0, end - 2) + 1 :]
    with pytest.raises(ParseError, match="holds no RCU events"):
        parse_console(empty)


def test_a_dump_cut_off_loses_the_windows_last_grace_periods_and_is_not_used():
    console, dump = _split(X86)
    lines = dump.split("\n")
    cut = "\n".join(lines[: int(len(lines) * 0.9)])
    trace = parse(cut, console)
    assert trace.test_gps is not None
    assert len(trace.window) < trace.test_gps
    assert trace.loss > MAX_LOSS
    assert not trace.usable
    assert summary(trace) == {}


def test_grace_periods_missing_from_the_middle_are_counted_as_lost():
    console, dump = _split(X86)
    starts = [m.start() for m in re.finditer(r".*rcu_grace_period: rcu_sched -\d+ start", dump)]
    middle = len(starts) // 2
    holed = dump[: starts[middle]] + dump[starts[middle + 3] :]  # three GPs' records gone
    trace = parse(holed, console)
    assert trace.missing_gps + trace.interior_unpaired >= 3
    assert not trace.usable


def test_the_dumps_own_lost_lines_are_counted():
    console, dump = _split(X86)
    at = dump.index("\n", len(dump) // 2) + 1
    # The kernel's wording (kernel/trace/trace.c: print_trace_line), on a real dump.
    lossy = dump[:at] + "[    2.800000] CPU:1 [LOST 400 EVENTS]\n" + dump[at:]
    trace = parse(lossy, console)
    assert trace.lost_events == 400
    assert trace.loss == pytest.approx(400 / (trace.events + 400))
    assert not trace.usable


def test_expedited_grace_periods_pair_like_the_kernels_script():
    # kvm-recheck-rcuscale-ftrace.sh: a start before the last one ended is one lost record
    _, dump = _split(X86)
    evs, _ = events(dump)
    starts = [e for e in evs if e.name == "rcu_exp_grace_period" and e.args[2] == "start"]
    assert starts, "the fixture has expedited grace periods (boot's)"
    trace = parse(dump, "")
    assert trace.exp_lost == 0
    line = next(
        ln for ln in dump.split("\n") if "rcu_exp_grace_period" in ln and ln.endswith(" start")
    )
    doubled = dump.replace(line, f"{line}\n{line}", 1)
    assert parse(doubled, "").exp_lost == 1


def test_hostile_lines_in_the_dump_are_bounded_work():
    console, dump = _split(X86)
    at = dump.index("\n", len(dump) // 2) + 1
    hostile = dump[:at] + ("rcu_sche-15 " * 40_000) + "\n" + ("-1" * 100_000) + "\n" + dump[at:]
    started = time.monotonic()
    trace = parse(hostile, console)
    assert time.monotonic() - started < 5
    assert trace.usable


def test_a_kernel_with_tracing_built_in_and_no_event_on_dumps_two_lines_taken_off():
    # A verdict run's console once every kernel carries the tracing Kconfig: rcuscale's
    # dump finds the buffer empty.
    path = Path(__file__).parents[2] / "sync_rcu_latency/fixtures/x86_64-pc-tcg-tracing-built.log"
    whole = path.read_text()
    console, dump = _split(whole)
    assert dump.split("\n")[1].strip().endswith("(ftrace buffer empty)")
    assert len(dump.split("\n")) == 2
    assert "rcu-scale: Test complete" in console
    assert parse_rcuscale(console) == parse_rcuscale(whole)
    with pytest.raises(ParseError, match="holds no RCU events"):
        parse(dump, console)


def test_numbers_no_kernel_prints_are_not_read_and_never_raise():
    # int() refuses strings of more than 4,300 digits: a parser that took \d+ whole raised.
    console, dump = _split(X86)
    report = next(ln for ln in dump.split("\n") if "rcu_quiescent_state_report:" in ln)
    batch = next(ln for ln in dump.split("\n") if "CBs-invoked=" in ln)
    huge = "9" * 5000
    garbled = [
        report.replace("us : ", f"{huge}us : ", 1).replace(report.split("us : ")[0], "x-1 0 "),
        re.sub(r"rcu_sched (-?\d+) (\w+)>", f"rcu_sched \\1 {'f' * 5000}>", report),
        batch.replace("CBs-invoked=", "CBs-invoked=abc", 1),
        f"[    2.8] CPU:1 [LOST {huge} EVENTS]",
        f"[    2.8] rcu-scale: start: 1 end: 2 duration: {huge} gps: {huge}",
    ]
    at = dump.index("\n", len(dump) // 2) + 1
    trace = parse(dump[:at] + "\n".join(garbled) + "\n" + dump[at:], console + garbled[-1])
    assert trace.usable
    assert trace.test_gps == 101


# The line of ftrace's text form as trace viewers read it (Perfetto's systrace importer
# takes the task up to the last "-pid", then "[cpu]", at most four flag characters, the
# timestamp in seconds, the event name): written from that format, not from our output.
_TEXT_LINE = re.compile(r"^\s*(?P<task>.+)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+[a-zA-Z0-9.]{0,4}\s+"
                        r"(?P<s>\d+)\.(?P<us>\d{6}):\s+(?P<event>\S+):\s(?P<args>.*)$")  # fmt: skip


@pytest.mark.parametrize("fixture", golden.fixtures(), ids=lambda p: p.name)
def test_the_download_is_ftrace_text_that_carries_every_event_unchanged(fixture: Path):
    _, dump = _split(fixture.read_text())
    out = text(dump)
    assert out.startswith("# tracer: nop\n")
    lines = [ln for ln in out.splitlines() if not ln.startswith("#")]
    evs, _ = events(dump)
    assert len(lines) == len(evs) > 1000
    for line, ev in zip(lines, evs, strict=True):
        m = _TEXT_LINE.match(line)
        assert m, line
        assert (m["task"].strip(), int(m["pid"]), int(m["cpu"])) == (ev.task, ev.pid, ev.cpu)
        assert int(m["s"]) * 10**6 + int(m["us"]) == ev.us
        assert (m["event"], tuple(m["args"].split())) == (ev.name, ev.args)


def test_the_download_keeps_lost_lines_and_drops_what_is_not_the_trace():
    _, dump = _split(X86)
    lines = dump.split("\n")
    noise = ["[    2.6] CPU:1 [LOST 7 EVENTS]", "[    2.6] \x1b[31m<script>"]
    hostile = [*lines[:3], *noise, *lines[3:]]
    out = text("\n".join(hostile))
    assert "CPU:1 [LOST 7 EVENTS]\n" in out
    assert "<script>" not in out
    assert "\x1b" not in out
