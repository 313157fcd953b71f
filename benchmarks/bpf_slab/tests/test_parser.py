"""bpf-slab's parser on consoles it must refuse, made from a real x86_64 one (what the
whole console parses to is its golden file, benchmarks/tests/test_golden.py)."""

from pathlib import Path

import pytest

from benchmarks.bpf_slab.parser import parse
from benchmarks.spec import ParseError

CONSOLE = (Path(__file__).parents[1] / "fixtures" / "x86_64-pc-tcg.log").read_text()


def _line(name: str) -> str:
    return next(ln for ln in CONSOLE.splitlines() if f"RCUBENCH-RECORD {name} " in ln)


def test_other_delay_steps_than_the_spec_asks_for_are_an_error():
    line = _line("delay_ms")
    with pytest.raises(ParseError, match="ran delays"):
        parse(CONSOLE.replace(line, line.replace(" 10", " 20")))


def test_a_step_with_no_map_updates_is_an_error():
    line = _line("update_rate")
    values = line.split("update_rate ")[1].split()
    stuck = line.replace(values[0], "0.0", 1)
    with pytest.raises(ParseError, match="made no map updates"):
        parse(CONSOLE.replace(line, stuck))


def test_a_console_cut_mid_records_is_an_error():
    with pytest.raises(ParseError, match="no RCUBENCH-END line for bpf-slab"):
        parse(CONSOLE[: CONSOLE.index("RCUBENCH-RECORD update_rate")])
