"""boot-time's parser on a real x86_64 console without the lines it needs (what the whole
console parses to is its golden file, benchmarks/tests/test_golden.py)."""

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
