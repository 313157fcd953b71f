"""Every benchmark's parser on its real captured console made hostile: whatever the kernel
prints, a parser gives the spec's metrics or a ParseError with the reason, never another
exception (which used to end the run "lost"), and in time linear in the console."""

import json
import re
import time
from pathlib import Path

import pytest

from benchmarks import golden
from benchmarks.registry import BENCHMARKS, Benchmark, get
from benchmarks.spec import Parsed, ParseError, RunContext


def _parsed_x86_consoles() -> dict[str, Path]:
    """Each benchmark's first x86_64 fixture that its golden file says parses, so a new
    benchmark is held to these tests by adding its fixtures, not by editing this file."""
    found: dict[str, Path] = {}
    for case in golden.cases():
        stored = json.loads(case.expected.read_text())
        if case.fixture.name.startswith("x86_64") and "metrics" in stored:
            found.setdefault(stored["benchmark"], case.fixture)
    return found


FIXTURES = _parsed_x86_consoles()
CTX = RunContext(wall_seconds=30.0, ready_seconds=2.0)
FRAMED = ["smt-toggle", "boot-time", "bpf-slab"]


def _console(name: str) -> str:
    # As the runner hands it over: invalid UTF-8 as surrogate escapes.
    return FIXTURES[name].read_bytes().decode("utf-8", "surrogateescape")


def _refused(name: str, console: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        get(name).measure(console, CTX)


def test_every_benchmark_has_a_captured_console():
    assert set(FIXTURES) == set(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_nul_and_invalid_utf8_around_the_output_lose_nothing(name):
    console = _console(name)
    junk = "\0\udcff\udcfe\x1b[0m \0"  # NULs, bytes that are not UTF-8, escapes
    hostile = "".join(f"{line}\n{junk}\n" for line in console.splitlines())
    assert get(name).measure(hostile, CTX) == get(name).measure(console, CTX)


@pytest.mark.parametrize("name", FRAMED)
@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        # (pattern in the console, replacement, ParseError message)
        ((r"(RCUBENCH-RECORD \w+ )(\S+)", r"\g<1>1e999"), "non-finite value '1e999'"),
        ((r"(RCUBENCH-RECORD \w+ )(\S+)", "\\g<1>nan"), "non-finite value 'nan'"),
        ((r"(RCUBENCH-RECORD \w+ )(\S+)", "\\g<1>\0"), r"not a number '\\x00'"),
        ((r"records=\d+", "records=" + "9" * 5000), "END says 9{20} records"),
        ((r"uptime=[0-9.]+", "uptime=1.2.3"), "not a number '1.2.3'"),
        ((r"status=ok records=(\d+)", r"status=error records=\1 reason=" + "x" * 10**5),
         r"failed in the guest \(x{200}\.\.\.\)$"),
    ],
)  # fmt: skip
def test_malformed_framed_values_are_parse_errors_with_the_reason(name, edit, reason):
    pattern, replacement = edit
    console = re.sub(pattern, replacement, _console(name), count=1)
    _refused(name, console, reason)


@pytest.mark.parametrize("name", FRAMED)
def test_a_record_line_of_repeated_markers_is_refused_in_linear_time(name):
    # Every place the marker occurred used to be tried to the line's end: quadratic.
    line = "RCUBENCH-RECORD x " * 100_000 + "\tgarbage"
    console = _console(name)
    begin = console.index("\n", console.index("RCUBENCH-BEGIN")) + 1
    started = time.monotonic()
    _refused(name, console[:begin] + line + "\n" + console[begin:], "garbled record line")
    assert time.monotonic() - started < 5.0  # 0.15 s measured for this 1.8 MB line


@pytest.mark.parametrize("name", FRAMED)
def test_inits_window_guards_are_read_and_an_older_init_or_a_count_going_back_refused(name):
    """vm-images/init's /proc/stat window (benchmarks/guest.py WINDOW) in every frame of a
    guest program that returns: one value each, never negative."""
    console = _console(name)
    got = get(name).measure(console, CTX)
    for metric in ("window_system_ms", "window_ctxt", "window_rcu_softirqs"):
        (value,) = got[metric]
        assert value >= 0
    assert got["window_ctxt"][0] > 0  # a program that ran at all switched context
    older = console.replace("RCUBENCH-RECORD window_ctxt ", "RCUBENCH-RECORD window_other ")
    _refused(name, older, "init printed 0 window_ctxt records, not 1")
    back = re.sub(r"RCUBENCH-RECORD window_rcu_softirqs \d+", "RCUBENCH-RECORD "
                  "window_rcu_softirqs -3", console)  # fmt: skip
    _refused(name, back, r"window_rcu_softirqs went backwards \(-3\)")


def test_bpf_slab_delay_steps_are_compared_as_numbers():
    console = re.sub(r"RCUBENCH-RECORD delay_ms 0 ", "RCUBENCH-RECORD delay_ms 0.5 ",
                     _console("bpf-slab"))  # fmt: skip
    _refused("bpf-slab", console, r"ran delays \(0\.5, ")


def test_a_parser_output_that_breaks_the_spec_is_a_parse_error():
    real = get("smt-toggle")

    def parser(console: str, ctx: RunContext):
        return {"off_ms": (1.0,), "on_ms": (float("inf"),)}

    with pytest.raises(ParseError, match="a non-finite value for on_ms"):
        Benchmark(real.spec, parser).measure("", CTX)
    with pytest.raises(ParseError, match="no value for on_ms"):
        Benchmark(real.spec, lambda c, x: {"off_ms": (1.0,)}).measure("", CTX)
    boot = get("boot-time")
    two: Parsed = {m.name: (1.0, 2.0) for m in boot.spec.metrics}
    with pytest.raises(ParseError, match="2 values for kernel_to_init_ms"):
        Benchmark(boot.spec, lambda c, x: two).measure("", CTX)


# The in-kernel rcuscale benchmarks: init's window of the calls, framed on the kernel log.
RCUSCALE = sorted(
    n for n in BENCHMARKS if any(m.name == "gp_kthread_ms" for m in get(n).spec.metrics)
)
_WINDOW_END = "RCUBENCH-END v1 bench=rcuscale-window status=ok records=4"


@pytest.mark.parametrize("name", RCUSCALE)
def test_rcuscale_window_is_read_and_a_console_without_it_or_a_failed_one_refused(name):
    """vm-images/init's rcuscale window (benchmarks/guest.py RCUSCALE_WINDOW): the
    grace-period kthread ran during the calls, and the kernel printed the frame before it
    powered off; an older initramfs's console, or init's own refusal, fails the run."""
    console = _console(name)
    got = get(name).measure(console, CTX)
    assert got["gp_kthread_ms"][0] > 0
    assert got["window_ctxt"][0] > 0
    assert got["window_rcu_softirqs"][0] > 0
    assert console.index(_WINDOW_END) < console.index("reboot: Power down")
    older = re.sub(r".*bench=rcuscale-window.*\n", "", console)
    _refused(name, older, r"rcuscale's window: init printed no frame of it \(an initramfs older")
    failed = console.replace(_WINDOW_END, "RCUBENCH-END v1 bench=rcuscale-window "
                             "status=error records=4 reason=no-schedstat")  # fmt: skip
    _refused(
        name, failed, r"rcuscale's window: rcuscale-window failed in the guest \(no-schedstat\)"
    )
    back = re.sub(r"RCUBENCH-RECORD gp_kthread_ms [0-9.]+", "RCUBENCH-RECORD gp_kthread_ms -1",
                  console)  # fmt: skip
    _refused(name, back, r"gp_kthread_ms went backwards \(-1\)")
