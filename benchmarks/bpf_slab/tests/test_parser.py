"""bpf-slab's parser on a real x86_64 console, and on consoles it must refuse."""

from pathlib import Path

import pytest

from benchmarks.bpf_slab.parser import parse
from benchmarks.bpf_slab.spec import DELAYS_MS, SPEC
from benchmarks.spec import ParseError

CONSOLE = (Path(__file__).parents[1] / "fixtures" / "x86_64-pc-tcg.log").read_text()


def _line(name: str) -> str:
    return next(ln for ln in CONSOLE.splitlines() if f"RCUBENCH-RECORD {name} " in ln)


def test_a_real_run_gives_every_metric_of_the_spec():
    parsed = parse(CONSOLE)
    assert set(parsed) == {m.name for m in SPEC.metrics}
    for d in DELAYS_MS:
        assert parsed[f"slab_kb_peak_d{d}"][0] >= parsed[f"slab_kb_mean_d{d}"][0] > 0
        assert parsed[f"update_rate_d{d}"][0] > 0


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


def test_a_real_ppc64le_run_parses_whole():
    ppc = (Path(__file__).parents[1] / "fixtures" / "ppc64le-pseries-tcg.log").read_text()
    assert set(parse(ppc)) == {m.name for m in SPEC.metrics}
