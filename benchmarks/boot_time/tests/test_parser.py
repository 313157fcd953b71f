"""boot-time's parser on a real x86_64 console, and without the lines it needs."""

from pathlib import Path

import pytest

from benchmarks.boot_time.parser import parse
from benchmarks.spec import ParseError, RunContext

CONSOLE = (Path(__file__).parents[1] / "fixtures" / "x86_64-pc-tcg.log").read_text()
CTX = RunContext(wall_seconds=4.0, ready_seconds=2.5)


def test_a_real_boot_gives_kernel_init_and_host_times():
    parsed = parse(CONSOLE, CTX)
    assert 0 < parsed["kernel_to_init_ms"][0] < 60_000
    assert parsed["init_to_ready_ms"][0] >= 0
    assert parsed["host_to_ready_ms"] == (2500.0,)
    assert parsed["rcu_expedited"] == (0.0,)
    assert parsed["rcu_normal"] == (0.0,)


def test_without_the_kernels_run_init_line_it_is_an_error():
    cut = "\n".join(ln for ln in CONSOLE.splitlines() if "Run /init" not in ln)
    with pytest.raises(ParseError, match="Run /init as init process"):
        parse(cut, CTX)


def test_without_the_ready_marker_seen_by_the_host_it_is_an_error():
    with pytest.raises(ParseError, match="never printed RCUBENCH-READY"):
        parse(CONSOLE, RunContext(wall_seconds=4.0, ready_seconds=None))


def test_a_real_ppc64le_boot_parses():
    ppc = (Path(__file__).parents[1] / "fixtures" / "ppc64le-pseries-tcg.log").read_text()
    assert parse(ppc, CTX)["kernel_to_init_ms"][0] > 0
