"""boot-time's parser on a real x86_64 console without the lines it needs (what the whole
console parses to is its golden file, benchmarks/tests/test_golden.py)."""

import re
from pathlib import Path

import pytest

from benchmarks.boot_time.parser import parse
from benchmarks.spec import ParseError, RunContext

CONSOLE = (Path(__file__).parents[1] / "fixtures" / "x86_64-pc-tcg.log").read_text()
CTX = RunContext(wall_seconds=4.0, ready_seconds=2.5)


def test_without_the_kernels_run_init_line_it_is_an_error():
    cut = "\n".join(ln for ln in CONSOLE.splitlines() if "Run /init" not in ln)
    with pytest.raises(ParseError, match="Run /init as init process"):
        parse(cut, CTX)


def test_without_the_ready_marker_seen_by_the_host_it_is_an_error():
    with pytest.raises(ParseError, match="never printed RCUBENCH-READY"):
        parse(CONSOLE, RunContext(wall_seconds=4.0, ready_seconds=None))


def _with_entries(console: str, entries: str) -> str:
    """The console with its trace_entries record saying `entries` (in buffer, written)."""
    record = "RCUBENCH-RECORD trace_entries"
    out = re.sub(rf"{record} \d+ \d+", f"{record} {entries}", console)
    assert out != console
    return out


def test_a_trace_that_wrapped_is_refused_not_undercounted():
    written = int(re.search(r"trace_entries \d+ (\d+)", CONSOLE).group(1))  # type: ignore[union-attr]
    with pytest.raises(ParseError, match=r"wrapped: 1 of \d+ events lost"):
        parse(_with_entries(CONSOLE, f"{written - 1} {written}"), CTX)


def test_a_boot_that_traced_nothing_is_refused_not_read_as_no_grace_periods():
    with pytest.raises(ParseError, match="holds no RCU events"):
        parse(_with_entries(CONSOLE, "0 0"), CTX)


def test_without_the_trace_record_it_is_an_error():
    cut = CONSOLE.replace("RCUBENCH-RECORD trace_entries", "RCUBENCH-RECORD trace_entries_x")
    with pytest.raises(ParseError, match=r"no record for \['trace_entries'\]"):
        parse(cut, CTX)


def test_only_ends_stamped_by_run_init_count_before_the_boot_end():
    """The real boot has grace periods on both sides of RCU's boot end (26 of 69 normal
    ones before it on x86_64); moving the boot end (the "Run /init" stamp) before the first
    end counts none."""
    got = parse(CONSOLE, CTX)
    ends = [float(t) for ln in CONSOLE.splitlines() if "RCUBENCH-RECORD gp_end_s" in ln
            for t in ln.split()[2:]]  # fmt: skip
    boot_end = got["kernel_to_init_ms"][0] / 1e3
    assert 0 < got["gps_to_boot_end"][0] < len(ends)
    assert got["gps_to_boot_end"][0] == sum(t <= boot_end for t in ends)
    earlier = re.sub(r"\[\s*\d+\.\d+\] Run /init", f"[{min(ends) - 1e-6:12.6f}] Run /init",
                     CONSOLE)  # fmt: skip
    assert parse(earlier, CTX)["gps_to_boot_end"] == (0.0,)


def test_init_to_ready_is_read_on_the_kernels_clock_not_across_to_proc_uptime():
    """READY's /proc/uptime lagged the printk clock by up to 70 ms on ppc64le (a run whose
    READY said 1.28 s after "Run /init" at 1.349 s); the guest program's own kernel message
    is stamped on the printk clock."""
    starts = re.search(r"\[\s*(\d+\.\d+)\] rcubench: boot-time starts", CONSOLE)
    assert starts is not None
    got = parse(CONSOLE, CTX)
    assert got["init_to_ready_ms"][0] == pytest.approx(
        float(starts.group(1)) * 1e3 - got["kernel_to_init_ms"][0]
    )
    assert got["init_to_ready_ms"][0] > 0
    cut = "\n".join(ln for ln in CONSOLE.splitlines() if "rcubench: boot-time starts" not in ln)
    with pytest.raises(ParseError, match="could not write /dev/kmsg"):
        parse(cut, CTX)
    early = CONSOLE.replace(starts.group(0), "[    0.000001] rcubench: boot-time starts")
    with pytest.raises(ParseError, match=r"started \(0.000001 s\) before init"):
        parse(early, CTX)
